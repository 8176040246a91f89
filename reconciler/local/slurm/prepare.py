"""Getting a local Slurm cluster ready to start: its binaries are installed, and its
directories, keys, argv[0] symlinks and config files are on disk.

Nothing here starts a process; the daemons are in slurm.py.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
from pathlib import Path

from reconciler.errors import LocalStackError
from reconciler.local import SETUP_COMMAND
from reconciler.local.slurm.accounting import MARIADB_INSTALL_DB, MARIADBD
from reconciler.local.slurm.install import (
    REST_USER,
    SLURM_2411_PREFIX,
    SlurmInstall,
    slurm_install,
)
from reconciler.local.slurm.site import SlurmPaths

MUNGED = Path("/usr/sbin/munged")
CLIENT_COMMANDS = ("scontrol", "sinfo", "squeue", "scancel", "sbatch")
ACCOUNTING_COMMANDS = ("sacctmgr",)


def missing_binaries(accounting: bool, install: SlurmInstall | None = None) -> list[str]:
    install = install or slurm_install()
    needed: list[str] = [str(MUNGED), str(install.slurmrestd)]
    needed += [
        str(path) for name, path in install.daemons.items() if accounting or name != "slurmdbd"
    ]
    if accounting:
        needed.append(str(MARIADBD))
    missing = [p for p in needed if not os.access(p, os.X_OK)]
    missing += [c for c in CLIENT_COMMANDS if install.command(c) is None]
    if accounting:
        missing += [c for c in ACCOUNTING_COMMANDS if install.command(c) is None]
        missing += [c for c in (MARIADB_INSTALL_DB, "mariadb") if shutil.which(c) is None]
    return missing


def check_binaries(accounting: bool, install: SlurmInstall | None = None) -> None:
    install = install or slurm_install()
    missing = missing_binaries(accounting, install)
    if missing:
        raise LocalStackError(
            f"missing Slurm {install.release} binaries: " + ", ".join(missing),
            hint=f"run `{SETUP_COMMAND}`" if install.prefix in (None, SLURM_2411_PREFIX)
            else f"build Slurm {install.version} into {install.prefix} with the configure "
            "flags of tools/setup.sh (--enable-slurmrestd, --with-jwt, ...); the "
            f"other binaries come from `{SETUP_COMMAND}`",
        )  # fmt: skip


def check_rest_user() -> None:
    """As root, slurmrestd runs as REST_USER (slurm_install.py says why): it must exist, with
    a group of its own name."""
    if os.getuid() != 0:
        return
    try:
        pwd.getpwnam(REST_USER)
        grp.getgrnam(REST_USER)
    except KeyError:
        raise LocalStackError(
            f"no user or group {REST_USER!r}, whom slurmrestd runs as (it refuses root, "
            "SlurmUser and nobody)",
            hint=f"run `{SETUP_COMMAND}`; it adds the system user and group {REST_USER}",
        ) from None


def _write_secret(path: Path, size: int) -> None:
    if path.exists():
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(os.urandom(size))


def _write_text(path: Path, text: str, mode: int = 0o644) -> None:
    path.write_text(text)
    path.chmod(mode)


def _ensure_reachable_by_rest_user(root: Path) -> None:
    """As root, slurmrestd runs as REST_USER and must read etc/slurm.conf."""
    if os.getuid() != 0:
        return
    for directory in [root / "etc", root, *root.parents]:
        if not directory.stat().st_mode & 0o001:
            raise LocalStackError(
                f"{directory} is not searchable by others, so slurmrestd (user {REST_USER}) "
                f"cannot read {root}/etc/slurm.conf",
                hint="choose a runtime directory under /tmp, or `chmod o+x` that directory",
            )


def prepare_files(
    paths: SlurmPaths, install: SlurmInstall, *, fresh: bool = True, keys: bool = True
) -> None:
    """Directories, keys and argv[0] symlinks; wipes job state when `fresh`. Without
    `keys`, the JWT and munge keys come from elsewhere (the Secrets our Pods mount)."""
    p = paths
    if fresh:
        shutil.rmtree(p.state, ignore_errors=True)
        shutil.rmtree(p.spool, ignore_errors=True)
    for directory in (p.etc, p.state, p.spool, p.log, p.run, p.dev, p.bin, p.munge):
        directory.mkdir(parents=True, exist_ok=True)
    p.root.chmod(0o755)
    p.munge.chmod(0o755)  # munged: clients must be able to reach the socket
    _ensure_reachable_by_rest_user(p.root)
    check_rest_user()
    if keys:
        _write_secret(p.jwt_key, 32)
        _write_secret(p.munge_key, 1024)
    elif fresh:  # a previous cluster's: this one's come from its own Secrets
        p.jwt_key.unlink(missing_ok=True)
        p.munge_key.unlink(missing_ok=True)
    link_daemons(p.bin, install)


def link_daemons(directory: Path, install: SlurmInstall) -> Path:
    """`directory` holding the install's daemons by their canonical names (Slurm takes its
    role from argv[0]); returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, target in install.daemons.items():
        link = directory / name
        if not link.is_symlink() or os.readlink(link) != str(target):
            link.unlink(missing_ok=True)
            link.symlink_to(target)
    return directory


def write_config_files(paths: SlurmPaths, slurm_conf: str, gres_conf: str) -> None:
    paths.etc.mkdir(parents=True, exist_ok=True)
    _write_text(paths.slurm_conf, slurm_conf)
    _write_text(paths.gres_conf, gres_conf)
