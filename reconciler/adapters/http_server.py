"""HTTP serving that a client on the network cannot wear down: the daemon's server (health,
metrics, webhook) and the scheduler's hooks API both use it.

- a cap on connections handled at once: past it, a connection is answered 503 and closed at
  once, so idle or slow clients cannot pile up threads; with `probes`, it goes to an overflow
  lane instead (`probe_lane.py`), which answers the probe paths without a thread and refuses
  the rest, so slow clients filling the cap cannot fail the kubelet's liveness probe;
- a time limit on each read (an idle client) and on the whole request (a client trickling a
  byte at a time), so a slot is always given back;
- a body only with a Content-Length that is a number, not negative, and within a limit
  (`body_length`): a negative one would make the reader wait for the client to hang up;
- no log line per refused request (a scanner would flood the log): refusals are counted by
  reason, for /metrics.
"""

from __future__ import annotations

import io
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from reconciler.adapters.probe_lane import BUSY_ANSWER, Answer, ProbeLane

# Refusal reasons, as the metric's label shows them.
BUSY, TIMEOUT, NO_LENGTH, BAD_LENGTH, TOO_LARGE, UNAUTHORIZED = (
    "busy", "timeout", "no_length", "bad_length", "too_large", "unauthorized",
)  # fmt: skip
REASONS = (BUSY, TIMEOUT, NO_LENGTH, BAD_LENGTH, TOO_LARGE, UNAUTHORIZED)


@dataclass(frozen=True)
class Limits:
    """Generous for real clients (a forge's webhook, Prometheus, curl in a job), small enough
    that a hostile one holds nothing for long."""

    max_connections: int = 128
    idle_seconds: float = 10.0  # the longest wait for the next bytes of a request
    request_seconds: float = 30.0  # the longest a whole request may take to arrive
    max_body_bytes: int = 1024 * 1024


class Refusals:
    """Counts of refused requests by reason; read at scrape time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(REASONS, 0)

    def add(self, reason: str) -> None:
        with self._lock:
            self._counts[reason] = self._counts.get(reason, 0) + 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class GuardedServer(ThreadingHTTPServer):
    """A thread per connection, at most `limits.max_connections` of them."""

    daemon_threads = True
    request_queue_size = 1024  # a burst of connections waits in the backlog, not refused

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        limits: Limits,
        *,
        probes: Answer | None = None,
    ) -> None:
        """`probes(path)`: the answer to a probe path, None for others; given, connections
        past the cap go to an overflow lane that serves those paths."""
        self.limits = limits
        self.refusals = Refusals()
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        self._lane: ProbeLane | None = None  # server_close() runs if the bind below fails
        super().__init__(address, handler)
        if probes is not None:
            self._lane = ProbeLane(probes, lambda: self.refusals.add(BUSY))

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            if self._lane is not None:
                self._lane.take(request, client_address)
                return
            self.refusals.add(BUSY)
            _answer_busy(request)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def server_close(self) -> None:
        super().server_close()
        if self._lane is not None:
            self._lane.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up mid-answer, or one cut at its time limit: nothing to log.
        return


class GuardedHandler(BaseHTTPRequestHandler):
    """Reads through a deadline: each read waits at most `idle_seconds`, and none starts
    after `request_seconds` from the connection's start."""

    server: GuardedServer

    def setup(self) -> None:
        super().setup()
        limits = self.server.limits
        self.rfile.close()  # replaced by the same socket, read under the time limits
        raw = _DeadlineReader(
            self.connection, limits.idle_seconds, time.monotonic() + limits.request_seconds,
            self.server.refusals,
        )  # fmt: skip
        self.rfile = io.BufferedReader(raw)
        self.connection.settimeout(limits.idle_seconds)  # writes to a client that stopped reading

    def log_message(self, format: str, *args: object) -> None:
        return  # request lines, refusals and timeouts are counted, not logged

    def refuse(self, status: int, reason: str, text: str) -> None:
        """Answer `status` with `text`, count `reason`, and close the connection."""
        self.server.refusals.add(reason)
        self.answer(status, text.encode() + b"\n", "text/plain")
        self.close_connection = True

    def answer(self, status: int, body: bytes, kind: str) -> None:
        # The last read may have shortened the timeout to what was left of the deadline.
        self.connection.settimeout(self.server.limits.idle_seconds)
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Headers(Protocol):
    """What body_length reads of a request's headers (an HTTPMessage, a dict)."""

    def get(self, name: str) -> str | None: ...


@dataclass(frozen=True)
class LengthRefused:
    status: int
    reason: str
    text: str


def body_length(headers: Headers, max_bytes: int, *, required: bool) -> int | LengthRefused:
    """The body's length from Content-Length, or why it is refused. Without the header the
    body is empty, unless `required` (411: a forge always sends one)."""
    if headers.get("Transfer-Encoding"):
        return LengthRefused(411, NO_LENGTH, "send the body with a Content-Length, not chunked")
    value = headers.get("Content-Length")
    if value is None:
        if required:
            return LengthRefused(411, NO_LENGTH, "a Content-Length header is required")
        return 0
    value = value.strip()
    if not (value.isascii() and value.isdigit()):
        return LengthRefused(400, BAD_LENGTH, f"Content-Length {value[:20]!r} is not a length")
    if int(value) > max_bytes:
        return LengthRefused(
            413, TOO_LARGE, f"the body is {value} bytes, more than the {max_bytes} accepted"
        )
    return int(value)


class _DeadlineReader(io.RawIOBase):
    def __init__(
        self, sock: socket.socket, idle: float, deadline: float, refusals: Refusals
    ) -> None:
        self._sock = sock
        self._idle = idle
        self._deadline = deadline
        self._refusals = refusals

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError("the request took too long to arrive")
            self._sock.settimeout(min(self._idle, left))
            return self._sock.recv_into(buffer)
        except TimeoutError:
            self._refusals.add(TIMEOUT)
            raise


def _answer_busy(request: socket.socket) -> None:
    try:
        request.setblocking(False)  # the accept loop never waits on a client
        request.send(BUSY_ANSWER)
    except OSError:
        pass
