"""The sandbox ("pause") image of the kubelet cluster, made here without a registry.

containerd's CRI starts every Pod with a sandbox container from `sandbox_image`; upstream's
pause image is on registry.k8s.io, which this machine cannot reach. Ours is the same small
program (sleep until SIGINT/SIGTERM, reap children), compiled static with the machine's gcc,
in a one-layer OCI archive written here: `ctr images import` loads it, no podman needed.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

from reconciler.errors import LocalStackError

PAUSE_IMAGE = "localhost/sunk-reconciler/pause:3.6"

# What upstream's build/pause/linux/pause.c does, in short.
PAUSE_C = r"""
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void sigdown(int s) { (void)s; _exit(0); }
static void sigreap(int s) { (void)s; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(void) {
  struct sigaction down = {.sa_handler = sigdown}, reap = {.sa_handler = sigreap,
                                                           .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &down, NULL) || sigaction(SIGTERM, &down, NULL) ||
      sigaction(SIGCHLD, &reap, NULL)) return 1;
  for (;;) pause();
}
"""


def build_pause_binary(work: Path) -> Path:
    """`pause`, a static binary (it runs on an empty root filesystem)."""
    work.mkdir(parents=True, exist_ok=True)
    source, binary = work / "pause.c", work / "pause"
    source.write_text(PAUSE_C)
    done = subprocess.run(
        ["gcc", "-static", "-Os", "-s", "-o", str(binary), str(source)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise LocalStackError(
            f"cannot compile the pause image's program: {done.stderr.strip()[-400:]}",
            hint="install build-essential (tools/setup.sh does)",
        )
    return binary


def oci_archive(dest: Path, name: str, files: dict[str, tuple[bytes, int]],
                entrypoint: list[str]) -> Path:  # fmt: skip
    """An OCI image archive (one layer: `files`, path -> (content, mode)) that `ctr images
    import` names `name` (its index carries containerd's image-name annotation)."""
    layer = _gzip_tar(files)
    diff_id = "sha256:" + hashlib.sha256(gzip.decompress(layer)).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": entrypoint},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }).encode()  # fmt: skip
    blobs = {_digest(layer): layer, _digest(config): config}
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": _descriptor("application/vnd.oci.image.config.v1+json", config),
        "layers": [_descriptor("application/vnd.oci.image.layer.v1.tar+gzip", layer)],
    }).encode()  # fmt: skip
    blobs[_digest(manifest)] = manifest
    index = {
        "schemaVersion": 2,
        "manifests": [{
            **_descriptor("application/vnd.oci.image.manifest.v1+json", manifest),
            "annotations": {"io.containerd.image.name": name,
                            "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]},
        }],
    }  # fmt: skip
    entries = {"oci-layout": b'{"imageLayoutVersion":"1.0.0"}', "index.json": json.dumps(index)
               .encode()}  # fmt: skip
    entries.update({f"blobs/sha256/{d.split(':')[1]}": blob for d, blob in blobs.items()})
    with tarfile.open(dest, "w") as tar:
        for path, content in entries.items():
            _add(tar, path, content, 0o644)
    return dest


def pause_archive(work: Path) -> Path:
    """The pause image as an OCI archive in `work` (made once; the program is tiny)."""
    archive = work / "pause.oci.tar"
    if not archive.exists():
        binary = build_pause_binary(work)
        oci_archive(archive, PAUSE_IMAGE, {"pause": (binary.read_bytes(), 0o755)}, ["/pause"])
    return archive


def _gzip_tar(files: dict[str, tuple[bytes, int]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for path, (content, mode) in files.items():
            _add(tar, path, content, mode)
    return gzip.compress(raw.getvalue(), mtime=0)


def _add(tar: tarfile.TarFile, path: str, content: bytes, mode: int) -> None:
    info = tarfile.TarInfo(path)
    info.size, info.mode = len(content), mode
    tar.addfile(info, io.BytesIO(content))


def _digest(blob: bytes) -> str:
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def _descriptor(media_type: str, blob: bytes) -> dict[str, object]:
    return {"mediaType": media_type, "digest": _digest(blob), "size": len(blob)}
