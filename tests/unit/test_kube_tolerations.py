"""Taints and tolerations as the default scheduler reads them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.kuberules.tolerations import (
    blocking_taints,
    describe,
    tolerates_all,
    untolerated,
)

TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}


def pod(*tolerations: dict) -> dict:
    return {"spec": {"tolerations": list(tolerations)}}


def test_blocking_taints_are_noschedule_noexecute_and_a_cordon() -> None:
    node = {"spec": {"unschedulable": True, "taints": [
        TAINT,
        {"key": "gpu", "effect": "NoExecute"},
        {"key": "soft", "effect": "PreferNoSchedule"},
    ]}}  # fmt: skip
    assert [describe(t) for t in blocking_taints(node)] == [
        "dedicated=infer:NoSchedule",
        "gpu:NoExecute",
        "node.kubernetes.io/unschedulable:NoSchedule",
    ]
    assert blocking_taints({"spec": {}}) == []


def test_equal_needs_the_value_exists_does_not() -> None:
    assert tolerates_all(pod({"key": "dedicated", "value": "infer"}), [TAINT])
    assert not tolerates_all(pod({"key": "dedicated", "value": "train"}), [TAINT])
    assert tolerates_all(pod({"key": "dedicated", "operator": "Exists"}), [TAINT])
    assert not tolerates_all(pod({"key": "other", "operator": "Exists"}), [TAINT])


def test_the_effect_must_match_when_given_and_an_empty_key_exists_matches_all() -> None:
    assert not tolerates_all(pod({"key": "dedicated", "operator": "Exists",
                                  "effect": "NoExecute"}), [TAINT])  # fmt: skip
    assert tolerates_all(pod({"operator": "Exists"}), [TAINT, {"key": "x", "effect": "NoExecute"}])
    # ToleratesTaint: an empty key with Equal matches every key with that value (the API server
    # refuses such a toleration; the function, and so we, do not)
    assert tolerates_all(pod({"value": "infer"}), [TAINT])
    assert not tolerates_all(pod({"value": "train"}), [TAINT])


def test_a_pod_without_tolerations_tolerates_no_taint_and_every_taint_is_named() -> None:
    assert tolerates_all(pod(), [])
    cordon = blocking_taints({"spec": {"unschedulable": True}})
    assert [describe(t) for t in untolerated(pod(), [TAINT, *cordon])] == [
        "dedicated=infer:NoSchedule", "node.kubernetes.io/unschedulable:NoSchedule",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        # inputs a 1.20 API server refuses, read as ToleratesTaint reads them
        ({"key": "dedicated", "operator": "Exists", "value": "train"}, True),  # value ignored
        ({"operator": "Exists", "value": "train"}, True),
        ({"key": "dedicated", "operator": "Gt", "value": "1"}, False),  # alpha gate, off
        ({"key": "dedicated", "operator": "exists"}, False),  # operators are case-sensitive
        # an empty effect matches every effect; tolerationSeconds only matter to eviction
        ({"key": "dedicated", "value": "infer", "effect": ""}, True),
        ({"key": "dedicated", "value": "infer", "tolerationSeconds": 0}, True),
    ],
)
def test_degenerate_tolerations(toleration: dict, tolerated: bool) -> None:
    assert tolerates_all(pod(toleration), [TAINT]) is tolerated


def test_only_noschedule_and_noexecute_taints_block() -> None:
    taints = [{"key": "a", "effect": ""}, {"key": "b"}, {"key": "c", "effect": "noschedule"}]
    assert blocking_taints({"spec": {"taints": taints}}) == []


keys = st.sampled_from(["a", "b"])
taints = st.fixed_dictionaries(
    {"key": keys, "value": st.sampled_from(["", "x"]),
     "effect": st.sampled_from(["NoSchedule", "NoExecute"])}
)  # fmt: skip


@given(st.lists(taints, max_size=4))
def test_exists_with_no_key_tolerates_everything_and_no_tolerations_nothing(found: list) -> None:
    assert tolerates_all(pod({"operator": "Exists"}), found)
    assert tolerates_all(pod(), found) == (found == [])
