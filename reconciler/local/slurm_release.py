"""Which Slurm release an install is, from what its binaries print (`slurmctld -V`).

The smallest parse the local stack needs; issue 33's contract gives the one home of a Slurm
release to reconciler/compile (i33-topology), where this folds in at merge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reconciler.errors import LocalStackError

# "slurm 26.05.3", "slurm-wlm 22.05.8", "Slurm-24.11.5", "26.05", "slurm 25.11.0-0rc1".
_RELEASE = re.compile(r"(?<![\d.])(\d{2})\.(\d{2})(?:\.(\d+))?")


@dataclass(frozen=True, order=True)
class SlurmRelease:
    major: int
    minor: int
    patch: int = 0

    @classmethod
    def parse(cls, text: str) -> SlurmRelease:
        """The first YY.MM[.P] in `text`; LocalStackError where there is none."""
        found = _RELEASE.search(text)
        if found is None:
            raise LocalStackError(
                f"no Slurm release in {text.strip()[:80]!r}",
                hint="expected what `slurmctld -V` prints, e.g. 'slurm 26.05.3'",
            )
        major, minor, patch = found.groups()
        return cls(int(major), int(minor), int(patch or 0))

    @property
    def series(self) -> str:
        """"26.05": the release as `--slurm` and the stack's record name it."""
        return f"{self.major:02d}.{self.minor:02d}"

    def __str__(self) -> str:
        return f"{self.series}.{self.patch}"
