"""The network and the config source: hostile clients and hostile pushes, each
reproduced as an attacker would do it (real sockets on 127.0.0.1, real git repositories)."""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client import ApiClient

from reconciler.adapters.kube import Kube
from reconciler.cli import build_parser
from reconciler.cli.run import _source, _webhook_secret
from reconciler.daemon.converge import Converger
from reconciler.daemon.run import HTTP_LIMITS, Daemon, RunSettings
from reconciler.daemon.startup import Prepared, Startup
from reconciler.daemon.webhook import judge
from reconciler.errors import ReconcilerError, SourceError
from reconciler.scheduler.pod_policies import PodPolicies
from reconciler.sources import Revision
from reconciler.sources.directory import DirectorySource
from reconciler.sources.git import GitSource
from tests.unit.git_remote import git, new_remote
from tests.unit.no_cluster import unconnected

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


# ---- item 3: slow clients fill the connection cap, and the liveness probe fails --------------


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    """The daemon's HTTP server with its real limits (64 connections)."""
    (tmp_path / "values.yaml").write_text("compute: {nodes: {}}\n")
    converger = Converger(unconnected, Kube(ApiClient()))  # never called
    served = Daemon(DirectorySource(tmp_path), converger, RunSettings(listen_port=0))
    served.serve()
    yield served
    served.stop()


@contextlib.contextmanager
def idle_clients(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections that never send a byte, from 127.0.0.1."""
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    try:
        time.sleep(0.2)  # every one accepted: the cap is full
        yield conns
    finally:
        for conn in conns:
            conn.close()


def probe(port: int, path: str = "/healthz") -> tuple[int, float]:
    """A kubelet probe, from another address than the attackers' (127.0.0.2, as a Node's IP
    differs from a Pod's): its status and how long it took."""
    started = time.monotonic()
    with socket.create_connection(
        ("127.0.0.1", port), timeout=5, source_address=("127.0.0.2", 0)
    ) as conn:
        conn.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 10.0.0.7:{port}\r\nUser-Agent: kube-probe/1.30\r\n"
            "Accept: */*\r\nConnection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1]) if answer else 0
    return status, time.monotonic() - started


def test_healthz_answers_while_slow_clients_fill_the_cap(daemon: Daemon) -> None:
    with idle_clients(daemon.port, HTTP_LIMITS.max_connections + 1):
        status, seconds = probe(daemon.port)
        assert status == 200 and seconds < 0.5
        assert probe(daemon.port, "/readyz")[0] == 503  # served (not ready yet), not "busy"
        # Past the cap, anything but a probe is still refused at once.
        with socket.create_connection(("127.0.0.1", daemon.port), timeout=3) as conn:
            conn.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            assert conn.recv(100).startswith(b"HTTP/1.0 503")


def test_healthz_answers_past_the_overflow_lane_too(daemon: Daemon) -> None:
    """Ten times the cap of idle clients: the ones held past the cap are dropped oldest
    first, from the address holding the most, so the probe's connection is not the one."""
    with idle_clients(daemon.port, 10 * HTTP_LIMITS.max_connections):
        seconds = []
        for _ in range(5):
            status, took = probe(daemon.port)
            assert status == 200
            seconds.append(took)
        assert max(seconds) < 0.5, seconds


def test_a_client_trickling_past_the_cap_does_not_hold_the_probe(daemon: Daemon) -> None:
    with idle_clients(daemon.port, HTTP_LIMITS.max_connections) as conns:
        trickling = [socket.create_connection(("127.0.0.1", daemon.port)) for _ in range(50)]
        try:
            for conn in trickling:
                conn.send(b"GET /hea")  # a probe path, never finished
            assert probe(daemon.port)[0] == 200
        finally:
            for conn in trickling:
                conn.close()
        assert conns


# ---- item 4: a rollback by force push ----------------------------------------------------------


def _push(work: Path, text: str) -> str:
    (work / "values.yaml").write_text(text)
    return _commit_all(work, text.strip())


class _Applied:
    """The last revision applied, as the daemon's status says it (what the source asks)."""

    def __init__(self, origin: str = "") -> None:
        self.revision = ""
        self.origin = origin

    def __call__(self) -> tuple[str, str]:
        return self.revision, self.origin


def _rollback_remote(tmp_path: Path) -> tuple[Path, Path, str, str]:
    bare, work = new_remote(tmp_path)
    old = _push(work, "release: old\n")
    new = _push(work, "release: new\n")
    return bare, work, old, new


def test_a_force_push_back_to_an_older_commit_is_refused(tmp_path: Path) -> None:
    bare, work, old, new = _rollback_remote(tmp_path)
    applied = _Applied()
    source = GitSource(str(bare), "main", tmp_path / "checkout", applied=applied)
    assert source.fetch().id == new
    applied.revision = new
    git(work, "push", "-q", "--force", "origin", f"{old}:refs/heads/main")
    with pytest.raises(SourceError) as caught:
        source.fetch()
    error = caught.value
    assert error.revision == old and "\n" not in error.message
    assert f"commit {old[:12]}" in error.message and f"descend from {new[:12]}" in error.message
    assert "--allow-non-descendant" in error.message
    assert (tmp_path / "checkout" / "values.yaml").read_text() == "release: new\n"  # not moved
    # A commit on top of the applied one is taken again.
    git(work, "reset", "-q", "--hard", new)
    later = _push(work, "release: later\n")
    assert source.fetch().id == later


def test_a_commit_of_another_branch_is_refused(tmp_path: Path) -> None:
    bare, work, _old, new = _rollback_remote(tmp_path)
    git(work, "checkout", "-q", "--orphan", "other")
    other = _push_to(work, "release: other\n", "other")
    applied = _Applied()
    applied.revision = new
    source = GitSource(str(bare), "main", tmp_path / "checkout", applied=applied)
    git(work, "push", "-q", "--force", "origin", f"{other}:refs/heads/main")
    with pytest.raises(SourceError, match=f"does not descend from {new[:12]}"):
        source.fetch()


def test_a_rollback_the_applied_commit_of_which_is_gone_is_refused(tmp_path: Path) -> None:
    """A new Pod (empty workdir) after the applied commit was force-pushed away: nothing
    proves the head descends from it."""
    bare, work, old, new = _rollback_remote(tmp_path)
    git(work, "push", "-q", "--force", "origin", f"{old}:refs/heads/main")
    git(bare, "reflog", "expire", "--expire=now", "--all")
    git(bare, "gc", "-q", "--prune=now")
    applied = _Applied()
    applied.revision = new
    with pytest.raises(SourceError, match=f"descend from {new[:12]}"):
        GitSource(str(bare), "main", tmp_path / "fresh", applied=applied).fetch()


def test_allow_non_descendant_applies_the_rollback(tmp_path: Path) -> None:
    bare, work, old, new = _rollback_remote(tmp_path)
    applied = _Applied()
    applied.revision = new
    git(work, "push", "-q", "--force", "origin", f"{old}:refs/heads/main")
    source = GitSource(
        str(bare), "main", tmp_path / "checkout", applied=applied, allow_non_descendant=True
    )
    assert source.fetch().id == old


def _push_to(work: Path, text: str, branch: str) -> str:
    (work / "values.yaml").write_text(text)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", text.strip())
    git(work, "push", "-q", "origin", branch)
    return git(work, "rev-parse", "HEAD")


class _StatusKube:
    """The status ConfigMap alone, in memory: what a restarted daemon reads it from."""

    def __init__(self, applied: str, origin: str) -> None:
        self.data = {"appliedRevision": applied, "revision": applied, "state": "applied",
                     "appliedOrigin": f"git {origin}@main"}  # fmt: skip
        self.events: list[dict[str, Any]] = []

    def get(self, api: str, kind: str, name: str, namespace: str) -> dict[str, Any]:
        assert (kind, name) == ("ConfigMap", "slurm-reconciler-status")
        return {"data": dict(self.data)}

    def apply(self, obj: dict[str, Any], *, force: bool = False) -> dict[str, Any]:
        self.data = dict(obj["data"])
        return dict(obj)

    def create_event(self, regarding: dict[str, Any], **event: Any) -> dict[str, Any]:
        self.events.append(event)
        return event


def _prepared(revision: Revision) -> Prepared:
    settings = SimpleNamespace(release="slurm", namespace="slurm")
    return Prepared(SimpleNamespace(settings=settings), None, PodPolicies())  # type: ignore[arg-type]


def test_a_restarted_daemon_does_not_start_from_a_rolled_back_head(tmp_path: Path) -> None:
    """The rollback pushed while no replica ran (or that restarted it): at startup the head is
    checked against the status ConfigMap's applied revision, and the daemon runs from that."""
    bare, work, old, new = _rollback_remote(tmp_path)
    git(work, "push", "-q", "--force", "origin", f"{old}:refs/heads/main")
    kube = _StatusKube(applied=new, origin=str(bare))
    converger = Converger(unconnected, kube)  # type: ignore[arg-type]
    source = _source(_run_args(bare, tmp_path), kube, tmp_path / "w", converger.applied)  # type: ignore[arg-type]
    startup = Startup(source, _prepared, converger, kube, release=None, namespace=None)  # type: ignore[arg-type]
    start = startup.once()
    assert (start.revision.id, start.fallback) == (new, True)
    assert kube.data["revision"] == old and kube.data["state"] == "failed"
    assert f"does not descend from {new[:12]}" in kube.data["error"]
    assert kube.data["appliedRevision"] == new


def _run_args(bare: Path, tmp_path: Path, *extra: str) -> argparse.Namespace:
    parser = build_parser()
    return parser.parse_args(["run", "--git-url", str(bare), "--workdir", str(tmp_path), *extra])


def test_a_revision_applied_from_another_source_is_not_compared(tmp_path: Path) -> None:
    """A directory's content hash looks like a sha256 commit id: only what this URL and branch
    applied is an ancestor to look for."""
    bare, _work, _old, new = _rollback_remote(tmp_path)
    applied = _Applied(origin=f"directory {tmp_path}")
    applied.revision = "ab" * 32
    assert GitSource(str(bare), "main", tmp_path / "checkout", applied=applied).fetch().id == new


def test_a_port_in_use_is_an_os_error_not_a_crash_in_the_lane(daemon: Daemon) -> None:
    settings = RunSettings(listen_host="127.0.0.1", listen_port=daemon.port)
    converger = Converger(unconnected, Kube(ApiClient()))
    with pytest.raises(OSError, match="in use"):
        Daemon(DirectorySource(Path(".")), converger, settings)
