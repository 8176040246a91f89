"""The munge sidecar every Slurm Pod carries (seed 001's 4/4 containers): munged with the key
from the generated Secret, its socket on a volume the Slurm container shares."""

from __future__ import annotations

from typing import Any

from reconciler.compile.secrets import MUNGE_KEY_FILE, munge_secret_name

MUNGE_CONTAINER = "munge"
MUNGE_SOCKET_DIR = "/run/munge"
MUNGE_KEY_DIR = "/etc/munge-key"
_SOCKET_VOLUME = "munge-socket"
_KEY_VOLUME = "munge-key"


def munge_container(image: str) -> dict[str, Any]:
    return {
        "name": MUNGE_CONTAINER,
        "image": image,
        "args": ["munged", "--foreground", f"--key-file={MUNGE_KEY_DIR}/{MUNGE_KEY_FILE}",
                 f"--socket={MUNGE_SOCKET_DIR}/munge.socket.2"],
        "volumeMounts": [
            {"name": _KEY_VOLUME, "mountPath": MUNGE_KEY_DIR, "readOnly": True},
            munge_socket_mount(),
        ],
    }  # fmt: skip


def munge_socket_mount() -> dict[str, Any]:
    """For the Slurm container: where its daemon or command finds munged."""
    return {"name": _SOCKET_VOLUME, "mountPath": MUNGE_SOCKET_DIR}


def munge_volumes(release: str) -> list[dict[str, Any]]:
    return [
        {"name": _KEY_VOLUME,
         "secret": {"secretName": munge_secret_name(release), "defaultMode": 0o400}},
        {"name": _SOCKET_VOLUME, "emptyDir": {}},
    ]  # fmt: skip
