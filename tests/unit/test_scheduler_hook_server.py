"""The hooks API placeholder jobs call: who may speak for which Pod, and what they hear back."""

from __future__ import annotations

import logging
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.adapters.http_server import Limits
from reconciler.scheduler.decide.placeholder import HookCredentials
from reconciler.scheduler.hook_server import HookCall, HooksServer, parse_call

CREDENTIALS = HookCredentials("http://127.0.0.1", b"hooks-test-key")
UID = "3c1d0f6e-0000-4000-8000-0000000000aa"
STARTED = f"/hooks/v1/pods/{UID}/started?job=12&node=n1"
SIGNALLED = f"/hooks/v1/pods/{UID}/signalled?job=12"


def bearer(uid: str = UID) -> str:
    return f"Bearer {CREDENTIALS.token_for(uid)}"


class Recorder:
    def __init__(self, answer: str = "ok") -> None:
        self.calls: list[HookCall] = []
        self.answer = answer

    def __call__(self, call: HookCall) -> str:
        self.calls.append(call)
        return self.answer


@pytest.fixture
def handler() -> Recorder:
    return Recorder()


@pytest.fixture
def server(handler: Recorder) -> Iterator[HooksServer]:
    hooks = HooksServer("127.0.0.1", 0, CREDENTIALS, handler)
    yield hooks
    hooks.stop()


# ---- parse_call -----------------------------------------------------------------------------


def test_started_call_names_pod_job_and_node() -> None:
    assert parse_call(STARTED) == HookCall("started", UID, 12, "n1")


def test_signalled_call_needs_no_node() -> None:
    assert parse_call(SIGNALLED) == HookCall("signalled", UID, 12, "")


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/healthz",
        f"/hooks/v1/pods/{UID}/started",  # no job id
        f"/hooks/v1/pods/{UID}/started?job=",
        f"/hooks/v1/pods/{UID}/started?job=twelve",
        f"/hooks/v1/pods/{UID}/started?job=-1",
        f"/hooks/v1/pods/{UID}/started?job=%C2%B2",  # "²": a digit to str.isdigit, not to int
        f"/hooks/v1/pods/{UID}/finished?job=12",
        f"/hooks/v1/pods/{UID}/started/extra?job=12",
        "/hooks/v1/pods//started?job=12",
        f"/hooks/v2/pods/{UID}/started?job=12",
        f"/other/hooks/v1/pods/{UID}/started?job=12",
    ],
)
def test_other_paths_are_not_hook_calls(path: str) -> None:
    assert parse_call(path) is None


@given(
    st.sampled_from(["started", "signalled"]),
    st.from_regex(r"[a-z0-9-]{1,36}", fullmatch=True),
    st.integers(min_value=0, max_value=2**31),
    st.from_regex(r"[a-z0-9-]{0,20}", fullmatch=True),
)
def test_parse_call_property_round_trips_what_the_script_sends(
    kind: str, uid: str, job: int, node: str
) -> None:
    path = f"/hooks/v1/pods/{uid}/{kind}?job={job}&node={node}"
    assert parse_call(path) == HookCall(kind, uid, job, node)  # type: ignore[arg-type]


@given(st.sampled_from(["", "/hooks/v1/pods/", f"/hooks/v1/pods/{UID}/"]), st.text(max_size=40))
def test_parse_call_never_raises(prefix: str, rest: str) -> None:
    call = parse_call(prefix + rest)
    assert call is None or call.kind in ("started", "signalled")


@given(st.text(max_size=12))
def test_job_id_is_a_plain_decimal_number_or_the_call_is_refused(job: str) -> None:
    call = parse_call(f"/hooks/v1/pods/{UID}/signalled?job={quote(job)}")
    if job.isascii() and job.isdigit():
        assert call is not None and call.job_id == int(job)
    else:
        assert call is None


# ---- answer ---------------------------------------------------------------------------------


def test_right_token_gets_the_handlers_answer(server: HooksServer, handler: Recorder) -> None:
    assert server.answer(STARTED, bearer()) == (200, "ok\n")
    assert handler.calls == [HookCall("started", UID, 12, "n1")]


def test_signalled_answers_what_the_handler_says(handler: Recorder, server: HooksServer) -> None:
    handler.answer = "gone"
    assert server.answer(SIGNALLED, bearer()) == (200, "gone\n")


@pytest.mark.parametrize(
    "authorization",
    ["", "Bearer ", "Bearer nonsense", bearer("another-pod-uid"), "Bearer caf\u00e9"],
)
def test_missing_or_wrong_token_is_forbidden(
    server: HooksServer, handler: Recorder, authorization: str
) -> None:
    assert server.answer(STARTED, authorization) == (403, "forbidden\n")
    assert handler.calls == []


def test_token_of_another_key_is_forbidden(server: HooksServer) -> None:
    other = HookCredentials(CREDENTIALS.url, b"someone else's key")
    assert server.answer(STARTED, f"Bearer {other.token_for(UID)}")[0] == 403


def test_unknown_path_is_not_found(server: HooksServer, handler: Recorder) -> None:
    assert server.answer("/hooks/v1/pods/x/exploded?job=1", bearer("x")) == (404, "unknown hook\n")
    assert handler.calls == []


def test_failing_handler_asks_the_job_to_retry() -> None:
    def broken(call: HookCall) -> str:
        raise RuntimeError("kubernetes unreachable")

    hooks = HooksServer("127.0.0.1", 0, CREDENTIALS, broken)
    try:
        assert hooks.answer(STARTED, bearer()) == (503, "retry\n")
    finally:
        hooks.stop()


def test_stop_without_start_returns() -> None:
    # The scheduler's stop() may run after a start() that failed before the server started.
    hooks = HooksServer("127.0.0.1", 0, CREDENTIALS, Recorder())
    stopper = threading.Thread(target=hooks.stop, daemon=True)
    stopper.start()
    stopper.join(2)
    assert not stopper.is_alive(), "HooksServer.stop() hung"


# ---- over HTTP ------------------------------------------------------------------------------


def post(port: int, path: str, authorization: str | None) -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method="POST", data=b"")
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_over_http_as_the_placeholder_script_calls_it(
    server: HooksServer, handler: Recorder
) -> None:
    server.start()
    assert server.port > 0
    assert post(server.port, STARTED, bearer()) == (200, "ok\n")
    assert post(server.port, STARTED, None) == (403, "forbidden\n")
    assert post(server.port, "/nothing", bearer()) == (404, "unknown hook\n")
    assert handler.calls == [HookCall("started", UID, 12, "n1")]


# ---- a guarded server: connection cap, idle and request time limits, body size ---------------

TIGHT = Limits(max_connections=3, idle_seconds=1.0, request_seconds=2.0, max_body_bytes=4096)


@pytest.fixture
def guarded(handler: Recorder) -> Iterator[HooksServer]:
    hooks = HooksServer("127.0.0.1", 0, CREDENTIALS, handler, limits=TIGHT)
    hooks.start()
    yield hooks
    hooks.stop()


def raw(port: int, request: str, *, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(request.replace("\n", "\r\n").encode())
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
        return answer


def test_refused_calls_are_counted_not_logged(
    server: HooksServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for authorization in ("", "Bearer nonsense", bearer("another-pod-uid")):
        assert server.answer(STARTED, authorization)[0] == 403
    assert caplog.records == []  # a scanner guessing tokens must not flood the log
    assert server.refusals.snapshot()["unauthorized"] == 3


def test_the_placeholder_scripts_curl_call_needs_no_content_length(
    guarded: HooksServer, handler: Recorder
) -> None:
    """`curl -X POST` without data sends no Content-Length: running jobs call like this."""
    done = subprocess.run(
        ["curl", "-fsS", "-m", "10", "-X", "POST", "-H", f"Authorization: {bearer()}",
         f"http://127.0.0.1:{guarded.port}{STARTED}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
    assert handler.calls == [HookCall("started", UID, 12, "n1")]


@pytest.mark.parametrize(
    ("length", "status"), [("-1", 400), ("twelve", 400), ("99999999", 413), ("4097", 413)]
)
def test_a_bad_or_large_content_length_is_refused_at_once(
    guarded: HooksServer, handler: Recorder, length: str, status: int
) -> None:
    started = time.monotonic()
    answer = raw(guarded.port, f"POST {STARTED} HTTP/1.0\nAuthorization: {bearer()}\n"
                 f"Content-Length: {length}\n\n", timeout=3)  # fmt: skip
    assert answer.startswith(f"HTTP/1.0 {status} ".encode()), answer
    assert time.monotonic() - started < 1 and handler.calls == []


def test_an_idle_connection_is_closed_and_the_cap_answers_busy(guarded: HooksServer) -> None:
    idle = [socket.create_connection(("127.0.0.1", guarded.port)) for _ in range(3)]
    try:
        time.sleep(0.1)
        answer = raw(guarded.port, f"POST {STARTED} HTTP/1.0\nAuthorization: {bearer()}\n\n")
        assert answer.startswith(b"HTTP/1.0 503 ") and b"too many connections" in answer
        started = time.monotonic()
        idle[0].settimeout(5)
        assert idle[0].recv(100) == b""  # the server hung up on the idle client
        assert time.monotonic() - started < 2
    finally:
        for conn in idle:
            conn.close()
    time.sleep(0.2)
    answer = raw(guarded.port, f"POST {STARTED} HTTP/1.0\nAuthorization: {bearer()}\n\n")
    assert answer.startswith(b"HTTP/1.0 200 ")
    counts = guarded.refusals.snapshot()
    assert counts["busy"] == 1 and counts["timeout"] >= 1
