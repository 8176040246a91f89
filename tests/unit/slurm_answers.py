"""A real HTTP server on 127.0.0.1 that answers as slurmrestd might on a bad day: canned bodies
per path, so the REST client's handling of them is tested over a real socket (no mocks)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# (HTTP status, body): a body that is not bytes is sent as JSON; a Streamed body is sent as
# its chunks come, without a Content-Length (the connection's end ends it).
Answer = tuple[int, Any]


class Streamed:
    """A body sent a chunk at a time: `chunks()` may never end (it is stopped when the server
    closes) or wait between chunks (a server that drips)."""

    def __init__(
        self, chunks: Callable[[], Iterable[bytes]], headers: dict[str, str] | None = None
    ) -> None:
        self.chunks = chunks
        self.headers = headers or {}


class CannedSlurm:
    """`answers[path]` is what a GET or POST of that path (without its query) gets; unknown
    paths get 404. `requests` records (method, path with query) in order."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}
        self.requests: list[tuple[str, str]] = []
        self.closing = threading.Event()  # ends the Streamed bodies still being sent
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        canned = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                canned.requests.append((self.command, self.path))
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                status, body = canned.answers.get(self.path.split("?")[0], (404, {}))
                if isinstance(body, Streamed):
                    self._stream(status, body)
                    return
                payload = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, status: int, body: Streamed) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for name, value in body.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    for chunk in body.chunks():
                        if canned.closing.is_set():
                            break
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # the client stopped reading
                    pass
                self.close_connection = True

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler


@contextmanager
def canned_slurm() -> Iterator[CannedSlurm]:
    server = CannedSlurm()
    server._thread.start()
    try:
        yield server
    finally:
        server.closing.set()
        server._server.shutdown()
        server._server.server_close()


class StaticToken:
    user = "root"

    def token(self) -> str:
        return "not-checked"


def listed(answer: Any, key: str, reduce: Callable[[dict[str, Any]], object]) -> Any:
    """What Transport.listing makes of a canned answer (a transport.Response): each object of
    its `key` list reduced, for the stand-in transports that answer from a list."""
    items = answer.body.get(key)
    if not 200 <= answer.status < 300 or not isinstance(items, list):
        return answer
    body = {**answer.body, key: [reduce(i) if isinstance(i, dict) else i for i in items]}
    return type(answer)(answer.status, body, answer.errors, answer.warnings)
