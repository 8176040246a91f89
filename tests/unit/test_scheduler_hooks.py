"""The hooks API placeholder jobs call: who may speak for which Pod, and what they hear back."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.scheduler.hooks import HookCall, HooksServer, parse_call
from reconciler.scheduler.placeholder import HookCredentials

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
