"""The overflow lane of an HTTP server: connections past its cap, served without a thread each,
so slow clients that fill the cap cannot fail the kubelet's probes.

A connection the server has no slot for comes here. One thread reads each one's request head
through a selector, answers it if its path is a probe's (`/healthz`, `/readyz`: answers that
take microseconds), and refuses anything else as busy (503), as the server did at its cap.
Nothing here can be exhausted for long:

- a connection costs a socket and at most `max_head_bytes`, never a thread;
- a request head must arrive within `request_seconds` (a probe's does in well under a
  millisecond; the kubelet's own timeout is 1 s by default);
- past `max_connections`, room is made by dropping the oldest connection of the address
  holding the most: a client opening hundreds of idle connections drops its own, while the
  kubelet (another address, one connection at a time, sending its request at once) keeps its.
"""

from __future__ import annotations

import collections
import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus

# (status, body, content type) for a probe path; None for any other path.
Answer = Callable[[str], tuple[int, bytes, str] | None]
BUSY_ANSWER = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 32\r\n"
    b"Retry-After: 1\r\nConnection: close\r\n\r\ntoo many connections; try again\n"
)
_HEAD_ENDS = (b"\r\n\r\n", b"\n\n")


@dataclass(frozen=True)
class LaneLimits:
    max_connections: int = 256
    request_seconds: float = 2.0
    max_head_bytes: int = 4096


@dataclass(eq=False)
class _Held:
    sock: socket.socket
    peer: str
    since: float
    head: bytearray = field(default_factory=bytearray)


class ProbeLane:
    """Takes connections past the cap (`take`, from the accept thread) and serves probe paths
    on a thread of its own; `refused()` is told of each connection it turns away."""

    def __init__(
        self, answer: Answer, refused: Callable[[], None], limits: LaneLimits = LaneLimits()
    ) -> None:
        self._answer = answer
        self._refused = refused
        self._limits = limits
        self._selector = selectors.DefaultSelector()
        self._incoming: collections.deque[tuple[socket.socket, str]] = collections.deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._held: dict[socket.socket, _Held] = {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="http-probe-lane", daemon=True)
        self._thread.start()

    def take(self, sock: socket.socket, client_address: object) -> None:
        peer = client_address[0] if isinstance(client_address, tuple) else str(client_address)
        self._incoming.append((sock, str(peer)))
        self._wake()

    def close(self) -> None:
        self._stopping.set()
        self._wake()
        self._thread.join(timeout=5)
        for held in list(self._held.values()):
            self._drop(held)
        while self._incoming:
            self._incoming.popleft()[0].close()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _wake(self) -> None:
        # A full buffer: the lane is awake already; a closed one: it has stopped.
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _run(self) -> None:
        while not self._stopping.is_set():
            for key, _ in self._selector.select(timeout=0.5):
                if key.fileobj is self._wake_r:
                    self._drain_wake()
                else:
                    held = self._held.get(key.fileobj)  # type: ignore[call-overload]
                    if held is not None:
                        self._read(held)
            self._admit()
            self._expire()

    def _drain_wake(self) -> None:
        with contextlib.suppress(OSError):  # non-blocking: raised once it is empty
            while self._wake_r.recv(4096):
                pass

    def _admit(self) -> None:
        while self._incoming:
            sock, peer = self._incoming.popleft()
            if len(self._held) >= self._limits.max_connections:
                self._evict()
            sock.setblocking(False)
            held = _Held(sock, peer, time.monotonic())
            self._held[sock] = held
            self._selector.register(sock, selectors.EVENT_READ)

    def _evict(self) -> None:
        """Drop the oldest connection of the address holding the most."""
        counts = collections.Counter(held.peer for held in self._held.values())
        most = max(counts.values())
        oldest = min(
            (held for held in self._held.values() if counts[held.peer] == most),
            key=lambda held: held.since,
        )
        self._refuse(oldest)

    def _expire(self) -> None:
        deadline = time.monotonic() - self._limits.request_seconds
        for held in [h for h in self._held.values() if h.since < deadline]:
            self._refuse(held)

    def _read(self, held: _Held) -> None:
        try:
            data = held.sock.recv(self._limits.max_head_bytes)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the client hung up
            self._drop(held)
            return
        held.head += data
        if any(end in held.head for end in _HEAD_ENDS):
            self._serve(held)
        elif len(held.head) >= self._limits.max_head_bytes:
            self._refuse(held)

    def _serve(self, held: _Held) -> None:
        method, _, rest = bytes(held.head).partition(b" ")
        path = rest.split(b" ", 1)[0].decode("ascii", "replace")
        answered = self._answer(path) if method == b"GET" else None
        if answered is None:
            self._refuse(held)
            return
        status, body, kind = answered
        phrase = HTTPStatus(status).phrase
        head = (
            f"HTTP/1.0 {status} {phrase}\r\nContent-Type: {kind}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        self._send(held, head.encode() + body)
        self._drop(held)

    def _refuse(self, held: _Held) -> None:
        self._refused()
        self._send(held, BUSY_ANSWER)
        self._drop(held)

    def _send(self, held: _Held, data: bytes) -> None:
        # A probe's answer is a few hundred bytes: a fresh socket's buffer takes it whole.
        with contextlib.suppress(OSError):
            held.sock.send(data)

    def _drop(self, held: _Held) -> None:
        self._held.pop(held.sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(held.sock)
        held.sock.close()
