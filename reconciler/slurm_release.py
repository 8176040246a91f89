"""Which Slurm release: one value and its parser (pure; imports nothing of ours).

Its one home: the compiler's target release (compile/target_release.py), the values key
`slurmConfig.release` (config/release_key.py), the local stack (`slurmctld -V`) and the REST
client's answers all read releases with `parse_release`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# "24.11.5", "slurm 25.11.7", "Slurm-24.11.5", "slurm-25-11-7-1" (a SchedMD tag), "26.05":
# Slurm's YY.MM[.patch], its words separated by dots or dashes.
# A suffix after the patch (a tag's "-1", "-0rc1") is not part of the release.
_RELEASE = re.compile(
    r"(?:slurm[-_ ]?)?(\d{2})[.-](\d{2})(?:[.-](\d+))?(?:-[0-9a-z]+)*", re.IGNORECASE
)


class ReleaseError(ValueError):
    """Text that names no Slurm release."""


@dataclass(frozen=True, order=True)
class SlurmRelease:
    major: int
    minor: int
    patch: int = 0

    def __str__(self) -> str:
        """ "25.11.7"; "25.11" where no patch was given (or it is 0)."""
        return self.series + (f".{self.patch}" if self.patch else "")

    @property
    def series(self) -> str:
        """The series, "25.11", as Slurm's release notes name it."""
        return f"{self.major}.{self.minor:02d}"

    def at_least(self, major: int, minor: int) -> bool:
        return (self.major, self.minor) >= (major, minor)


def parse_release(text: str) -> SlurmRelease:
    """ "26.05.3", "slurm 25.11.7", "Slurm-24.11.5", "slurm-25-11-7-1", "25.11" -> SlurmRelease."""
    match = _RELEASE.fullmatch(str(text).strip())
    if match is None:
        raise ReleaseError(
            f"{text!r} is not a Slurm release; write it as Slurm does, e.g. 25.11.7 or 26.05"
        )
    major, minor, patch = match.groups()
    if not 1 <= int(minor) <= 12:
        raise ReleaseError(f"{text!r} is not a Slurm release: {minor} is not a month")
    return SlurmRelease(int(major), int(minor), int(patch or 0))


# The first YY.MM[.P] of a program's output: `slurmctld -V` prints "slurm 26.05.3", Debian's
# "slurm-wlm 22.05.8".
_RELEASE_IN = re.compile(r"(?<![\d.])(\d{2})\.(\d{2})(?:\.(\d+))?")


def release_in(output: str) -> SlurmRelease | None:
    """The release a Slurm program prints (`slurmctld -V`), or None where it names none."""
    found = _RELEASE_IN.search(output)
    return maybe_release(found.group(0)) if found else None


def maybe_release(text: str | None) -> SlurmRelease | None:
    """The release `text` names, or None (a server that did not say, "unknown")."""
    try:
        return parse_release(text) if text else None
    except ReleaseError:
        return None


# 25.11 RELEASE_NOTES: slurmctld serves its own OpenMetrics (MetricsType=metrics/openmetrics),
# unless PrivateData is set (slurm.schedmd.com/metrics.html). The render turns them on from
# here, and the daemon's metrics reader asks for them only from here: an older slurmctld
# logs "Insane message length" for each HTTP request on its port.
OPENMETRICS_SINCE = SlurmRelease(25, 11)

# gres.conf's AutoDetect=nvidia is the gpu/nvidia plugin of Slurm 24.11, which reads the
# driver's /proc and /dev entries without NVML; an older slurmd autodetects NVIDIA GPUs only
# through NVML (AutoDetect=nvml).
GRES_NVIDIA_SINCE = SlurmRelease(24, 11)
