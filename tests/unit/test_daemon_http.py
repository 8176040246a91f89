"""The daemon's HTTP server (health, metrics, webhook) against clients that misbehave, over real
sockets on 127.0.0.1: a Content-Length that is missing, negative or too
large, a client that goes idle or trickles, more connections than the cap; and refused
webhooks counted in /metrics instead of logged."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import ApiClient
from prometheus_client.parser import text_string_to_metric_families

from reconciler.adapters.http_server import Limits
from reconciler.adapters.kube import Kube
from reconciler.daemon.converge import Converger
from reconciler.daemon.run import Daemon, RunSettings
from reconciler.sources.directory import DirectorySource
from tests.unit.no_cluster import unconnected

SECRET = b"s3cret"
LIMITS = Limits(max_connections=4, idle_seconds=1.0, request_seconds=2.0, max_body_bytes=1024)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    (tmp_path / "values.yaml").write_text("compute: {nodes: {}}\n")
    kube = Kube(ApiClient())  # never called: these tests stop at HTTP
    converger = Converger(unconnected, kube)
    settings = RunSettings(listen_port=0, webhook_secret=SECRET, http=LIMITS)
    served = Daemon(DirectorySource(tmp_path), converger, settings)
    served.serve()
    yield served
    served.stop()


def exchange(port: int, data: bytes, *, timeout: float = 5.0) -> bytes:
    """Send `data`, then read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(data)
        return read_all(conn)


def read_all(conn: socket.socket) -> bytes:
    answer = b""
    while chunk := conn.recv(65536):
        answer += chunk
    return answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer else 0


def post(body: bytes, *headers: str) -> bytes:
    lines = ["POST /webhook HTTP/1.1", "Host: 127.0.0.1", *headers, "", ""]
    return "\r\n".join(lines).encode() + body


def refusals(port: int) -> dict[tuple[str, str], float]:
    text = exchange(port, b"GET /metrics HTTP/1.0\r\n\r\n").split(b"\r\n\r\n", 1)[1].decode()
    return {
        (sample.labels["server"], sample.labels["reason"]): sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "reconciler_http_refused_requests"
        for sample in family.samples
    }


def test_a_webhook_without_content_length_is_refused(daemon: Daemon) -> None:
    answer = exchange(daemon.port, post(b""))
    assert status_of(answer) == 411 and b"Content-Length header is required" in answer
    chunked = exchange(daemon.port, post(b"0\r\n\r\n", "Transfer-Encoding: chunked"))
    assert status_of(chunked) == 411
    assert refusals(daemon.port)[("daemon", "no_length")] == 2


@pytest.mark.parametrize("length", ["-5", "abc", "1e3", "+7", ""])
def test_a_content_length_that_is_not_a_length_is_refused_at_once(
    daemon: Daemon, length: str
) -> None:
    started = time.monotonic()
    answer = exchange(daemon.port, post(b"{}", f"Content-Length: {length}"), timeout=3)
    assert status_of(answer) == 400 and b"is not a length" in answer
    assert time.monotonic() - started < 1  # not waiting for a body, nor for the client


def test_a_body_larger_than_the_limit_is_refused_unread(daemon: Daemon) -> None:
    started = time.monotonic()
    answer = exchange(daemon.port, post(b"", "Content-Length: 2000000"), timeout=3)
    assert status_of(answer) == 413 and b"more than the 1024 accepted" in answer
    assert time.monotonic() - started < 1
    assert refusals(daemon.port)[("daemon", "too_large")] == 1


def test_an_idle_client_is_disconnected(daemon: Daemon) -> None:
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=5) as conn:
        started = time.monotonic()
        assert read_all(conn) == b""  # closed by the server, nothing said
        assert 0.9 < time.monotonic() - started < 3
    assert refusals(daemon.port)[("daemon", "timeout")] == 1


def test_a_client_trickling_its_request_is_cut_at_the_request_limit(daemon: Daemon) -> None:
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=5) as conn:
        started = time.monotonic()
        with contextlib.suppress(OSError):  # the server closes while we still write
            for byte in b"GET /healthz HTTP/1.0\r\nX-Slow: " + b"a" * 100:
                conn.send(bytes([byte]))
                time.sleep(0.2)  # each byte within the idle limit, the whole far past it
        assert time.monotonic() - started < 4


def test_connections_past_the_cap_are_answered_busy_at_once(daemon: Daemon) -> None:
    idle = [
        socket.create_connection(("127.0.0.1", daemon.port)) for _ in range(LIMITS.max_connections)
    ]
    try:
        time.sleep(0.1)  # every one accepted and holding a slot
        started = time.monotonic()
        answer = exchange(daemon.port, b"GET /metrics HTTP/1.0\r\n\r\n", timeout=3)
        assert status_of(answer) == 503 and b"too many connections" in answer
        assert time.monotonic() - started < 0.5
        # The kubelet's probes are still answered past the cap (else a flood restarts the Pod).
        assert status_of(exchange(daemon.port, b"GET /healthz HTTP/1.0\r\n\r\n")) == 200
    finally:
        for conn in idle:
            conn.close()
    time.sleep(0.2)  # their threads end and give their slots back
    assert status_of(exchange(daemon.port, b"GET /healthz HTTP/1.0\r\n\r\n")) == 200
    assert refusals(daemon.port)[("daemon", "busy")] >= 1


def test_a_refused_webhook_is_counted_not_logged(
    daemon: Daemon, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    body = json.dumps({"ref": "refs/heads/main"}).encode()
    for _ in range(3):
        wrong = post(body, f"Content-Length: {len(body)}", "X-Hub-Signature-256: sha256=00")
        assert status_of(exchange(daemon.port, wrong)) == 401
    assert caplog.records == []
    assert refusals(daemon.port)[("daemon", "unauthorized")] == 3
    other = json.dumps({"ref": "refs/heads/dev"}).encode()
    signature = hmac.new(SECRET, other, hashlib.sha256).hexdigest()
    good = post(other, f"Content-Length: {len(other)}", f"X-Hub-Signature-256: sha256={signature}")
    assert status_of(exchange(daemon.port, good)) == 202
    assert "a push to refs/heads/dev" in caplog.text  # what was heard is still logged


def test_a_replica_that_does_not_lead_says_so(daemon: Daemon) -> None:
    daemon.lead_with(lambda: False)
    answer = exchange(daemon.port, b"GET /readyz HTTP/1.0\r\n\r\n")
    assert status_of(answer) == 503 and b"not the leader" in answer
    metrics = exchange(daemon.port, b"GET /metrics HTTP/1.0\r\n\r\n")
    assert b"\nreconciler_leader 0.0\n" in metrics
    daemon.lead_with(lambda: True)
    assert b"\nreconciler_leader 1.0\n" in exchange(daemon.port, b"GET /metrics HTTP/1.0\r\n\r\n")


def test_while_no_revision_can_be_used_readyz_says_why(daemon: Daemon) -> None:
    daemon.waiting = "the head of git x@main cannot be used (unsigned)"
    answer = exchange(daemon.port, b"GET /readyz HTTP/1.0\r\n\r\n")
    assert status_of(answer) == 503 and b"no usable revision yet: the head" in answer
    assert status_of(exchange(daemon.port, b"GET /healthz HTTP/1.0\r\n\r\n")) == 200
