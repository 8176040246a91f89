"""The kubelet endpoint `kubectl logs` needs, for the local Nodes: the API server proxies
GET /containerLogs/{namespace}/{pod}/{container} to the Node's kubelet port, and this answers
with what that container's daemon wrote since it started. So SUNK's "Slurm Workload Manager" page's

    kubectl logs -f -l app.kubernetes.io/name=slurmctld -c slurmctld

works on the local stack as on a cluster. There are no containers to exec into: `kubectl
exec` gets an answer that says so and what to use instead.

Served over TLS on loopback with the API server's own serving certificate (it names
127.0.0.1); the API server does not check a kubelet's certificate unless told to, and it is
the only client.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

log = logging.getLogger(__name__)
FOLLOW_POLL_SECONDS = 0.2

# (namespace, pod, container) -> (log file, offset where this container's output starts)
LogLocator = Callable[[str, str, str], tuple[Path, int] | None]
NO_EXEC = (
    "the local stack's node agent runs daemons, not containers: there is nothing to exec "
    "into. Run Slurm commands on this host (the SLURM_CONF and PATH `local up` printed), or "
    "ssh to the login Pod (the port `local up` printed)"
)


class KubeletServer:
    def __init__(self, locate: LogLocator, cert: Path, key: Path) -> None:
        self._locate = locate
        self._stopping = threading.Event()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="kubelet-server")  # fmt: skip

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.serve(self)

            def do_POST(self) -> None:  # kubectl exec, attach, port-forward
                send_status(self, 400, "BadRequest", NO_EXEC)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("kubelet server: " + format, *args)

        return Handler

    def serve(self, request: BaseHTTPRequestHandler) -> None:
        url = urlparse(request.path)
        parts = url.path.strip("/").split("/")
        if parts[0] in ("exec", "attach", "portForward"):
            send_status(request, 400, "BadRequest", NO_EXEC)
            return
        if len(parts) != 4 or parts[0] != "containerLogs":
            send_status(request, 404, "NotFound", "this local kubelet serves only /containerLogs")
            return
        found = self._locate(parts[1], parts[2], parts[3])
        if found is None:
            send_status(request, 404, "NotFound", f"container {parts[3]!r} of pod "
                        f"{parts[1]}/{parts[2]} runs no daemon on this node")  # fmt: skip
            return
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path, offset = found
        request.send_response(200)
        request.send_header("Content-Type", "text/plain")
        request.end_headers()
        try:
            self._write_log(request, path, offset, query)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            return  # the client went away (Ctrl-C on `kubectl logs -f`)

    def _write_log(
        self, request: BaseHTTPRequestHandler, path: Path, offset: int, query: dict[str, str]
    ) -> None:
        data = _read_from(path, offset)
        if query.get("tailLines"):
            data = tail_lines(data, int(query["tailLines"]))
        if query.get("limitBytes"):
            data = data[: int(query["limitBytes"])]
        request.wfile.write(data)
        request.wfile.flush()
        if query.get("follow") != "true":
            return
        position = _size(path)
        while not self._stopping.is_set():
            size = _size(path)
            if size > position:
                with path.open("rb") as source:
                    source.seek(position)
                    request.wfile.write(source.read(size - position))
                    request.wfile.flush()
                position = size
            time.sleep(FOLLOW_POLL_SECONDS)


def send_status(request: BaseHTTPRequestHandler, code: int, reason: str, message: str) -> None:
    """An error as a metav1.Status, which the API server and kubectl show as such."""
    body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                       "status": "Failure", "message": message, "reason": reason,
                       "code": code}).encode()  # fmt: skip
    request.send_response(code)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(body)))
    request.end_headers()
    request.wfile.write(body)


def tail_lines(data: bytes, count: int) -> bytes:
    """The last `count` lines of `data`, as `kubectl logs --tail` means them."""
    if count <= 0:
        return b""
    lines = data.splitlines(keepends=True)
    return b"".join(lines[-count:])


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with path.open("rb") as source:
            source.seek(offset)
            return source.read()
    except FileNotFoundError:
        return b""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
