"""Issue 31, the network and the config source: hostile clients and hostile pushes, each
reproduced as an attacker would do it (real sockets on 127.0.0.1, real git repositories)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from reconciler.cli.run import _webhook_secret
from reconciler.daemon.webhook import judge
from reconciler.errors import ReconcilerError, SourceError
from reconciler.sources.git import GitSource
from tests.unit.git_remote import git, new_remote

# ---- item 6: an empty webhook secret file -----------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"\n", b"  \t\r\n"])
def test_an_empty_webhook_secret_file_stops_startup(tmp_path: Path, content: bytes) -> None:
    secret = tmp_path / "webhook-secret"
    secret.write_bytes(content)
    with pytest.raises(ReconcilerError) as caught:
        _webhook_secret(argparse.Namespace(webhook_secret_file=secret))
    assert str(secret) in caught.value.message and "empty" in caught.value.message
    assert "\n" not in caught.value.message


def test_an_empty_secret_authenticates_nothing() -> None:
    """Defence in depth: were an empty secret ever to reach the webhook, the HMAC of a body
    under an empty key (which anyone can compute) is not accepted."""
    import hashlib
    import hmac

    body = b'{"ref": "refs/heads/main"}'
    forged = hmac.new(b"", body, hashlib.sha256).hexdigest()
    for headers in ({"X-Hub-Signature-256": f"sha256={forged}"}, {"X-Gitea-Signature": forged},
                    {"X-Gitlab-Token": ""}):  # fmt: skip
        assert judge(headers, body, b"", "main").status == 401


# ---- item 8: a --git-subdir that a commit turns into a symlink --------------------------------


def _commit_all(work: Path, message: str) -> str:
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message)
    git(work, "push", "-q", "origin", "main")
    return git(work, "rev-parse", "HEAD")


@pytest.mark.parametrize("subdir", ["config", "site/config"])
def test_a_subdir_turned_into_a_symlink_out_of_the_checkout_is_refused(
    tmp_path: Path, subdir: str
) -> None:
    bare, work = new_remote(tmp_path)
    (work / subdir).mkdir(parents=True)
    (work / subdir / "values.yaml").write_text("compute: {nodes: {}}\n")
    good = _commit_all(work, "config")
    source = GitSource(str(bare), "main", tmp_path / "checkout", subdir=subdir)
    assert source.fetch().id == good
    outside = tmp_path / "outside"  # what the daemon must never read as the repo
    outside.mkdir()
    (outside / "values.yaml").write_text("stolen: true\n")
    top = subdir.split("/")[0]
    git(work, "rm", "-rq", top)
    (work / top).symlink_to(os.path.relpath(outside, tmp_path / "checkout"))
    evil = _commit_all(work, "config is now a link")
    with pytest.raises(SourceError) as caught:
        source.fetch()
    error = caught.value
    assert error.revision == evil
    assert f"commit {evil[:12]}" in error.message and f"--git-subdir {subdir!r}" in error.message
    assert "symlink" in error.message and "\n" not in error.message


def test_a_subdir_linked_inside_the_checkout_is_followed(tmp_path: Path) -> None:
    bare, work = new_remote(tmp_path)
    (work / "v2").mkdir()
    (work / "v2" / "values.yaml").write_text("compute: {nodes: {}}\n")
    (work / "config").symlink_to("v2")
    head = _commit_all(work, "config -> v2")
    revision = GitSource(str(bare), "main", tmp_path / "checkout", subdir="config").fetch()
    assert revision.id == head and (revision.path / "values.yaml").is_file()
