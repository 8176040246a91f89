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
import zlib
from pathlib import Path
from typing import Any

import requests

from reconciler.adapters.kube import Kube
from reconciler.errors import SourceError
from reconciler.sources import Revision
from reconciler.sources.redact import redacted

FLUX_SOURCE_API = "source.toolkit.fluxcd.io/v1"
DOWNLOAD_TIMEOUT_SECONDS = 60.0
KEEP_REVISIONS = 2  # the one applied and the one being tried
# A config repo's artifact is kilobytes, a few megabytes with history-free vendored files.
# Far past that, the artifact is not a config repo (or is a decompression bomb): it is refused
# before it fills the daemon's memory or its work directory.
MAX_ARTIFACT_BYTES = 100 * 1024 * 1024
MAX_UNPACKED_BYTES = 500 * 1024 * 1024
MAX_UNPACKED_FILES = 50_000
_CHUNK = 64 * 1024
_SIZE_HINT = (
    "a config repo is small: point the GitRepository at it alone, or leave the rest out with "
    "its spec.ignore"
)
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


def _download(url: str, digest: str, origin: str, *, max_bytes: int = MAX_ARTIFACT_BYTES) -> bytes:
    shown = redacted(url)
    try:
        with requests.get(url, timeout=DOWNLOAD_TIMEOUT_SECONDS, stream=True) as response:
            response.raise_for_status()
            body = _read_capped(response, max_bytes, f"{origin}: the artifact at {shown}")
    except requests.RequestException as error:
        raise SourceError(f"{origin}: cannot download {shown}: {type(error).__name__}") from None
    actual = hashlib.sha256(body).hexdigest()
    if actual != digest:
        raise SourceError(
            f"{origin}: artifact from {shown} has sha256 {actual}, but the GitRepository says "
            f"{digest}; refusing to use it",
            hint="the artifact changed after Flux published it, or something altered it",
        )
    return body


def _read_capped(response: requests.Response, max_bytes: int, what: str) -> bytes:
    """The body, or a SourceError as soon as it is known to pass `max_bytes` (its declared
    length, else the bytes read so far): never more than that in memory."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(what, f"is {_size(int(declared))}, larger than {_size(max_bytes)}")
    body = bytearray()
    for chunk in response.iter_content(_CHUNK):
        body += chunk
        if len(body) > max_bytes:
            raise _too_large(what, f"is larger than {_size(max_bytes)}")
    return bytes(body)


def _too_large(what: str, how: str) -> SourceError:
    return SourceError(f"{what} {how}; refusing it", hint=_SIZE_HINT)


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:g} {unit}"
    return f"{count} bytes"


def _check_members(archive: tarfile.TarFile, max_bytes: int, max_files: int) -> None:
    """Only plain files and directories inside the target: a config repo needs nothing else,
    and the check holds on Pythons whose tarfile has no extraction filters. Read lazily, so a
    bomb of members is refused at the first one past the limits."""
    total = 0
    for count, member in enumerate(archive, start=1):
        parts = Path(member.name).parts
        if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
            raise tarfile.TarError(f"refusing member {member.name!r}")
        total += member.size if member.isfile() else 0
        if count > max_files:
            raise _too_large("the artifact", f"holds more than {max_files} files")
        if total > max_bytes:
            raise _too_large("the artifact", f"unpacks to more than {_size(max_bytes)}")


def _unpack(
    body: bytes,
    target: Path,
    *,
    max_bytes: int = MAX_UNPACKED_BYTES,
    max_files: int = MAX_UNPACKED_FILES,
) -> None:
    """Into a temporary directory first, so a half-unpacked revision never exists."""
    partial = target.with_name(f".{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as archive:
            _check_members(archive, max_bytes, max_files)
            archive.extractall(partial, **_SAFE_EXTRACT)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise SourceError(f"artifact is not a readable tarball: {error}") from None
    except SourceError:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    partial.replace(target)
