"""'Did you mean': one ranking for every unknown name a user writes."""

from __future__ import annotations

from reconciler.suggest import closest, did_you_mean


def test_best_first_ties_alphabetical_case_ignored() -> None:
    assert closest("gpu-smal", ["gpu-small", "gpu-large", "cpu"], limit=2) == ["gpu-small"]
    assert closest("abcd", ["abcf", "abce"], limit=2) == ["abce", "abcf"]  # a tie: alphabetical
    assert closest("Partition", ["partition"]) == ["partition"]


def test_the_message_names_each_choice_after_its_prefix_or_is_empty() -> None:
    assert did_you_mean("suspendTim", ["suspendTime", "resumeTimeout"]) == (
        "did you mean 'suspendTime'?"
    )
    assert did_you_mean("uri", ["url", "uris"], limit=2, prefix="ldap.") == (
        "did you mean 'ldap.uris', 'ldap.url'?"
    )
    assert did_you_mean("zzz", ["alpha", "beta"]) == ""
