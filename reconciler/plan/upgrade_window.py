"""Which Slurm release may follow which: the upgrade window, as data (pure).

A Slurm daemon reads the state files and speaks the protocol of a few major releases before its
own; outside that window running jobs are killed and their accounting lost, and no daemon goes
back to an older release once it has started on a newer one. The table below is the one home of
that rule: the stage planner (plan/upgrade.py) and everything after it read it from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.slurm_release import SlurmRelease, parse_release

UPGRADE_GUIDE = "SchedMD's doc/html/upgrades.shtml"
# Slurm 24.11 widened the window from two previous major releases to three
# (SLURM_MIN_PROTOCOL_VERSION in src/common/slurm_protocol_common.h).
_TWO = f"{UPGRADE_GUIDE}: the two previous major releases, before 24.11"
_THREE = f"{UPGRADE_GUIDE}: the three previous major releases, since 24.11"


@dataclass(frozen=True)
class MajorRelease:
    """One major release of Slurm, how many major releases before it it upgrades from, and
    the document that says so."""

    series: str  # "26.05"
    accepts: int
    source: str


# Every major release in order: Slurm moved from one a year (YY.02 / YY.08 / YY.11) to two
# (YY.05 and YY.11) after 23.11.
RELEASES: tuple[MajorRelease, ...] = (
    MajorRelease("20.02", 2, _TWO),
    MajorRelease("20.11", 2, _TWO),
    MajorRelease("21.08", 2, _TWO),
    MajorRelease("22.05", 2, _TWO),
    MajorRelease("23.02", 2, _TWO),
    MajorRelease("23.11", 2, _TWO),
    MajorRelease("24.05", 2, _TWO),
    MajorRelease("24.11", 3, _THREE),
    MajorRelease("25.05", 3, _THREE),
    MajorRelease("25.11", 3, f"{_THREE}; RELEASE_NOTES of 25.11 (from 25.05, 24.11, 24.05)"),
    MajorRelease("26.05", 3, f"{_THREE}; RELEASE_NOTES of 26.05 (from 25.11, 25.05, 24.11)"),
    MajorRelease("26.11", 3, _THREE),
)
_INDEX = {row.series: number for number, row in enumerate(RELEASES)}


class UnknownRelease(ValueError):
    """A major release the table does not hold."""


def major(series: str) -> MajorRelease:
    """The table's row of a series ("26.05")."""
    if series not in _INDEX:
        known = f"{RELEASES[0].series} to {RELEASES[-1].series}"
        raise UnknownRelease(f"Slurm {series} is not a major release this build knows ({known})")
    return RELEASES[_INDEX[series]]


def accepted_from(to: SlurmRelease) -> tuple[str, ...]:
    """The major releases `to` upgrades from, newest first (its own series aside)."""
    row = major(to.series)
    at = _INDEX[row.series]
    return tuple(r.series for r in reversed(RELEASES[max(0, at - row.accepts) : at]))


def within_window(older: SlurmRelease, newer: SlurmRelease) -> bool:
    """Whether a `newer` daemon reads `older`'s state and protocol: the same series, or one of
    the major releases `newer` upgrades from."""
    return older.series == newer.series or older.series in accepted_from(newer)


def path_between(older: SlurmRelease, newer: SlurmRelease) -> tuple[str, ...]:
    """The fewest major releases to go through from `older` to `newer` (each the newest the
    one before reaches), not counting either end: what a refused jump should do instead."""
    steps: list[str] = []
    at = major(older.series).series
    while not within_window(parse_release(at), newer):
        reachable = [r.series for r in RELEASES[_INDEX[at] + 1 :]
                     if at in accepted_from(parse_release(r.series))]  # fmt: skip
        if not reachable or reachable[-1] == at:
            return ()
        at = reachable[-1]
        steps.append(at)
    return tuple(steps)
