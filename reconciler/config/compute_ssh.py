"""`compute.ssh` (SUNK's Slurm chart: "SSH to compute nodes as well as login node"): who
sshd beside slurmd admits, checked in the file that writes it (compile/sshd.py renders it).

    compute:
      ssh:
        enabled: true
        pamSlurmAdopt: true     # the compute image ships Slurm's pam_slurm_adopt
        allowGroups: [hpc-admins]
        allowUsers: [alice]

Each name becomes a word of sshd's `AllowGroups`/`AllowUsers` on the Pod's command line, so a
name is a name: no space (sshd splits the list there), no pattern character (`*`, `?`, `!`:
sshd would read a pattern), no `@` in a user (sshd reads `user@host`), nothing a shell reads.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler.config.value_types import Key, Table
from reconciler.config.yamlfile import KeyPath, YamlFile, format_path, lookup
from reconciler.errors import ConfigTypeError

SSH_PATH: KeyPath = ("compute", "ssh")
COMPUTE_SSH_VALUES: Table = {
    "compute.ssh": Key("mapping", "sshd in slurmd containers"),
    "compute.ssh.enabled": Key("boolean", "sshd in every slurmd container", False),
    "compute.ssh.pamSlurmAdopt": Key(
        "boolean", "pam_slurm_adopt first in sshd's account stack", False
    ),
    "compute.ssh.allowGroups": Key("list of strings", "sshd's AllowGroups"),
    "compute.ssh.allowUsers": Key("list of strings", "sshd's AllowUsers"),
}
# OpenSSH before 7.x held at most 256 AllowUsers and 256 AllowGroups (MAX_ALLOW_USERS, ...);
# a longer list is a group's job. A name past 256 characters is no account's name.
MAX_NAMES = 256
MAX_NAME_LENGTH = 256
_NAMES: dict[str, re.Pattern[str]] = {
    "allowUsers": re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*"),
    "allowGroups": re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@-]*"),
}


def check_compute_ssh(doc: YamlFile) -> None:
    """Each name of allowUsers and allowGroups (types are checked from the table first)."""
    for key, pattern in _NAMES.items():
        path: KeyPath = (*SSH_PATH, key)
        names, found = lookup(doc.data, list(path))
        if not found or not isinstance(names, list):
            continue
        if len(names) > MAX_NAMES:
            raise ConfigTypeError(
                f"{format_path(path)} names {len(names)}, past the {MAX_NAMES} sshd takes",
                where=doc.location(path),
                hint="admit a group (allowGroups) rather than each user",
            )
        for index, name in enumerate(names):
            _check_name(doc, (*path, index), key, name, pattern)


def _check_name(
    doc: YamlFile, path: KeyPath, key: str, name: Any, pattern: re.Pattern[str]
) -> None:
    if isinstance(name, str) and len(name) <= MAX_NAME_LENGTH and pattern.fullmatch(name):
        return
    what = "user" if key == "allowUsers" else "group"
    allowed = "letters, digits, '_', '.', '-'" + (", '@'" if what == "group" else "")
    raise ConfigTypeError(
        f"{format_path(path)}: {name!r} is not a {what} name sshd can be given",
        where=doc.location(path),
        hint=f"one name per list item: {allowed}, at most {MAX_NAME_LENGTH} characters; "
        "no spaces, patterns (* ? !) or user@host",
    )
