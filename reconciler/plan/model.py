"""What a plan is: per object, create / update / delete, with the field-level changes (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from reconciler.plan.upgrade import UpgradeStage

KUBERNETES = "kubernetes"
SLURM = "slurm"

# Slurm object kinds as they appear in plans.
SLURM_CONFIG = "SlurmConfig"
SLURM_NODE = "Node"
SLURM_PARTITION = "Partition"
SLURM_RESERVATION = "Reservation"
SLURM_QOS = "Qos"
SLURM_ACCOUNT = "Account"
SLURM_USER = "User"


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True, order=True)
class ObjectRef:
    scope: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        if self.scope == KUBERNETES:
            return (
                f"{self.kind} {self.namespace}/{self.name}"
                if self.namespace
                else f"{self.kind} {self.name}"
            )
        return f"{self.kind} {self.name}"


@dataclass(frozen=True)
class FieldChange:
    path: str
    before: Any
    after: Any


@dataclass(frozen=True)
class Change:
    ref: ObjectRef
    action: Action
    before: Any
    after: Any
    fields: tuple[FieldChange, ...] = ()
    notes: tuple[str, ...] = ()
    # What apply sends (a Kubernetes object as we render it; `after` is the server's view of
    # it, defaults included), and the Slurm steps apply takes for this object.
    desired: Any = None
    steps: tuple[str, ...] = ()
    # What apply sends when it must never be shown (a Secret with its data from values): not
    # in any rendering of the plan, not compared.
    payload: Any = field(default=None, repr=False, compare=False)


# Slurm node steps, in the order apply runs them.
STEP_DRAIN = "drain"  # drain with our reason prefix, wait for the node's jobs to finish
STEP_RETIRE = "retire"  # DOWN, then FUTURE: hidden, declared, no jobs can land
STEP_RESUME = "resume"  # clear a drain that carries our prefix
STEP_REGISTER = "register"  # comes up when its slurmd Pod starts (nothing to do in Slurm)
# Reservation step: what Slurm cannot change in place (remove OVERLAP, move the start of one
# that has begun) is deleted and created again.
STEP_RECREATE = "recreate"


@dataclass(frozen=True)
class Summary:
    add: int
    change: int
    destroy: int
    unchanged: int
    drain: int
    reconfigure: int

    def line(self) -> str:
        text = f"Plan: {self.add} to add, {self.change} to change, {self.destroy} to destroy."
        return text + f" Slurm: {self.drain} to drain, {self.reconfigure} reconfigure."


@dataclass(frozen=True)
class Plan:
    release: str
    namespace: str
    profile: str
    changes: tuple[Change, ...]
    unchanged: int = 0
    revision: str | None = None
    offline: bool = False
    warnings: tuple[str, ...] = field(default=())
    # Deny findings of the policies: a plan that has any cannot be applied.
    denials: tuple[str, ...] = field(default=())
    # Hash of the live state this plan was made against: apply refuses a stale plan.
    fingerprint: str | None = None
    # NodeName lines added or removed: Slurm reads those only when slurmctld starts.
    controller_restart: bool = False
    # Made while Slurm did not answer and our control plane was down: only what brings it
    # up (plan/bootstrap.py); the rest is planned once Slurm answers.
    bootstrap: bool = False
    # A change of the Slurm release, in the stages Slurm requires (plan/upgrade.py).
    upgrade: tuple[UpgradeStage, ...] = field(default=())

    @property
    def has_changes(self) -> bool:
        return bool(self.changes)

    def summary(self) -> Summary:
        count = {a: sum(1 for c in self.changes if c.action is a) for a in Action}
        drains = sum(
            1
            for c in self.changes
            if c.ref.scope == SLURM and c.ref.kind == SLURM_NODE and c.action is Action.DELETE
        )
        reconfigure = int(any(c.ref.kind == SLURM_CONFIG for c in self.changes))
        return Summary(
            add=count[Action.CREATE],
            change=count[Action.UPDATE],
            destroy=count[Action.DELETE],
            unchanged=self.unchanged,
            drain=drains,
            reconfigure=reconfigure,
        )
