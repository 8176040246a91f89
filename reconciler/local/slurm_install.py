"""Which Slurm the local stack runs: 24.11 built by setup.sh (the default), or Debian 12's 22.05.

Plain data: where each release's daemons and client commands are, how its slurmrestd must be
started, and the environment that makes its clients (scontrol, sbatch, ...) the ones on PATH.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import LocalStackError

DEFAULT_RELEASE = "24.11"
# setup.sh installs Slurm 24.11.5 here (readable by `nobody`, whom slurmrestd runs as).
SLURM_2411_PREFIX = Path(
    os.environ.get("SUNK_RECONCILER_SLURM_PREFIX", "/opt/sunk-reconciler/slurm/24.11.5")
)
# Chooses the release where no flag does (the test suite runs 22.05 with it).
RELEASE_ENV = "SUNK_RECONCILER_SLURM"


@dataclass(frozen=True)
class SlurmInstall:
    """One Slurm release on this machine.

    `daemons`: the real binaries behind the canonical names (Slurm takes its role from argv[0],
    so each runs through a symlink named slurmctld, slurmd, slurmstepd, slurmdbd).
    `bin_dir`/`lib_dir`: its client commands and libraries, put first on PATH and
    LD_LIBRARY_PATH; None where they are the system's own (Debian's /usr/bin).
    """

    release: str  # "24.11"
    daemons: Mapping[str, Path]
    slurmrestd: Path
    bin_dir: Path | None
    lib_dir: Path | None
    rest_probe_version: str  # an OpenAPI version its slurmrestd serves, for the readiness ping
    rest_plugins: tuple[str, str]  # slurmrestd -s: without accounting, with accounting
    rest_identity: tuple[str, ...]  # slurmrestd refuses root (and, on 24.11, SlurmUser)

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` with this release's commands and libraries first."""
        env = dict(base)
        if self.bin_dir is not None:
            env["PATH"] = f"{self.bin_dir}:{env.get('PATH', os.defpath)}"
        if self.lib_dir is not None:
            env["LD_LIBRARY_PATH"] = str(self.lib_dir)
        return env

    def command(self, name: str) -> str | None:
        """Where a client command (scontrol, sacctmgr, ...) of this release is, if installed."""
        path = self.env(os.environ)["PATH"]
        return shutil.which(name, path=path)


def _built(prefix: Path) -> SlurmInstall:
    return SlurmInstall(
        release="24.11",
        daemons={name: prefix / "sbin" / name
                 for name in ("slurmctld", "slurmd", "slurmstepd", "slurmdbd")},
        slurmrestd=prefix / "sbin" / "slurmrestd",
        bin_dir=prefix / "bin",
        lib_dir=prefix / "lib",
        rest_probe_version="v0.0.42",
        rest_plugins=("openapi/slurmctld", "openapi/slurmctld,openapi/slurmdbd"),
        rest_identity=("-u", "nobody", "-g", "nogroup"),
    )  # fmt: skip


DEBIAN_2205 = SlurmInstall(
    release="22.05",
    daemons={
        "slurmctld": Path("/usr/sbin/slurmctld-wlm"),
        "slurmd": Path("/usr/sbin/slurmd-wlm"),
        "slurmstepd": Path("/usr/sbin/slurmstepd-wlm"),
        "slurmdbd": Path("/usr/sbin/slurmdbd"),
    },
    slurmrestd=Path("/usr/sbin/slurmrestd"),
    bin_dir=None,
    lib_dir=None,
    rest_probe_version="v0.0.38",
    rest_plugins=("openapi/v0.0.38", "openapi/v0.0.38,openapi/dbv0.0.38"),
    rest_identity=("-u", "nobody"),
)

RELEASES = ("24.11", "22.05")


def slurm_install(release: str | None = None) -> SlurmInstall:
    """The install of `release`, else $SUNK_RECONCILER_SLURM, else DEFAULT_RELEASE."""
    chosen = release or os.environ.get(RELEASE_ENV) or DEFAULT_RELEASE
    if chosen == "24.11":
        return _built(SLURM_2411_PREFIX)
    if chosen == "22.05":
        return DEBIAN_2205
    raise LocalStackError(
        f"unknown Slurm release {chosen!r} for the local stack",
        hint=f"choose one of {', '.join(RELEASES)} (--slurm, or ${RELEASE_ENV})",
    )
