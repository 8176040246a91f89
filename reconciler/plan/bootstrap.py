"""The plan when Slurm does not answer because its control plane, which we render, is not
running: a cluster being built from git, or a controller or slurmrestd Deployment that went
away. Pure: it keeps, of a full plan, what brings the control plane up, and says what waits.

Kept: every object that is missing (Secrets first), updates of the control plane's own
objects, and ConfigMap updates while slurmctld is not running (it reads them when it starts).
Deferred to the next plan, made once Slurm answers: everything that needs Slurm (node drains,
node and partition states, reservations, accounting), deletions, changes of compute
StatefulSets (a shrink must drain first), and ConfigMap updates under a running slurmctld (it
would not be told to reread them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from reconciler import wellknown as wk
from reconciler.plan.live import LiveState
from reconciler.plan.model import KUBERNETES, Action, Change, ObjectRef, Plan

# Components (app.kubernetes.io/component) whose objects make up the control plane.
CONTROL_PLANE = frozenset({"controller", "rest", "accounting", "mysql", "login"})
WORKLOADS = ("Deployment", "StatefulSet")


def control_plane_down(
    desired: Mapping[ObjectRef, Mapping[str, Any]], live: LiveState
) -> list[str]:
    """The control-plane workloads we render that are missing or have no ready replica:
    why Slurm may not answer (empty: they all run, so a silent Slurm is an outage)."""
    down = []
    for ref, obj in desired.items():
        if ref.kind in WORKLOADS and _component(obj) in CONTROL_PLANE and not _ready(live, ref):
            down.append(f"{ref.kind} {ref.name}")
    return sorted(down)


def bootstrap_plan(
    plan: Plan, desired: Mapping[ObjectRef, Mapping[str, Any]], live: LiveState, why: str
) -> Plan:
    """`plan` (made with no Slurm state) cut down to what brings the control plane up."""
    controller_runs = any(
        ref.kind == "Deployment" and _component(obj) == "controller" and _ready(live, ref)
        for ref, obj in desired.items()
    )
    kept, deferred = [], 0
    for change in plan.changes:
        if _brings_up(change, desired, controller_runs):
            kept.append(change)
        else:
            deferred += 1
    note = (
        f"Slurm does not answer: {why}. This plan brings the control plane up; "
        f"{deferred} change(s) that need Slurm, or could harm a running one, wait for the "
        "next plan, once Slurm answers"
    )
    return replace(plan, changes=tuple(kept), warnings=(*plan.warnings, note),
                   controller_restart=False, bootstrap=True)  # fmt: skip


def _brings_up(change: Change, desired: Mapping[ObjectRef, Any], controller_runs: bool) -> bool:
    if change.ref.scope != KUBERNETES or change.action is Action.DELETE:
        return False
    if change.action is Action.CREATE:
        return True
    if change.ref.kind == "ConfigMap":
        return not controller_runs
    return _component(desired.get(change.ref) or {}) in CONTROL_PLANE


def _component(obj: Mapping[str, Any]) -> str:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return str(labels.get(wk.LABEL_COMPONENT, ""))


def _ready(live: LiveState, ref: ObjectRef) -> bool:
    obj = live.kube_objects.get(ref)
    return obj is not None and int((obj.get("status") or {}).get("readyReplicas") or 0) > 0
