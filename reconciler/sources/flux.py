"""A Flux `GitRepository`'s artifact: Flux's source-controller fetches the repo and publishes
a tarball; we read `.status.artifact` (url, revision, digest), download it, and check its
sha256 digest before a single file of it is used.

Each revision unpacks into a directory of its own, named by digest, so a revision being
compiled is never changed under the compiler.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import threading
from pathlib import Path
from typing import Any

import requests

from reconciler.adapters.kube import Kube
from reconciler.errors import SourceError
from reconciler.sources import Revision

FLUX_SOURCE_API = "source.toolkit.fluxcd.io/v1"
DOWNLOAD_TIMEOUT_SECONDS = 60.0
KEEP_REVISIONS = 2  # the one applied and the one being tried
# Python's own extraction filter where it has one (3.11.4+), on top of _check_members.
_SAFE_EXTRACT: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


class FluxArtifactSource:
    def __init__(
        self, kube: Kube, namespace: str, name: str, workdir: Path, *, api: str = FLUX_SOURCE_API
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._name = name
        self._workdir = Path(workdir)
        self._api = api
        self._lock = threading.Lock()
        self._current: Revision | None = None

    @property
    def origin(self) -> str:
        return f"flux GitRepository {self._namespace}/{self._name}"

    def fetch(self) -> Revision:
        with self._lock:
            artifact = self._artifact()
            revision = str(artifact.get("revision") or "")
            if self._current is not None and self._current.id == revision:
                return self._current
            digest = _sha256_of(artifact, self.origin)
            target = self._workdir / digest
            if not target.is_dir():
                _unpack(_download(str(artifact["url"]), digest, self.origin), target)
            self._current = Revision(revision, target, self.origin, f"artifact sha256:{digest}")
            self._prune(keep=target)
            return self._current

    def _artifact(self) -> dict[str, Any]:
        obj = self._kube.get(self._api, "GitRepository", self._name, self._namespace)
        if obj is None:
            raise SourceError(
                f"{self.origin} does not exist",
                hint="create it (deploy/flux has an example) or fix --flux-git-repository",
            )
        artifact = (obj.get("status") or {}).get("artifact") or {}
        if not artifact.get("url") or not artifact.get("revision"):
            raise SourceError(
                f"{self.origin} has no artifact yet",
                hint="source-controller publishes one after its first fetch; see its conditions",
            )
        return artifact

    def _prune(self, keep: Path) -> None:
        unpacked = sorted(
            (p for p in self._workdir.iterdir() if p.is_dir() and p != keep),
            key=lambda p: p.stat().st_mtime,
        )
        for old in unpacked[: max(0, len(unpacked) - (KEEP_REVISIONS - 1))]:
            shutil.rmtree(old, ignore_errors=True)


def _sha256_of(artifact: dict[str, Any], origin: str) -> str:
    digest = str(artifact.get("digest") or "")
    algorithm, _, value = digest.partition(":")
    if algorithm != "sha256" or len(value) != 64:
        raise SourceError(
            f"{origin}: artifact digest {digest!r} is not a sha256 digest; refusing to use it",
            hint="Flux source-controller v1 publishes `digest: sha256:<hex>`",
        )
    return value.lower()


def _download(url: str, digest: str, origin: str) -> bytes:
    try:
        response = requests.get(url, timeout=DOWNLOAD_TIMEOUT_SECONDS)
        response.raise_for_status()
    except requests.RequestException as error:
        raise SourceError(f"{origin}: cannot download {url}: {type(error).__name__}") from None
    body = response.content
    actual = hashlib.sha256(body).hexdigest()
    if actual != digest:
        raise SourceError(
            f"{origin}: artifact from {url} has sha256 {actual}, but the GitRepository says "
            f"{digest}; refusing to use it",
            hint="the artifact changed after Flux published it, or something altered it",
        )
    return body


def _check_members(archive: tarfile.TarFile) -> None:
    """Only plain files and directories inside the target: a config repo needs nothing else,
    and the check holds on Pythons whose tarfile has no extraction filters."""
    for member in archive.getmembers():
        parts = Path(member.name).parts
        if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
            raise tarfile.TarError(f"refusing member {member.name!r}")


def _unpack(body: bytes, target: Path) -> None:
    """Into a temporary directory first, so a half-unpacked revision never exists."""
    partial = target.with_name(f".{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as archive:
            _check_members(archive)
            archive.extractall(partial, **_SAFE_EXTRACT)
    except (tarfile.TarError, OSError) as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise SourceError(f"artifact is not a readable tarball: {error}") from None
    partial.replace(target)
