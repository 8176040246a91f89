"""Real stand-ins between the scheduler and the real daemons, for the tests of a scheduler that
believes no one (test_scheduler_trust.py):

- SlurmProxy forwards HTTP to slurmrestd, and answers chosen requests itself (a 200 without
  `jobs`, a 504 as slurmrestd gives while slurmctld is stopped);
- SpareApiServer is a second kube-apiserver on the stack's etcd, which can be stopped and
  started again: an API server outage for the scheduler alone.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from reconciler.local.kube.control_plane import (
    apiserver_argv,
    apiserver_ready,
    find_binaries,
    read_token,
    server_url,
)
from reconciler.local.ports import free_port
from reconciler.local.stack import LocalStack

# (method, path without query) -> an answer (status, JSON body) to give instead, or None.
Intercept = Callable[[str, str], tuple[int, Any] | None]
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class SlurmProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.intercept: Intercept = lambda method, path: None
        self.seen: list[tuple[str, str, int]] = []  # (method, path, status) answered
        self._session = requests.Session()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._session.close()

    def _forward(self, method: str, path: str, headers: Any, body: bytes) -> tuple[int, Any, bytes]:
        sent = {k: v for k, v in headers.items() if k.lower() not in _HOP_HEADERS}
        answer = self._session.request(
            method, self.upstream + path, headers=sent, data=body or None, timeout=60
        )
        return answer.status_code, answer.headers, answer.content

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                canned = proxy.intercept(self.command, self.path.split("?")[0])
                if canned is not None:
                    status, payload = canned
                    content = json.dumps(payload).encode()
                    kind = "application/json"
                else:
                    status, headers, content = proxy._forward(
                        self.command, self.path, self.headers, body
                    )
                    kind = headers.get("Content-Type", "application/json")
                proxy.seen.append((self.command, self.path.split("?")[0], status))
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_DELETE = _handle

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler


class SpareApiServer:
    """A second kube-apiserver on the stack's etcd, for one client to use: stopping it is an
    API server outage for that client alone, and a restart starts its watch cache afresh, so
    a watch resuming from before the outage gets 410 Gone, as after etcd compaction."""

    def __init__(self, stack: LocalStack, log: Path) -> None:
        plane = stack.kube
        assert plane is not None
        self._paths = plane.paths
        self.ports = replace(plane.ports, apiserver=free_port())
        audit = f"--audit-log-path={log.with_suffix('.audit.log')}"
        self._argv = [
            audit if arg.startswith("--audit-log-path=") else arg
            for arg in apiserver_argv(find_binaries(), plane.paths, self.ports)
        ]
        self._log = log
        self._token = read_token(plane.paths)
        self._process: subprocess.Popen[bytes] | None = None

    def kubeconfig(self, path: Path) -> Path:
        """The stack's kubeconfig, pointing here."""
        config = json.loads(self._paths.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = server_url(self.ports)
        path.write_text(json.dumps(config))
        return path

    def start(self, timeout: float = 60) -> None:
        with self._log.open("ab") as out:
            self._process = subprocess.Popen(self._argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"spare kube-apiserver: {self._log.read_text()[-2000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:  # it drains open watches for as long as a client holds one: no state is lost
                self._process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def _ready(self) -> bool:
        try:
            return apiserver_ready(self._paths, self.ports, self._token)
        except OSError:
            return False


class HooksStub:
    """A hooks API for placeholder jobs that refuses every `started` call (503: the script
    retries, then gives up) and answers `signalled` with `gone`, so a job still ends with its
    Pod. Counts the calls by kind, and keeps each (path with query, Authorization header).
    `refuse_started=False` answers every call `gone`, as a power program's is answered."""

    def __init__(self, *, refuse_started: bool = True) -> None:
        self.calls: dict[str, int] = {"started": 0, "signalled": 0}
        self.requests: list[tuple[str, str]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                kind = "signalled" if "/signalled" in self.path else "started"
                stub.calls[kind] += 1
                stub.requests.append((self.path, self.headers.get("Authorization", "")))
                refused = kind == "started" and refuse_started
                status, body = (503, b"no") if refused else (200, b"gone")
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
