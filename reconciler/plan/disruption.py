"""Which actions of a plan touch running work, and the Slurm jobs each touches (pure).

A reviewer must see these first: a node drained or removed (its jobs must end first), a node
redefined, a partition changed or removed (its running and queued jobs), slurmctld restarted
or reconfigured (every running job; they survive, but the whole cluster is touched).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.plan.live import LiveJob
from reconciler.plan.model import (
    SLURM,
    SLURM_CONFIG,
    SLURM_NODE,
    SLURM_PARTITION,
    Action,
    Change,
    Plan,
)

# States in which a job holds nodes (as apply's drain wait judges them).
ACTIVE_JOB_STATES = frozenset({"RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "STOPPED"})


@dataclass(frozen=True)
class Disruption:
    action: str  # what is done, for a reviewer: "drain and retire Slurm node slurm-cpu-3"
    jobs: tuple[LiveJob, ...]  # the jobs it touches, by id
    cluster_wide: bool = False  # touches every running job (a restart, a reconfigure)


def disruptions(plan: Plan, jobs: Sequence[LiveJob] | None) -> list[Disruption]:
    """Every action of `plan` that touches running work; `jobs` None when Slurm's jobs were
    not read (offline): the actions are listed all the same, with no jobs."""
    known = tuple(sorted(jobs or (), key=lambda j: j.job_id))
    active = tuple(j for j in known if j.state in ACTIVE_JOB_STATES)
    found: list[Disruption] = []
    for change in plan.changes:
        if change.ref.scope != SLURM:
            continue
        if change.ref.kind == SLURM_NODE:
            found += _node(change, active)
        elif change.ref.kind == SLURM_PARTITION and change.action is not Action.CREATE:
            found.append(_partition(change, known))
    # A config file created is a new cluster: no slurmctld runs under it yet.
    config = any(c.ref.kind == SLURM_CONFIG and c.action is not Action.CREATE
                 for c in plan.changes)  # fmt: skip
    if plan.controller_restart:
        found.append(Disruption("restart slurmctld (NodeName lines change; jobs survive a "
                                "restart, none can start meanwhile)", active, True))  # fmt: skip
    elif config and not plan.bootstrap:
        found.append(Disruption("reconfigure slurmctld (scontrol reconfigure: every running "
                                "job is under the new slurm.conf)", active, True))  # fmt: skip
    return found


def _node(change: Change, active: tuple[LiveJob, ...]) -> list[Disruption]:
    name = change.ref.name
    on_node = tuple(j for j in active if name in j.nodes)
    if change.action is Action.DELETE:
        return [Disruption(f"drain and retire Slurm node {name} (its jobs must end first)",
                           on_node)]  # fmt: skip
    if change.action is Action.UPDATE and change.fields:
        fields = ", ".join(f.path for f in change.fields)
        return [Disruption(f"redefine Slurm node {name} ({fields})", on_node)]
    return []


def _partition(change: Change, known: tuple[LiveJob, ...]) -> Disruption:
    name = change.ref.name
    in_partition = tuple(j for j in known if name in j.partition.split(","))
    if change.action is Action.DELETE:
        return Disruption(f"remove partition {name} (its queued jobs cannot run)",
                          in_partition)  # fmt: skip
    fields = ", ".join(f.path for f in change.fields)
    return Disruption(f"change partition {name} ({fields})", in_partition)


def verdict(plan: Plan, found: Sequence[Disruption]) -> str:
    """The PR label: no-changes, changes, or disruptive."""
    if found:
        return "disruptive"
    return "changes" if plan.has_changes else "no-changes"
