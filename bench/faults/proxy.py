"""An HTTP proxy in front of slurmrestd that can be told to misbehave: the chaos benchmark's
way of making "slurmrestd" answer 500s and malformed 200s without touching Slurm. With
retarget() it also plays a Kubernetes Service in front of whichever replica is ready.

Modes: "ok" forwards every request; "broken" answers each request, in turn, with a 500 that
carries a Slurm error, a 200 whose JSON lacks every key, a 200 whose body is a JSON list, and
a 200 cut off in the middle of its JSON.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}
BROKEN_ANSWERS: list[tuple[int, bytes]] = [
    (500, json.dumps({"errors": [{"error_number": 1007, "error": "Protocol authentication "
                                  "error", "description": "slurmctld did not answer"}]}).encode()),
    (200, b"{}"),
    (200, b"[]"),
    (200, b'{"meta": {"plugin": {"type": "openapi/slurmctld"}}, "jobs": [{"job_id": 1'),
]  # fmt: skip


class FaultProxy:
    def __init__(self, upstream: str | None) -> None:
        self._upstream: tuple[str, int] | None = None
        self.retarget(upstream)
        self.mode = "ok"
        self.broken_answers = 0
        self._answers = itertools.cycle(BROKEN_ANSWERS)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="fault-proxy")  # fmt: skip

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def retarget(self, upstream: str | None) -> None:
        """Forward to another server from the next request on (None: answer 503, as a Service
        with no ready endpoint refuses)."""
        if upstream is None:
            self._upstream = None
            return
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)

    def _broken(self) -> tuple[int, bytes]:
        with self._lock:
            self.broken_answers += 1
            return next(self._answers)

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[
        int, list[tuple[str, str]], bytes
    ]:  # fmt: skip
        if self._upstream is None:
            return 503, [], b"no ready endpoint\n"
        host, port = self._upstream
        connection = http.client.HTTPConnection(host, port, timeout=60)
        try:
            connection.request(method, path, body=body or None, headers=headers)
            response = connection.getresponse()
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
            return response.status, kept, response.read()
        finally:
            connection.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length > 0 else b""
                if proxy.mode == "broken":
                    status, payload = proxy._broken()
                    headers = [("Content-Type", "application/json")]
                else:
                    sent = {k: v for k, v in self.headers.items()
                            if k.lower() not in HOP_BY_HOP}  # fmt: skip
                    try:
                        status, headers, payload = proxy._forward(self.command, self.path, sent,
                                                                  body)  # fmt: skip
                    except OSError:
                        status, headers, payload = 502, [], b"slurmrestd unreachable\n"
                try:
                    self.send_response(status)
                    for key, value in headers:
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    # The caller timed out or was killed (a fault of this run): nothing to say.
                    self.close_connection = True

            do_GET = do_POST = do_DELETE = _serve

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler
