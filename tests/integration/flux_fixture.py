"""Flux's side of the Flux artifact source, for tests: the GitRepository CRD (v1 shape) on the
real API server, and a loopback server standing in for source-controller's artifact storage."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from reconciler.adapters.kube import Kube

CRD = "gitrepositories.source.toolkit.fluxcd.io"


def install_crd(client: Kube) -> None:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    client.apply({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {"group": "source.toolkit.fluxcd.io", "scope": "Namespaced",
                 "names": {"plural": "gitrepositories", "singular": "gitrepository",
                           "kind": "GitRepository"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": schema}}]},
    })  # fmt: skip
    deadline = time.monotonic() + 30
    while client.get(
        "apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD
    ) is None or not _served(client):
        assert time.monotonic() < deadline, "CRD not served"
        time.sleep(0.2)


def remove_crd(client: Kube) -> None:
    client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD)


def _served(client: Kube) -> bool:
    try:
        client.resource("source.toolkit.fluxcd.io/v1", "GitRepository")
    except Exception:
        return False
    return True


class Artifacts:
    """A loopback HTTP server standing in for source-controller's artifact storage."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        files = self.files

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"


def serving_artifacts() -> Iterator[Artifacts]:
    served = Artifacts()
    yield served
    served.server.shutdown()
    served.server.server_close()


def tarball(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def publish(
    k: Kube,
    artifacts: Artifacts,
    name: str,
    revision: str,
    body: bytes,
    digest: str | None = None,
    namespace: str = "default",
) -> None:
    path = f"/gitrepository/{namespace}/{name}/{revision[-8:]}.tar.gz"
    artifacts.files[path] = body
    k.apply({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"url": "https://example.invalid/config.git", "interval": "1m"},
        "status": {"artifact": {
            "url": artifacts.url(path), "revision": revision,
            "digest": f"sha256:{digest or hashlib.sha256(body).hexdigest()}",
        }},
    }, force=True)  # fmt: skip
