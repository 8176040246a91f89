"""The Flux artifact source against the real API server: a GitRepository (Flux's v1 CRD shape)
whose status points at a tarball served on loopback, as source-controller publishes it."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from reconciler.adapters.kube import Kube
from reconciler.errors import SourceError
from reconciler.local.endpoints import KubeEndpoints
from reconciler.sources.flux import FluxArtifactSource
from tests.integration.helpers import unique

CRD = "gitrepositories.source.toolkit.fluxcd.io"


@pytest.fixture(scope="module")
def k(kube: KubeEndpoints) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(kube.kubeconfig)
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
    yield client
    client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD)
    client.close()


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


@pytest.fixture(scope="module")
def artifacts() -> Iterator[Artifacts]:
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
    k: Kube, artifacts: Artifacts, name: str, revision: str, body: bytes, digest: str | None = None
) -> None:
    path = f"/gitrepository/default/{name}/{revision[-8:]}.tar.gz"
    artifacts.files[path] = body
    k.apply({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"url": "https://example.invalid/config.git", "interval": "1m"},
        "status": {"artifact": {
            "url": artifacts.url(path), "revision": revision,
            "digest": f"sha256:{digest or hashlib.sha256(body).hexdigest()}",
        }},
    }, force=True)  # fmt: skip


def test_flux_artifact_is_downloaded_checked_and_unpacked(
    k: Kube, artifacts: Artifacts, tmp_path: Path
) -> None:
    name = unique("config")
    publish(k, artifacts, name, "main@sha1:" + "a" * 40, tarball({"values.yaml": "a: 1\n"}))
    source = FluxArtifactSource(k, "default", name, tmp_path)
    first = source.fetch()
    assert first.id == "main@sha1:" + "a" * 40
    assert (first.path / "values.yaml").read_text() == "a: 1\n"
    assert source.fetch() == first
    publish(k, artifacts, name, "main@sha1:" + "b" * 40, tarball({"values.yaml": "a: 2\n"}))
    second = source.fetch()
    assert (second.path / "values.yaml").read_text() == "a: 2\n"
    assert (first.path / "values.yaml").read_text() == "a: 1\n", "a revision never changes"


def test_a_digest_mismatch_is_refused(k: Kube, artifacts: Artifacts, tmp_path: Path) -> None:
    name = unique("tampered")
    publish(k, artifacts, name, "main@sha1:" + "c" * 40, tarball({"values.yaml": "evil\n"}),
            digest="0" * 64)  # fmt: skip
    with pytest.raises(SourceError, match="refusing to use it"):
        FluxArtifactSource(k, "default", name, tmp_path).fetch()
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".")]


def test_no_repository_or_no_artifact(k: Kube, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        FluxArtifactSource(k, "default", unique("absent"), tmp_path).fetch()
    name = unique("fresh")
    k.apply({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
             "metadata": {"name": name, "namespace": "default"}, "spec": {}})  # fmt: skip
    with pytest.raises(SourceError, match="no artifact yet"):
        FluxArtifactSource(k, "default", name, tmp_path).fetch()
