"""Issue 31, the network and the config source: hostile clients and hostile pushes, each
reproduced as an attacker would do it (real sockets on 127.0.0.1, real git repositories)."""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import ApiClient

from reconciler.adapters.kube import Kube
from reconciler.cli.run import _webhook_secret
from reconciler.daemon.converge import Converger
from reconciler.daemon.run import HTTP_LIMITS, Daemon, RunSettings
from reconciler.daemon.webhook import judge
from reconciler.errors import ReconcilerError, SourceError
from reconciler.sources.directory import DirectorySource
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


# ---- item 3: slow clients fill the connection cap, and the liveness probe fails --------------


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    """The daemon's HTTP server with its real limits (64 connections)."""
    (tmp_path / "values.yaml").write_text("compute: {nodes: {}}\n")
    converger = Converger(argparse.Namespace(), Kube(ApiClient()))  # never called
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
