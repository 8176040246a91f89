"""A Pod's volumes on the local stack, as kubelet would mount them, on the one filesystem of
this host.

There are no containers here, so there is no mount namespace either: every container path a
Pod mounts maps to one host path. The paths Slurm's daemons share (its config directory, the
JWT and munge keys, the munge socket, the controller's state) map to the stack's directories,
the same for every Pod, because slurm.conf names them once; any other path is private to its
Pod, under `<pods root>/<namespace>_<pod>/`.

`pod_mounts` is pure (which mount shows which source where); `Materializer` writes the files.
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from reconciler.errors import ReconcilerError
from reconciler.objects import Obj

# Kubernetes' default for configMap and secret volumes.
DEFAULT_MODE = 0o644
FILE_SOURCES = ("configMap", "secret")


class VolumeError(ReconcilerError):
    """A volume a Pod mounts cannot be set up (kubelet's FailedMount)."""


@dataclass(frozen=True)
class Mount:
    """One volumeMount of one container, with the volume it shows."""

    container: str
    path: PurePosixPath
    volume: str
    source: str  # configMap, secret, persistentVolumeClaim, emptyDir, or another kind
    spec: Mapping[str, Any]  # the volume's source spec (e.g. {"name": ..., "defaultMode": ...})
    sub_path: str = ""

    @property
    def object_name(self) -> str:
        """The ConfigMap, Secret or claim this mount shows ("" for an emptyDir)."""
        key = {"configMap": "name", "secret": "secretName", "persistentVolumeClaim": "claimName"}
        return str(self.spec.get(key.get(self.source, ""), ""))


@dataclass(frozen=True)
class HostLayout:
    """Container path -> host path: `shared` prefixes first (longest wins), else per Pod."""

    shared: Mapping[PurePosixPath, Path]
    pods_root: Path

    def pod_dir(self, namespace: str, pod: str) -> Path:
        return self.pods_root / f"{namespace}_{pod}"

    def host_path(self, namespace: str, pod: str, path: PurePosixPath) -> Path:
        for prefix in sorted(self.shared, key=lambda p: len(p.parts), reverse=True):
            if path == prefix or prefix in path.parents:
                return self.shared[prefix] / path.relative_to(prefix)
        return self.pod_dir(namespace, pod) / path.relative_to("/")


def pod_mounts(pod: Mapping[str, Any], containers: Iterable[str] | None = None) -> list[Mount]:
    """Every volumeMount of the Pod's containers (or of those named), with its volume."""
    spec = pod.get("spec") or {}
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    wanted = set(containers) if containers is not None else None
    mounts = []
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if wanted is not None and container["name"] not in wanted:
            continue
        for mount in container.get("volumeMounts") or []:
            volume = volumes.get(mount["name"])
            if volume is None:  # the API server refuses this; never guess
                raise VolumeError(f"container {container['name']} mounts volume "
                                  f"{mount['name']!r}, which the Pod does not define")  # fmt: skip
            source = next((k for k in volume if k != "name"), "emptyDir")
            mounts.append(Mount(container["name"], PurePosixPath(mount["mountPath"]),
                                mount["name"], source, volume.get(source) or {},
                                str(mount.get("subPath") or "")))  # fmt: skip
    return mounts


def volume_files(mount: Mount, data: Mapping[str, bytes]) -> dict[str, tuple[bytes, int]]:
    """Relative file name -> (content, mode) that a configMap or secret volume shows, as the
    volume's `items` and modes select them (all keys when there are no items)."""
    default = int(mount.spec.get("defaultMode", DEFAULT_MODE))
    items = mount.spec.get("items")
    if not items:
        return {key: (value, default) for key, value in data.items()}
    files = {}
    for item in items:
        if item["key"] not in data:
            if mount.spec.get("optional"):
                continue
            raise VolumeError(f"{mount.source} {mount.object_name} has no key {item['key']!r}")
        files[item["path"]] = (data[item["key"]], int(item.get("mode", default)))
    return files


def decoded_data(obj: Mapping[str, Any]) -> dict[str, bytes]:
    """A ConfigMap's or Secret's data as bytes (Secret data and binaryData are base64)."""
    if obj.get("kind") == "Secret":
        return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
    data = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
    data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    return data


Reader = Callable[[str, str, str], Obj | None]  # (kind, namespace, name) -> object or None


class Materializer:
    """Writes what a Pod's volumes show onto the host, as kubelet mounts them."""

    def __init__(self, layout: HostLayout, read: Reader) -> None:
        self._layout = layout
        self._read = read
        # Pods sync in parallel and share files (every one mounts slurm.conf): one writer.
        self._write_lock = threading.Lock()

    def host_path(self, pod: Mapping[str, Any], path: str | PurePosixPath) -> Path:
        meta = pod["metadata"]
        return self._layout.host_path(meta["namespace"], meta["name"], PurePosixPath(path))

    def pod_dir(self, pod: Mapping[str, Any]) -> Path:
        meta = pod["metadata"]
        return self._layout.pod_dir(meta["namespace"], meta["name"])

    def mount_all(self, pod: Mapping[str, Any]) -> None:
        """Every volume of every container, or VolumeError (the Pod stays Pending)."""
        for mount in pod_mounts(pod):
            self.mount(pod, mount)

    def mount(self, pod: Mapping[str, Any], mount: Mount) -> None:
        target = self.host_path(pod, mount.path)
        if mount.source not in FILE_SOURCES:  # claims, emptyDirs: a directory that persists
            target.mkdir(parents=True, exist_ok=True)
            return
        data = self._data(pod, mount)
        if data is None:
            return  # optional and missing: an empty volume
        files = volume_files(mount, data)
        if mount.sub_path:
            files = sub_path_files(mount, files)
        with self._write_lock:
            for name, (content, mode) in files.items():
                write_file(target / name if name else target, content, mode)

    def refresh(self, pod: Mapping[str, Any], kind: str, name: str) -> bool:
        """Rewrite the mounts of `kind`/`name` (a ConfigMap or Secret that changed); whether
        the Pod mounts it. subPath mounts are never refreshed, as in Kubernetes."""
        source = "configMap" if kind == "ConfigMap" else "secret"
        found = False
        for mount in pod_mounts(pod):
            if mount.source == source and mount.object_name == name:
                found = True
                if not mount.sub_path:
                    self.mount(pod, mount)
        return found

    def _data(self, pod: Mapping[str, Any], mount: Mount) -> dict[str, bytes] | None:
        kind = "ConfigMap" if mount.source == "configMap" else "Secret"
        obj = self._read(kind, pod["metadata"]["namespace"], mount.object_name)
        if obj is None:
            if mount.spec.get("optional"):
                return None
            raise VolumeError(
                f"pod {pod['metadata']['namespace']}/{pod['metadata']['name']} mounts {kind} "
                f"{mount.object_name!r}, which does not exist",
                hint=f"create it (kubectl -n {pod['metadata']['namespace']} create "
                f"{kind.lower()} {mount.object_name} ...); the Pod starts once it exists",
            )
        return decoded_data(obj)


def sub_path_files(
    mount: Mount, files: Mapping[str, tuple[bytes, int]]
) -> dict[str, tuple[bytes, int]]:
    """What a subPath mount shows: one file of the volume ("" -> the mount path itself), or a
    folder of it, which a volume's `items` make with nested paths (s6-rc.d/<service>/type)."""
    sub = mount.sub_path.strip("/")
    if sub in files:
        return {"": files[sub]}
    inside = {name[len(sub) + 1 :]: file for name, file in files.items()
              if name.startswith(f"{sub}/")}  # fmt: skip
    return inside or {"": _missing_key(mount)}


def _missing_key(mount: Mount) -> tuple[bytes, int]:
    raise VolumeError(
        f"{mount.source} {mount.object_name!r} has no key {mount.sub_path!r} "
        f"(mounted with subPath at {mount.path})"
    )


def write_file(path: Path, content: bytes, mode: int) -> None:
    """Atomically, and only when it differs: a daemon never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.read_bytes() == content and (path.stat().st_mode & 0o777) == mode:
            return
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(content)
    tmp.chmod(mode)
    tmp.replace(path)
