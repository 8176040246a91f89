"""The hooks API placeholder jobs call (SUNK's `--hooks-api-bind-address`).

    POST /hooks/v1/pods/<uid>/started?job=<id>&node=<slurm node>    Slurm started the job
    POST /hooks/v1/pods/<uid>/signalled?job=<id>                    Slurm is ending the job
    POST /hooks/v1/power/<suspend|resume>?nodes=<hostlist>          SuspendProgram/ResumeProgram

Each request carries `Authorization: Bearer <token>`, an HMAC of the Pod UID under a key only
the scheduler knows, so a job can speak only for its own Pod (the power programs' token derives
from a name no Pod UID can have). `signalled` answers `gone` once the Pod no longer exists (the
job may then exit) and `wait` before.

The server is the guarded one the daemon also uses (reconciler.adapters.http_server): a cap on
connections, read time limits, Content-Length checked; refused calls are counted (`refusals`),
never logged one by one. A call carries no body: the placeholder script's `curl -X POST` sends
no Content-Length, so none is required, but a bad or large one is refused.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from reconciler import wellknown as wk
from reconciler.adapters.http_server import (
    UNAUTHORIZED,
    GuardedHandler,
    GuardedServer,
    LengthRefused,
    Limits,
    Refusals,
    body_length,
)
from reconciler.kuberules.integers import parse_int
from reconciler.scheduler.decide.placeholder import HookCredentials
from reconciler.scheduler.decide.pod_decide import MAX_JOB_ID

log = logging.getLogger(__name__)

HookKind = Literal["started", "signalled"]


@dataclass(frozen=True)
class HookCall:
    kind: HookKind
    pod_uid: str
    job_id: int
    slurm_node: str


# Answers the scheduler gives: "ok" (started), "gone" / "wait" (signalled).
Handler = Callable[[HookCall], str]
# SuspendProgram / ResumeProgram: (verb, Slurm's hostlist) -> "ok".
PowerHandler = Callable[[str, str], str]
POWER_VERBS = ("suspend", "resume")

# Every running placeholder job may call at once (a node drained, a batch preempted): the
# backlog holds a burst, and the jobs retry a 503. A call is a request line and one header.
HOOKS_LIMITS = Limits(max_connections=256, idle_seconds=10.0, request_seconds=20.0,
                      max_body_bytes=4096)  # fmt: skip


class HooksServer:
    """A threaded HTTP server; each call is short (no long polls), so a thread each is fine."""

    def __init__(
        self,
        host: str,
        port: int,
        credentials: HookCredentials,
        handler: Handler,
        *,
        limits: Limits = HOOKS_LIMITS,
    ) -> None:
        self._credentials = credentials
        self._handler = handler
        self.power: PowerHandler | None = None  # set when power saving is on
        self._server = GuardedServer((host, port), self._request_class(), limits)
        self._thread: threading.Thread | None = None

    @property
    def refusals(self) -> Refusals:
        return self._server.refusals

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="scheduler-hooks", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:  # shutdown() waits for serve_forever: never started, forever
            self._server.shutdown()
            self._thread = None
        self._server.server_close()

    def _request_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Request(GuardedHandler):
            protocol_version = "HTTP/1.0"

            def do_POST(self) -> None:
                limit = self.server.limits.max_body_bytes
                length = body_length(self.headers, limit, required=False)
                if isinstance(length, LengthRefused):
                    self.refuse(length.status, length.reason, length.text)
                    return
                status, body = server.answer(self.path, self.headers.get("Authorization", ""))
                self.answer(status, body.encode(), "text/plain")

        return Request

    def answer(self, path: str, authorization: str) -> tuple[int, str]:
        """(HTTP status, body) for one request; pure apart from the handler it calls."""
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        power = parse_power_call(path)
        if power is not None:
            return self._answer_power(*power, token)
        call = parse_call(path)
        if call is None:
            return 404, "unknown hook\n"
        if not token or not self._credentials.verify(call.pod_uid, token):
            self.refusals.add(UNAUTHORIZED)  # counted for /metrics; a log line each would flood
            return 403, "forbidden\n"
        try:
            return 200, self._handler(call) + "\n"
        except Exception:
            log.exception("hooks: %s for pod uid %s failed", call.kind, call.pod_uid)
            return 503, "retry\n"

    def _answer_power(self, verb: str, nodes: str, token: str) -> tuple[int, str]:
        if self.power is None:
            return 404, "power saving is off\n"
        if not token or not self._credentials.verify(wk.POWER_TOKEN_SUBJECT, token):
            self.refusals.add(UNAUTHORIZED)
            return 403, "forbidden\n"
        try:
            answer = self.power(verb, nodes)
        except Exception:
            log.exception("hooks: power %s %s failed", verb, nodes)
            return 503, "retry\n"
        return (200 if answer == "ok" else 400), answer + "\n"


def parse_power_call(path: str) -> tuple[str, str] | None:
    """(verb, hostlist) of `POST /hooks/v1/power/<suspend|resume>?nodes=<hostlist>`."""
    parts = urlsplit(path)
    if not parts.path.startswith(wk.HOOKS_POWER_PREFIX):
        return None
    verb = parts.path.removeprefix(wk.HOOKS_POWER_PREFIX)
    nodes = (parse_qs(parts.query).get("nodes") or [""])[0]
    if verb not in POWER_VERBS or not nodes:
        return None
    return verb, nodes


def parse_call(path: str) -> HookCall | None:
    parts = urlsplit(path)
    if not parts.path.startswith(wk.HOOKS_PATH_PREFIX):
        return None
    rest = parts.path.removeprefix(wk.HOOKS_PATH_PREFIX).split("/")
    if len(rest) != 2 or rest[1] not in ("started", "signalled") or not rest[0]:
        return None
    query = parse_qs(parts.query)
    job = parse_int((query.get("job") or [""])[0], 0, MAX_JOB_ID)  # counted before int()
    if not isinstance(job, int):
        return None
    kind: HookKind = "started" if rest[1] == "started" else "signalled"
    return HookCall(kind, rest[0], job, (query.get("node") or [""])[0])
