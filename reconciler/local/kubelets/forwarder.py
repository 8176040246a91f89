"""TCP from this machine's loopback into the kubelet cluster's network namespace.

The control plane of `local up --kubelet` listens inside the cluster's network namespace (the
kubelets and the API server must reach each other's addresses there). The `up` process
listens on 127.0.0.1 at the same ports and relays each connection to 127.0.0.1 inside the
namespace, so the kubeconfig, `kubectl`, `reconciler apply` and the stack's own health checks
use one address from either side. It lives as long as the `up` process.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Sequence

from reconciler.local.kubelets.netns import ClusterNetwork, inside

LOOPBACK = "127.0.0.1"
CHUNK = 65536


class Forwarder:
    def __init__(self, network: ClusterNetwork, ports: Sequence[int]) -> None:
        self.network = network
        self.ports = list(ports)
        self._listeners: list[socket.socket] = []
        self._stopping = threading.Event()

    def start(self) -> None:
        for port in self.ports:
            listener = socket.create_server((LOOPBACK, port), reuse_port=False)
            self._listeners.append(listener)
            threading.Thread(target=self._accept, args=(listener, port), daemon=True,
                             name=f"forward-{port}").start()  # fmt: skip

    def stop(self) -> None:
        self._stopping.set()
        for listener in self._listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        self._listeners.clear()

    def _accept(self, listener: socket.socket, port: int) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client, port), daemon=True).start()

    def _relay(self, client: socket.socket, port: int) -> None:
        try:
            with inside(self.network):
                upstream = socket.create_connection((LOOPBACK, port), timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        _pump(client, upstream)


def _pump(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until either side closes."""
    peer = {a: b, b: a}
    with selectors.DefaultSelector() as sel, a, b:
        sel.register(a, selectors.EVENT_READ)
        sel.register(b, selectors.EVENT_READ)
        while True:
            for key, _ in sel.select():
                source: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data = source.recv(CHUNK)
                    if not data:
                        return
                    peer[source].sendall(data)
                except OSError:
                    return
