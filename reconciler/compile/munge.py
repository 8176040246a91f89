"""The munge sidecar every Slurm Pod carries (4/4 containers in SUNK's "Slurm Workload Manager"
page): munged with the key from the generated Secret, its socket on a volume the Slurm container
shares.

munged refuses a key that is a symlink (every file of a Secret volume is one), readable by
its group, or not its own user's, and a key or socket directory writable by others (an
emptyDir is 0777): checked on munge 0.5.15. So an init container from the same image copies
the key, as root with CHOWN and FOWNER only, into an emptyDir at /run/munge-key (0700, the key
0400, both owned by munge 64031), and makes the socket directory munge's (0755); munged then
runs as munge on the copy.
"""

from __future__ import annotations

from typing import Any

from reconciler.compile import probes
from reconciler.compile.resources import sidecar_resources
from reconciler.compile.secrets import MUNGE_KEY_FILE, munge_secret_name

MUNGE_CONTAINER = "munge"
MUNGE_INIT_CONTAINER = "munge-key"
MUNGE_UID = 64031  # Debian's munge user, as our image makes it (CONTRACT-32)
MUNGE_SOCKET_DIR = "/run/munge"
MUNGE_SOCKET = f"{MUNGE_SOCKET_DIR}/munge.socket.2"
MUNGE_KEY_DIR = "/etc/munge-key"  # the Secret, read-only: symlinks
MUNGE_RUN_KEY_DIR = "/run/munge-key"  # the copy munged reads
_SOCKET_VOLUME = "munge-socket"
_KEY_VOLUME = "munge-key"
_RUN_KEY_VOLUME = "munge-key-copy"
_ID = f"{MUNGE_UID}:{MUNGE_UID}"
# chmod before chown: once the directory is munge's, root without FOWNER could not.
COPY_KEY = f"""set -eu
install -o {MUNGE_UID} -g {MUNGE_UID} -m 0400 {MUNGE_KEY_DIR}/{MUNGE_KEY_FILE} \
{MUNGE_RUN_KEY_DIR}/{MUNGE_KEY_FILE}
chmod 0700 {MUNGE_RUN_KEY_DIR} && chown {_ID} {MUNGE_RUN_KEY_DIR}
chmod 0755 {MUNGE_SOCKET_DIR} && chown {_ID} {MUNGE_SOCKET_DIR}
"""


def munge_container(image: str, values: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": MUNGE_CONTAINER,
        "image": image,
        # In the foreground munged logs to stderr; its pid and seed files go beside the socket
        # (the image's /var/lib/munge may be read-only).
        "args": ["munged", "--foreground", f"--key-file={MUNGE_RUN_KEY_DIR}/{MUNGE_KEY_FILE}",
                 f"--socket={MUNGE_SOCKET}", f"--pid-file={MUNGE_SOCKET_DIR}/munged.pid",
                 f"--seed-file={MUNGE_SOCKET_DIR}/munged.seed"],
        **probes.munged(MUNGE_SOCKET),
        "resources": sidecar_resources(values, "munge"),
        "securityContext": {"runAsUser": MUNGE_UID, "runAsGroup": MUNGE_UID,
                            "runAsNonRoot": True},
        "volumeMounts": [
            {"name": _RUN_KEY_VOLUME, "mountPath": MUNGE_RUN_KEY_DIR, "readOnly": True},
            munge_socket_mount(),
        ],
    }  # fmt: skip


def munge_init_container(image: str, values: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": MUNGE_INIT_CONTAINER,
        "image": image,
        "command": ["sh", "-c", COPY_KEY],
        "resources": sidecar_resources(values, "munge"),
        "securityContext": {"runAsUser": 0, "runAsGroup": 0,
                            "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}},
        "volumeMounts": [
            {"name": _KEY_VOLUME, "mountPath": MUNGE_KEY_DIR, "readOnly": True},
            {"name": _RUN_KEY_VOLUME, "mountPath": MUNGE_RUN_KEY_DIR},
            munge_socket_mount(),
        ],
    }  # fmt: skip


def with_munge(pod: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """`pod` (a Pod spec whose first container runs Slurm) with munged beside it: the sidecar
    after the main container, the init container that copies the key before any other."""
    main, *others = pod["containers"]
    pull = {"imagePullPolicy": main["imagePullPolicy"]} if "imagePullPolicy" in main else {}
    init = {**munge_init_container(main["image"], values), **pull}
    sidecar = {**munge_container(main["image"], values), **pull}
    return {
        **pod,
        "initContainers": [init, *(pod.get("initContainers") or [])],
        "containers": [main, sidecar, *others],
    }


def munge_socket_mount() -> dict[str, Any]:
    """For the Slurm container: where its daemon or command finds munged."""
    return {"name": _SOCKET_VOLUME, "mountPath": MUNGE_SOCKET_DIR}


def munge_volumes(release: str) -> list[dict[str, Any]]:
    return [
        {"name": _KEY_VOLUME,
         "secret": {"secretName": munge_secret_name(release), "defaultMode": 0o400}},
        {"name": _RUN_KEY_VOLUME, "emptyDir": {"medium": "Memory"}},
        {"name": _SOCKET_VOLUME, "emptyDir": {}},
    ]  # fmt: skip
