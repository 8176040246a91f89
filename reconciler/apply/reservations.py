"""Our Slurm reservations, in the two phases apply runs them: before nodes drain (deletions,
updates that name no joining node) and after nodes join (creations, updates onto joining
nodes). Only reservations that carry this release's prefix are ever touched."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import hostlist

from reconciler import hostlists
from reconciler.apply.target import ApplyError, Say, Target
from reconciler.plan.declared import nodes_joining
from reconciler.plan.model import (
    SLURM_RESERVATION,
    STEP_RECREATE,
    STEP_REGISTER,
    Action,
    Change,
    Plan,
)
from reconciler.wellknown import reservation_prefix


@dataclass(frozen=True)
class ReservationStep:
    change: Change
    options: Mapping[str, Any]  # what scontrol gets
    first_part: bool = False  # an update's node list without the joining nodes


def refuse_foreign_reservations(plan: Plan) -> None:
    """A plan (a saved one too) only ever touches reservations that carry our name prefix."""
    prefix = reservation_prefix(plan.release)
    foreign = [
        c.ref.name
        for c in plan.changes
        if c.ref.kind == SLURM_RESERVATION and not c.ref.name.startswith(prefix)
    ]
    if foreign:
        raise ApplyError(
            f"the plan changes Slurm reservations that are not ours: {', '.join(foreign)}; "
            "nothing was changed",
            hint=f"reservations of release {plan.release} are named {prefix}<name>; make the "
            "plan again",
        )


def reservation_phases(plan: Plan) -> tuple[list[ReservationStep], list[ReservationStep]]:
    """(before nodes drain, after nodes join). Deletions and updates that name no joining node
    go first, so a reservation never names a node as it is retired or leaves slurm.conf;
    creations and updates onto joining nodes last, once those nodes are registered. An update
    that does both first drops the leaving nodes (keeping those that stay), then takes on the
    joining ones."""
    # Nodes slurmctld does not know yet (spares declared by this plan) count as joining.
    joining = {c.ref.name for c in plan.changes if STEP_REGISTER in c.steps} | nodes_joining(plan)
    early: list[ReservationStep] = []
    late: list[ReservationStep] = []
    for change in (c for c in plan.changes if c.ref.kind == SLURM_RESERVATION):
        step = ReservationStep(change, change.desired or {})
        if change.action is Action.DELETE:
            early.append(step)
        elif change.action is Action.CREATE or STEP_RECREATE in change.steps:
            late.append(step)
        elif not joining & set(_reservation_nodes(change, change.after)):
            early.append(step)
        else:
            staying = [n for n in _reservation_nodes(change, change.after) if n not in joining]
            leaving = set(_reservation_nodes(change, change.before)) - set(staying)
            if staying and leaving:
                nodes = hostlist.collect_hostlist(staying)
                early.append(ReservationStep(change, {"Nodes": nodes}, first_part=True))
            late.append(step)
    return early, late


def _reservation_nodes(change: Change, shape: Any) -> list[str]:
    """A side's nodes, counted before they are expanded: a saved plan is a file a user can
    edit, and the live side is whatever Slurm holds."""
    text = (shape or {}).get("nodes") or ""
    try:
        return hostlists.expand_checked(text) if text else []
    except hostlists.HostlistRefused as error:
        raise ApplyError(
            f"reservation {change.ref.name}: the hostlist {error}; nothing was changed",
            hint="make the plan again from the repo",
        ) from None


def apply_reservations(steps: list[ReservationStep], target: Target, say: Say) -> None:
    for step in steps:
        name, action = step.change.ref.name, step.change.action
        if action is Action.DELETE:
            gone = target.scontrol.delete_reservation(name, missing_ok=True)
            say(f"deleted reservation {name}" if gone else f"reservation {name} was already gone")
        elif action is Action.CREATE:
            target.scontrol.create_reservation(name, step.options)
            say(f"created reservation {name}")
        elif STEP_RECREATE in step.change.steps:
            target.scontrol.delete_reservation(name, missing_ok=True)
            target.scontrol.create_reservation(name, step.options)
            say(f"recreated reservation {name} (deleted, then created)")
        elif step.first_part:
            target.scontrol.update_reservation(name, step.options)
            say(f"updated reservation {name}: nodes {step.options['Nodes']} until others join")
        else:
            target.scontrol.update_reservation(name, step.options)
            say(f"updated reservation {name}")
