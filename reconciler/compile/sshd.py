"""sshd in a Pod: the login Pod's program, and beside slurmd when `compute.ssh.enabled` (seed
001: "SSH to compute nodes as well as login node"). One way to start it, for both:

- `/run/sshd`, sshd's privilege separation directory, is an emptyDir; sshd refuses one that
  others may write (an emptyDir is 0777), so the start makes it 0755 first.
- Our image ships no host keys (an image's keys would be every cluster's): `ssh-keygen -A`
  makes the missing ones when the container starts, so they change with the Pod.
- `-D -e`: sshd stays in the foreground and logs to the container's stderr.
"""

from __future__ import annotations

from typing import Any

SSHD_PRIVSEP_DIR = "/run/sshd"
SSHD_PORT = 22  # the image's sshd_config leaves sshd on its default port
SSHD_VOLUME = "sshd-run"
_PREPARE = f"chmod 0755 {SSHD_PRIVSEP_DIR} && ssh-keygen -A"
_SSHD = "/usr/sbin/sshd -D -e"
# The login container's whole command: sshd is its program.
SSHD_START = f"{_PREPARE} && exec {_SSHD}"
Obj = dict[str, Any]


def compute_ssh_enabled(values: Obj) -> bool:
    return bool(((values.get("compute") or {}).get("ssh") or {}).get("enabled"))


def sshd_beside(program: list[str]) -> str:
    """A shell command that starts sshd in the background, then execs `program` (slurmd), which
    stays the container's main process: its exit ends the container, as without sshd. A
    failed key or directory step ends the start, so a Pod that cannot serve SSH says so."""
    return f"{_PREPARE} || exit 1; {_SSHD} & exec {' '.join(program)}"


def sshd_volume() -> Obj:
    return {"name": SSHD_VOLUME, "emptyDir": {"medium": "Memory"}}


def sshd_mount() -> Obj:
    return {"name": SSHD_VOLUME, "mountPath": SSHD_PRIVSEP_DIR}


def authorized_keys(values: Obj) -> tuple[list[Obj], list[Obj]]:
    """(mounts, volumes) of `login.authorizedKeysSecret` as root's authorized_keys: in the
    login Pod, and in slurmd Pods that run sshd, so the key that opens one opens the other."""
    secret = (values.get("login") or {}).get("authorizedKeysSecret")
    if not secret:
        return [], []
    mount = {"name": "authorized-keys", "mountPath": "/root/.ssh/authorized_keys",
             "subPath": "authorized_keys", "readOnly": True}  # fmt: skip
    # optional: the Pod starts before the Secret exists (nobody can log in until then); a
    # subPath mount never updates, so a Secret made later needs a Pod restart.
    volume = {"name": "authorized-keys",
              "secret": {"secretName": secret, "defaultMode": 0o600, "optional": True}}  # fmt: skip
    return [mount], [volume]
