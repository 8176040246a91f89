"""The two kubelet endpoints the API server proxies to a Node, for the local Nodes:

- GET /containerLogs/{namespace}/{pod}/{container}: what that container's daemon wrote, so
  seed 001's `kubectl logs -f -l app.kubernetes.io/name=slurmctld -c slurmctld` works;
- /exec/{namespace}/{pod}/{container}?command=...: `kubectl exec` without a TTY or stdin,
  over the WebSocket channel protocol (v4.channel.k8s.io) the API server passes through. There
  are no containers here: the command runs on this host, with the container's environment and
  its mount paths turned into the host paths the Pod's volumes are on (volumes.py). That is
  enough for `kubectl exec slurm-login-0 -c sshd -- sinfo`, and for apply to read slurm.conf
  as the controller Pod sees it.

Served over TLS on loopback with the API server's own serving certificate (it names
127.0.0.1); the API server does not check a kubelet's certificate unless told to, and it is
the only client.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import ssl
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

log = logging.getLogger(__name__)
FOLLOW_POLL_SECONDS = 0.2

WEBSOCKET_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CHANNEL_PROTOCOL = "v4.channel.k8s.io"
STDOUT, STDERR, STATUS = 1, 2, 3

# (namespace, pod, container) -> (log file, offset where this container's output starts)
LogLocator = Callable[[str, str, str], tuple[Path, int] | None]
# (namespace, pod, container, argv) -> (exit code, stdout, stderr); LookupError: no such
# container running here
Executor = Callable[[str, str, str, list[str]], tuple[int, bytes, bytes]]


class KubeletServer:
    def __init__(self, locate: LogLocator, execute: Executor, cert: Path, key: Path) -> None:
        self._locate = locate
        self._execute = execute
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

            def log_message(self, format: str, *args: object) -> None:
                log.debug("kubelet server: " + format, *args)

        return Handler

    def serve(self, request: BaseHTTPRequestHandler) -> None:
        url = urlparse(request.path)
        parts = url.path.strip("/").split("/")
        if len(parts) == 4 and parts[0] == "exec":
            self._exec(request, parts[1], parts[2], parts[3], parse_qs(url.query))
            return
        if len(parts) != 4 or parts[0] != "containerLogs":
            request.send_error(404, "this local kubelet serves only /containerLogs and /exec")
            return
        found = self._locate(parts[1], parts[2], parts[3])
        if found is None:
            request.send_error(404, f"container {parts[3]!r} of pod {parts[1]}/{parts[2]} is "
                                    "not running on this node")  # fmt: skip
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


    def _exec(
        self,
        request: BaseHTTPRequestHandler,
        namespace: str,
        pod: str,
        container: str,
        query: dict[str, list[str]],
    ) -> None:
        if _flag(query, "tty") or _flag(query, "input", "stdin"):
            request.send_error(400, "the local kubelet runs commands without a TTY or stdin")
            return
        key = request.headers.get("Sec-WebSocket-Key")
        offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        if not key or CHANNEL_PROTOCOL not in offered:
            request.send_error(400, f"exec needs a WebSocket upgrade with {CHANNEL_PROTOCOL}")
            return
        try:
            code, out, err = self._execute(namespace, pod, container, query.get("command", []))
        except LookupError as exc:
            request.send_error(404, str(exc))
            return
        request.send_response(101, "Switching Protocols")
        request.send_header("Upgrade", "websocket")
        request.send_header("Connection", "Upgrade")
        request.send_header("Sec-WebSocket-Accept", websocket_accept(key))
        request.send_header("Sec-WebSocket-Protocol", CHANNEL_PROTOCOL)
        request.end_headers()
        request.close_connection = True
        try:
            for channel, data in ((STDOUT, out), (STDERR, err), (STATUS, exec_status(code))):
                if data:
                    request.wfile.write(websocket_frame(bytes([channel]) + data))
            request.wfile.write(websocket_frame(b"", opcode=0x8))  # close
            request.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            return


def websocket_accept(key: str) -> str:
    """RFC 6455's answer to a client's Sec-WebSocket-Key."""
    return base64.b64encode(hashlib.sha1(key.encode() + WEBSOCKET_GUID).digest()).decode()


def websocket_frame(payload: bytes, *, opcode: int = 0x2) -> bytes:
    """One unmasked, final frame (a server never masks); binary by default."""
    size = len(payload)
    if size < 126:
        header = struct.pack("!BB", 0x80 | opcode, size)
    elif size < 1 << 16:
        header = struct.pack("!BBH", 0x80 | opcode, 126, size)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 127, size)
    return header + payload


def exec_status(code: int) -> bytes:
    """The metav1.Status kubelet sends on the error channel when the command ends."""
    if code == 0:
        return json.dumps({"metadata": {}, "status": "Success"}).encode()
    return json.dumps({
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }).encode()  # fmt: skip


def _flag(query: dict[str, list[str]], *names: str) -> bool:
    return any(query.get(name, [""])[-1] in ("1", "true") for name in names)


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
