"""Rolling slurmd onto a new release in an upgrade's slurmd stage, node by node (pure).

slurmd's StatefulSets update `OnDelete`: a new template restarts no slurmd under running jobs,
and a Pod deleted under a job takes the job with it (the job's processes live in the Pod). So
each Pod still on the old template is drained (reason `reconciler: Slurm upgrade to <release>`),
deleted once no job holds its node (its StatefulSet makes it anew, on the new release), and its
node resumed once that slurmd registered at the new release. A job running across the stage
finishes on the old slurmd, which the new slurmctld still speaks to (SchedMD's
doc/html/upgrades.shtml: slurmd may roll once slurmctld runs the new release).

At most a quarter of the stage's nodes (at least one) are out at a time, as a Kubernetes
rolling update's default `maxUnavailable`. A node someone else drained is restarted once idle
and left drained: the drain is theirs to clear.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler import wellknown as wk
from reconciler.plan.upgrade_run import at_release
from reconciler.slurm_release import maybe_release


def upgrade_drain_reason(releases: Sequence[str]) -> str:
    return f"{wk.DRAIN_REASON_PREFIX} Slurm upgrade to {', '.join(releases)}"


@dataclass(frozen=True)
class RollNode:
    """One slurmd Pod of the stage and its Slurm node, as seen now."""

    name: str  # the Pod's, and its Slurm node's
    exists: bool  # its Pod exists (False: deleted, being made anew)
    current: bool  # the Pod runs the StatefulSet's new template
    drain_reason: str | None  # the node's reason where its DRAIN flag is set; None: not drained
    busy: bool  # a job holds the node
    version: str | None  # the release its slurmd registered with (None: not responding)


@dataclass(frozen=True)
class Roll:
    """What to do now: drain these nodes, delete these Pods, resume these nodes; and the
    nodes drained for the upgrade that jobs still hold (the roll waits for them, however long
    they run: that is the wait, not a failure)."""

    drain: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    resume: tuple[str, ...] = ()
    held: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.drain or self.delete or self.resume)


def most_out(count: int) -> int:
    """How many of `count` nodes may be out (drained for the upgrade) at once."""
    return max(1, -(-count // 4))


def roll(nodes: Sequence[RollNode], releases: Sequence[str]) -> Roll:
    """The next moves of the slurmd stage towards `releases` (the stage's `after`) for
    `nodes`, one per replica of the stage's StatefulSets (a Pod being made anew still counts
    as out through its drain)."""
    ours = upgrade_drain_reason(releases)
    wanted = [r for r in map(maybe_release, releases) if r is not None]
    out = sum(1 for n in nodes if n.drain_reason == ours)
    drain: list[str] = []
    delete: list[str] = []
    resume: list[str] = []
    held: list[str] = []
    # Idle nodes first: a node a job holds must not keep the idle ones waiting.
    for node in sorted(nodes, key=lambda n: (n.busy, n.name)):
        if not node.exists:
            continue
        if node.current:
            if node.drain_reason == ours and at_release(maybe_release(node.version), wanted):
                resume.append(node.name)
        elif node.drain_reason is not None:
            if not node.busy:
                delete.append(node.name)
            elif node.drain_reason == ours:
                held.append(node.name)
        elif out < most_out(len(nodes)):
            drain.append(node.name)
            out += 1
    return Roll(*(tuple(sorted(names)) for names in (drain, delete, resume, held)))
