"""The login Pod's sshd on the local stack: its host key and its sshd_config on loopback."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from reconciler.errors import LocalStackError

SSH_KEYGEN = "ssh-keygen"


def host_key(path: Path) -> None:
    """The login Pod's own host key, made once (a real image makes it at first start)."""
    if path.exists():
        return
    result = subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                            capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    if result.returncode != 0:
        raise LocalStackError(f"ssh-keygen failed for {path}: {result.stderr.strip()}")


def sshd_config(
    directory: Path,
    port: int,
    authorized_keys: Path | None,
    env: Mapping[str, str],
    include: str | None = None,
) -> str:
    """A login node's sshd on loopback: keys only, and the stack's Slurm in every session;
    `include`: the Pod's own sshd_config.d snippet (the directory's AuthorizedKeysCommand),
    read where the Pod mounts it."""
    session_env = {k: env[k] for k in ("SLURM_CONF", "PATH", "LD_LIBRARY_PATH") if k in env}
    lines = [
        f"Port {port}",
        "ListenAddress 127.0.0.1",
        f"HostKey {directory / 'ssh_host_ed25519_key'}",
        f"PidFile {directory / 'sshd.pid'}",
        f"AuthorizedKeysFile {authorized_keys or 'none'}",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        # The key file lives under the runtime dir in /tmp (mode 1777), which StrictModes
        # refuses; the file itself is the Secret's, mode 0600.
        "StrictModes no",
        "PrintMotd no",
        "SetEnv " + " ".join(f"{k}={v}" for k, v in session_env.items()),
    ]
    if include:
        lines.insert(0, f"Include {include}")
    return "\n".join(lines) + "\n"
