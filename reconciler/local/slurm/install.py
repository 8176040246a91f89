"""Which Slurm the local stack runs: 24.11 built by setup.sh (the default), Debian 12's 22.05,
or any install given by its prefix (`--slurm-prefix`, $SUNK_RECONCILER_SLURM_PREFIX), whose
release its own `slurmctld -V` says.

Plain data: where each install's daemons and client commands are, how its slurmrestd must be
started, and the environment that makes its clients (scontrol, sbatch, ...) the ones on PATH.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.errors import LocalStackError
from reconciler.local.slurm.tags import parse_tags, tag_mismatch
from reconciler.slurm_release import SlurmRelease, parse_release, release_in

DEFAULT_RELEASE = "24.11"
# setup.sh installs Slurm 24.11.5 here (readable by others: slurmrestd runs as REST_USER).
SLURM_2411_PREFIX = Path("/opt/sunk-reconciler/slurm/24.11.5")
# Chooses the release where no flag does (the test suite runs 22.05 with it).
RELEASE_ENV = "SUNK_RECONCILER_SLURM"
# Chooses an install by prefix where no flag does (the suite on a hand-built Slurm).
PREFIX_ENV = "SUNK_RECONCILER_SLURM_PREFIX"
RELEASES = ("24.11", "22.05")
# slurmrestd refuses root, SlurmUser (the stack's user) and, from 25.11 on, the name `nobody`:
# as root the stack runs it as this system user, with its own group, which setup.sh adds.
REST_USER = "sunk-slurmrestd"

# The OpenAPI version each release a prefix may hold surely serves: the readiness ping's.
# Older releases name their openapi plugins by version (22.05's are Debian's, --slurm 22.05).
_PROBE_VERSIONS = {
    (23, 11): "v0.0.40",
    (24, 5): "v0.0.41",
    (24, 11): "v0.0.42",
    (25, 5): "v0.0.42",
    (25, 11): "v0.0.42",
    (26, 5): "v0.0.42",
}
_DAEMONS = ("slurmctld", "slurmd", "slurmstepd", "slurmdbd")


@dataclass(frozen=True)
class SlurmInstall:
    """One Slurm install on this machine.

    `daemons`: the real binaries behind the canonical names (Slurm takes its role from argv[0],
    so each runs through a symlink named slurmctld, slurmd, slurmstepd, slurmdbd).
    `bin_dir`/`lib_dir`: its client commands and libraries, put first on PATH and
    LD_LIBRARY_PATH; None where they are the system's own (Debian's /usr/bin).
    `prefix`: where it is installed (None for Debian's packages).
    """

    release: str  # "24.11"
    daemons: Mapping[str, Path]
    slurmrestd: Path
    bin_dir: Path | None
    lib_dir: Path | None
    rest_probe_version: str  # an OpenAPI version its slurmrestd serves, for the readiness ping
    rest_plugins: tuple[str, str]  # slurmrestd -s: without accounting, with accounting
    rest_identity: tuple[str, ...]  # `-u USER -g GROUP` when run as root
    version: str = ""  # "26.05.3", where known
    prefix: Path | None = None

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` with this release's commands and libraries first, and another Slurm
        install's (a shell holding another stack's exports) left out: a client of another
        release speaks a protocol this slurmctld refuses."""
        env = dict(base)
        path = _without_other_slurm(env.get("PATH", os.defpath), self.prefix)
        env["PATH"] = ":".join(p for p in (str(self.bin_dir or ""), path) if p)
        libraries = _without_other_slurm(env.get("LD_LIBRARY_PATH", ""), self.prefix)
        if self.lib_dir is not None:
            env["LD_LIBRARY_PATH"] = str(self.lib_dir)
        elif libraries:
            env["LD_LIBRARY_PATH"] = libraries
        else:
            env.pop("LD_LIBRARY_PATH", None)
        return env

    def command(self, name: str) -> str | None:
        """Where a client command (scontrol, sacctmgr, ...) of this release is, if installed."""
        path = self.env(os.environ)["PATH"]
        return shutil.which(name, path=path)

    def to_record(self) -> dict[str, str]:
        """What the stack's state.json keeps to find this install again (`recorded_install`)."""
        record = {"release": self.release, "version": self.version}
        if self.prefix is not None and self.prefix != SLURM_2411_PREFIX:
            record["prefix"] = str(self.prefix)
        return record


# Directories of the system, kept on PATH even where a Slurm is installed beside them.
_SYSTEM_DIRS = frozenset({"/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin",
                          "/usr/local/sbin", "/usr/lib", "/usr/local/lib"})  # fmt: skip


def _without_other_slurm(entries: str, mine: Path | None) -> str:
    """A PATH or LD_LIBRARY_PATH without the directories of a Slurm installed with a prefix
    other than `mine` (its bin or lib beside a sbin/slurmctld)."""
    kept = []
    for entry in (e for e in entries.split(":") if e):
        prefix = Path(entry).parent
        other = entry not in _SYSTEM_DIRS and prefix != mine and (
            prefix / "sbin" / "slurmctld").exists()  # fmt: skip
        if not other:
            kept.append(entry)
    return ":".join(kept)


def for_prefix(prefix: Path, release: SlurmRelease) -> SlurmInstall:
    """The install of `release` built with `--prefix=prefix` (setup.sh's configure flags)."""
    probe = _PROBE_VERSIONS.get((release.major, release.minor))
    if probe is None:
        known = ", ".join(f"{m:02d}.{n:02d}" for m, n in _PROBE_VERSIONS)
        raise LocalStackError(
            f"Slurm {release} in {prefix}: the local stack runs {known} from a prefix",
            hint="build one of those; Debian's 22.05 is `--slurm 22.05`",
        )
    return SlurmInstall(
        release=release.series,
        daemons={name: prefix / "sbin" / name for name in _DAEMONS},
        slurmrestd=prefix / "sbin" / "slurmrestd",
        bin_dir=prefix / "bin",
        lib_dir=prefix / "lib",
        rest_probe_version=probe,
        rest_plugins=("openapi/slurmctld", "openapi/slurmctld,openapi/slurmdbd"),
        rest_identity=("-u", REST_USER, "-g", REST_USER),
        version=str(release),
        prefix=prefix,
    )


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
    rest_identity=("-u", REST_USER, "-g", REST_USER),
    version="22.05",
)


def read_release(prefix: Path) -> SlurmRelease:
    """The release of the Slurm installed at `prefix`, as its slurmctld says (`-V`)."""
    slurmctld = prefix / "sbin" / "slurmctld"
    hint = (
        "give the --prefix Slurm was configured with (it holds sbin/slurmctld); build "
        "SchedMD's release tag with the configure flags of tools/setup.sh"
    )
    if not os.access(slurmctld, os.X_OK):
        raise LocalStackError(f"{prefix} holds no Slurm: no {slurmctld}", hint=hint)
    result = subprocess.run(
        [str(slurmctld), "-V"], env={**os.environ, "LD_LIBRARY_PATH": str(prefix / "lib")},
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise LocalStackError(
            f"`{slurmctld} -V` failed (exit {result.returncode}): {result.stderr.strip()[-300:]}",
            hint=hint,
        )
    release = release_in(result.stdout)
    if release is None:
        raise LocalStackError(f"no Slurm release in what `{slurmctld} -V` printed: "
                              f"{result.stdout.strip()[:80]!r}", hint=hint)  # fmt: skip
    return release


@functools.cache
def install_at(prefix: Path) -> SlurmInstall:
    """The install at `prefix`, its release read once per process."""
    return for_prefix(prefix, read_release(prefix))


def slurm_install(release: str | None = None, prefix: Path | None = None) -> SlurmInstall:
    """The install at `prefix`, else of `release`; where neither is given, the install at
    $SUNK_RECONCILER_SLURM_PREFIX, else of $SUNK_RECONCILER_SLURM, else DEFAULT_RELEASE's."""
    if prefix is not None:
        return install_at(Path(prefix).absolute())
    if release is not None:
        return _of_release(release)
    env_prefix, env_release = os.environ.get(PREFIX_ENV), os.environ.get(RELEASE_ENV)
    if env_prefix:
        install = install_at(Path(env_prefix).absolute())
        if env_release and env_release != install.release:
            raise LocalStackError(
                f"${RELEASE_ENV}={env_release} but ${PREFIX_ENV}={env_prefix} holds Slurm "
                f"{install.version}",
                hint=f"unset one of them: ${PREFIX_ENV} alone runs the install at that prefix",
            )
        return install
    return _of_release(env_release or DEFAULT_RELEASE)


def _of_release(release: str) -> SlurmInstall:
    if release == "24.11":
        return for_prefix(SLURM_2411_PREFIX, SlurmRelease(24, 11, 5))
    if release == "22.05":
        return DEBIAN_2205
    raise LocalStackError(
        f"unknown Slurm release {release!r} for the local stack",
        hint=f"choose one of {', '.join(RELEASES)} (--slurm, or ${RELEASE_ENV}), or give an "
        f"install's prefix (--slurm-prefix, or ${PREFIX_ENV})",
    )


def installs_by_tag(text: str) -> dict[str, SlurmInstall]:
    """The installs $SUNK_RECONCILER_SLURM_TAGS maps image tags to (slurm_tags.py), each
    release read from its own slurmctld; a tag naming another release than its install's is
    refused."""
    installs = {}
    for tag, prefix in parse_tags(text).items():
        install = install_at(prefix)
        wrong = tag_mismatch(tag, prefix, install.version)
        if wrong:
            raise LocalStackError(wrong, hint="map each tag to the prefix of the release it "
                                  "names (`PREFIX/sbin/slurmctld -V` says which)")  # fmt: skip
        installs[tag] = install
    return installs


def recorded_install(section: Mapping[str, Any]) -> SlurmInstall:
    """The install a stack's record names (`SlurmInstall.to_record`), without running it: a
    stack recorded before releases were chosen ran Debian's 22.05."""
    prefix = section.get("prefix")
    if prefix:
        return for_prefix(Path(prefix), parse_release(str(section["version"])))
    return _of_release(str(section.get("release", "22.05")))
