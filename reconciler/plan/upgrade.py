"""A change of the Slurm release, as the stages Slurm requires, or refused (pure).

Slurm's order (SchedMD's doc/html/upgrades.shtml): slurmdbd first (its first start converts the
database), then slurmctld, then every slurmd, then the clients (login nodes, slurmrestd). Each
stage is one component; the slurmd stage lists every node definition's workload, since slurmd
may roll in any order once slurmctld runs the new release, and its check (every node responds
at the new release) is per node anyway. A patch release (24.11.5 -> 24.11.6) is staged in the
same order: the guide gives it for every upgrade, and a stage whose component answers at once
costs nothing.

Refused, with one line naming the rule and its source: a downgrade; a jump past the window of
plan/upgrade_window.py; slurmdbd older than slurmctld; a slurmd or client newer than slurmctld
or beyond its window (in the repo, or between two stages).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from reconciler.errors import SlurmUpgradeRefusedError
from reconciler.plan.upgrade_window import (
    UPGRADE_GUIDE,
    UnknownRelease,
    accepted_from,
    major,
    path_between,
    within_window,
)
from reconciler.slurm_release import SlurmRelease, maybe_release

SLURMDBD = "slurmdbd"
SLURMCTLD = "slurmctld"
SLURMD = "slurmd"
LOGIN = "login"
SLURMRESTD = "slurmrestd"
CLIENTS = "login/slurmrestd"
# The stages, in Slurm's order, and the daemons each one moves.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (SLURMDBD, (SLURMDBD,)),
    (SLURMCTLD, (SLURMCTLD,)),
    (SLURMD, (SLURMD,)),
    (CLIENTS, (LOGIN, SLURMRESTD)),
)
_REFUSED = "Slurm upgrade refused"


@dataclass(frozen=True)
class Workload:
    """One workload that runs a Slurm daemon: the release it runs (None: not known, or not
    there yet) and the one it runs after the change (None: the repo does not say)."""

    daemon: str  # SLURMDBD, SLURMCTLD, SLURMD, LOGIN or SLURMRESTD
    ref: str  # "Deployment slurm/slurm-accounting"
    live: SlurmRelease | None
    desired: SlurmRelease | None
    # Whether the repo changes what it runs (its image): an upgrade starts only there, so a
    # stack whose images say nothing of what runs (the local stack) plans none by itself.
    changed: bool = True

    @property
    def moves(self) -> bool:
        return self.changed and self.live is not None and self.desired is not None and (
            _differs(self.live, self.desired))  # fmt: skip

    @property
    def end(self) -> SlurmRelease | None:
        """What it runs once every stage is done."""
        return self.desired if self.changed or self.live is None else self.live


@dataclass(frozen=True)
class UpgradeStage:
    number: int
    of: int
    component: str
    before: tuple[str, ...]  # the releases it runs now ("24.11.5")
    after: tuple[str, ...]
    objects: tuple[str, ...]
    check: str  # what must hold before the next stage

    def line(self) -> str:
        return (f"upgrade stage {self.number}/{self.of}: {self.component} "
                f"{', '.join(self.before)} -> {', '.join(self.after)}: "
                f"{', '.join(self.objects)} ({self.check})")  # fmt: skip


def plan_upgrade(workloads: Sequence[Workload]) -> tuple[UpgradeStage, ...]:
    """The stages that move `workloads` to their desired releases (none: no release changes),
    or SlurmUpgradeRefusedError."""
    for workload in _in_order(workloads):
        if workload.moves:
            _refuse_move(workload)
    _refuse_mix([(w, w.end) for w in workloads], "")
    stages = [(component, daemons) for component, daemons in STAGES
              if any(w.moves and w.daemon in daemons for w in workloads)]  # fmt: skip
    planned: list[UpgradeStage] = []
    state = list(workloads)
    for number, (component, daemons) in enumerate(stages, 1):
        moving = [w for w in _in_order(workloads) if w.moves and w.daemon in daemons]
        state = [replace(w, live=w.desired) if w in moving else w for w in state]
        _refuse_mix([(w, w.live) for w in state], f" after stage {number} ({component})")
        planned.append(UpgradeStage(
            number, len(stages), component,
            before=_releases(w.live for w in moving), after=_releases(w.desired for w in moving),
            objects=tuple(w.ref for w in moving),
            check=_check(component, _releases(w.desired for w in moving)),
        ))  # fmt: skip
    return tuple(planned)


def _in_order(workloads: Iterable[Workload]) -> list[Workload]:
    order = [d for _, daemons in STAGES for d in daemons]
    return sorted(workloads, key=lambda w: (order.index(w.daemon), w.ref))


def _differs(live: SlurmRelease, desired: SlurmRelease) -> bool:
    """A release written as a series ("25.11") agrees with every 25.11.x."""
    return live.series != desired.series or (desired.patch != 0 and desired != live)


def _refuse_move(workload: Workload) -> None:
    live, desired = workload.live, workload.desired
    assert live is not None and desired is not None
    what = f"{workload.daemon} ({workload.ref}) {live} -> {desired}"
    if desired < live:
        raise SlurmUpgradeRefusedError(
            f"{_REFUSED}: {what} is a downgrade: no Slurm daemon goes back to an older release "
            f"once it has started on a newer one ({UPGRADE_GUIDE}); set the release it runs, "
            f"{live}, again"
        )
    _known(desired, what)
    if not within_window(live, desired):
        through = path_between(live, desired)
        way = f"; upgrade through {', then '.join(through)} first" if through else ""
        raise SlurmUpgradeRefusedError(
            f"{_REFUSED}: {what} jumps past the upgrade window: {desired.series} upgrades only "
            f"from {_listed(accepted_from(desired))}; running jobs would be killed and their "
            f"accounting lost ({major(desired.series).source}){way}"
        )


def _refuse_mix(state: Sequence[tuple[Workload, SlurmRelease | None]], when: str) -> None:
    """slurmdbd at least slurmctld's release and reading it; every slurmd and client at most
    slurmctld's release and within its window."""
    controllers = {r for w, r in state if w.daemon == SLURMCTLD and r is not None}
    for ctld in sorted(controllers):
        for workload, release in state:
            if release is None or workload.daemon == SLURMCTLD:
                continue
            _refuse_pair(workload, release, ctld, when)


def _refuse_pair(workload: Workload, release: SlurmRelease, ctld: SlurmRelease, when: str) -> None:
    what = f"{workload.daemon} ({workload.ref}) {release}"
    if workload.daemon == SLURMDBD:
        if release.series != ctld.series and release < ctld:
            raise SlurmUpgradeRefusedError(
                f"{_REFUSED}: {what} would be older than slurmctld {ctld}{when}: slurmdbd must "
                f"run at least slurmctld's release ({UPGRADE_GUIDE}); move slurmdbd first"
            )
        older, newer = ctld, release
    else:
        if release.series != ctld.series and release > ctld:
            raise SlurmUpgradeRefusedError(
                f"{_REFUSED}: {what} would be newer than slurmctld {ctld}{when}: slurmctld "
                f"must run at least the release of every slurmd and client ({UPGRADE_GUIDE}); "
                "move slurmctld first"
            )
        older, newer = release, ctld
    if older.series == newer.series:
        return
    _known(newer, f"{what} beside slurmctld {ctld}")
    if not within_window(older, newer):
        raise SlurmUpgradeRefusedError(
            f"{_REFUSED}: the repo mixes {what} with slurmctld {ctld}{when}, beyond the window: "
            f"{newer.series} reads only {_listed(accepted_from(newer))} "
            f"({major(newer.series).source})"
        )


def _known(release: SlurmRelease, what: str) -> None:
    try:
        major(release.series)
    except UnknownRelease as error:
        raise SlurmUpgradeRefusedError(
            f"{_REFUSED}: {what}: {error}, so its upgrade window is unknown "
            f"({UPGRADE_GUIDE}); use a reconciler that knows it"
        ) from None


def _check(component: str, after: tuple[str, ...]) -> str:
    to = ", ".join(after)
    return {
        SLURMDBD: f"sacctmgr show configuration reports SLURMDBD_VERSION {to}; its first start "
                  "converts the database: nothing may time it out",
        SLURMCTLD: f"scontrol show config reports SLURM_VERSION {to}",
        SLURMD: f"each node, drained and restarted once no job holds it, responds at {to}",
        CLIENTS: f"slurmrestd answers at {to}; the upgrade is done",
    }[component]  # fmt: skip


def _releases(releases: Iterable[SlurmRelease | None]) -> tuple[str, ...]:
    return tuple(sorted({str(r) for r in releases if r is not None}))


def _listed(series: Sequence[str]) -> str:
    return ", ".join(series)


def clients_behind(
    clients: SlurmRelease | None,
    rendered: SlurmRelease | None,
    stages: Sequence[UpgradeStage],
) -> str | None:
    """Why the reconciler's own scontrol and sacctmgr (of release `clients`) will not read the
    slurm.conf it renders (for `rendered` now, for the stages' release once they pass): a
    client parses the whole file and refuses a key of a newer series (25.11's `MetricsType`).
    None where they can, or a release is unknown."""
    wanted = [r for r in (rendered, *(maybe_release(a) for s in stages for a in s.after)) if r]
    if clients is None or not wanted:
        return None
    newest = max(wanted)
    if (clients.major, clients.minor) >= (newest.major, newest.minor):
        return None
    when = "now" if rendered is not None and rendered == newest else "once the upgrade is done"
    return (
        f"warning: this reconciler's scontrol and sacctmgr are Slurm {clients}'s; slurm.conf "
        f"is rendered for Slurm {newest} {when}, which they cannot read (a client refuses "
        f"a newer release's keys), so reconfigure and node drains would fail: run the "
        f"reconciler from an image whose Slurm clients are {newest.series} or later"
    )
