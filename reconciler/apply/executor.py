"""Carry out a Plan, in the order that keeps jobs safe:

1. nodes that go away are drained (reason `reconciler: ...`), their jobs finish (up to a
   deadline), then they are retired (DOWN, then FUTURE) — before anything shrinks, so Slurm
   never schedules onto a node that is about to vanish;
2. generated Secrets, ConfigMaps, Services, claims, Deployments; then the new slurm.conf
   reaches slurmctld (slurm_config.py: a reconfigure, or a controller restart when NodeName
   lines changed); then StatefulSets;
3. pruned Kubernetes objects (StatefulSets before ConfigMaps);
4. drains of ours on nodes that stay are cleared; nodes that join are waited for.

Reservations of ours (reservations.py): deleted, and updated where they name no joining node,
before step 1 (so none names a node when it goes); created, and updated onto joining nodes,
after step 4. A bootstrap plan (plan/bootstrap.py) has only Kubernetes objects: apply then
waits until Slurm answers, and the caller plans the rest.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import hostlist

from reconciler.adapters.node_events import tell_node_of_pod
from reconciler.adapters.scontrol_args import NodeState
from reconciler.adapters.slurm.model import SlurmJob, SlurmNode
from reconciler.apply.accounting import (
    accounting_changes_of,
    apply_accounting,
    refuse_busy_accounts,
)
from reconciler.apply.kube_objects import apply_kube, delete_kube
from reconciler.apply.reservations import (
    apply_reservations,
    refuse_foreign_reservations,
    reservation_phases,
)
from reconciler.apply.slurm_config import update_slurm_config
from reconciler.apply.target import ApplyError, ApplyOptions, Say, Target
from reconciler.errors import ReconcilerError
from reconciler.plan.model import (
    KUBERNETES,
    SLURM_NODE,
    STEP_DRAIN,
    STEP_REGISTER,
    STEP_RESUME,
    Action,
    Change,
    Plan,
)
from reconciler.wellknown import (
    DRAIN_REASON_PREFIX,
    EVENT_SLURM_NODE_DRAINED,
    EVENT_SLURM_NODE_RESUMED,
)


def apply_plan(plan: Plan, target: Target, options: ApplyOptions, say: Say) -> None:
    if plan.denials:
        raise ApplyError(
            "policies deny this revision:\n  " + "\n  ".join(plan.denials),
            hint="fix the objects named, or soften the policy (kind: PolicyOverride)",
        )
    if not plan.has_changes:
        say("nothing to do")
        return
    _refuse_unrestartable(plan, target)  # before any change: never leave half a plan applied
    refuse_foreign_reservations(plan)
    accounting = accounting_changes_of(plan)
    refuse_busy_accounts(accounting, target.sacctmgr)
    _ensure_namespace(target, say)
    early, late = reservation_phases(plan)
    apply_reservations(early, target, say)
    _retire_nodes([c for c in plan.changes if _is_node(c, Action.DELETE)], target, options, say)
    kube = [c for c in plan.changes if c.ref.scope == KUBERNETES]
    apply_kube(
        [c for c in kube if c.ref.kind != "StatefulSet" and c.action is not Action.DELETE],
        target,
        say,
    )
    update_slurm_config(plan, target, options, say)
    apply_kube(
        [c for c in kube if c.ref.kind == "StatefulSet" and c.action is not Action.DELETE],
        target,
        say,
    )
    delete_kube([c for c in kube if c.action is Action.DELETE], target, say)
    _resume_nodes([c for c in plan.changes if STEP_RESUME in c.steps], target, say)
    _wait_registered([c for c in plan.changes if STEP_REGISTER in c.steps], target, options, say)
    apply_reservations(late, target, say)
    if accounting and target.sacctmgr is not None:
        apply_accounting(accounting, target.sacctmgr, say)
    if plan.bootstrap:
        _wait_answering(target, options, say)


def _wait_answering(target: Target, options: ApplyOptions, say: Say) -> None:
    """After a bootstrap plan: until slurmctld answers through slurmrestd."""
    say(f"waiting up to {options.control_plane_timeout:g} s for Slurm to answer")
    deadline = time.monotonic() + options.control_plane_timeout
    while True:
        try:
            target.slurm.ping()
            say("Slurm answers: the control plane is up")
            return
        except ReconcilerError as error:
            if time.monotonic() >= deadline:
                raise ApplyError(
                    f"the control plane was applied, but Slurm does not answer after "
                    f"{options.control_plane_timeout:g} s ({error.message})",
                    hint=f"kubectl -n {target.namespace} get pods; kubectl -n "
                    f"{target.namespace} describe pods -l app.kubernetes.io/part-of=slurm",
                ) from None
        time.sleep(options.poll)


def _refuse_unrestartable(plan: Plan, target: Target) -> None:
    if plan.controller_restart and target.restarter is None:
        raise ApplyError(
            "this change adds or removes Slurm nodes in slurm.conf; Slurm reads NodeName "
            "lines only when slurmctld starts, and this slurmctld is not this release's "
            "controller Deployment, so apply cannot restart it; nothing was changed",
            hint="declare spares in advance with maxReplicas, or apply in two steps with a "
            "slurmctld restart (e.g. `kubectl rollout restart` of the controller) in between",
        )


def _is_node(change: Change, action: Action) -> bool:
    return change.ref.kind == SLURM_NODE and change.action is action and STEP_DRAIN in change.steps


def _ensure_namespace(target: Target, say: Say) -> None:
    if target.kube.get("v1", "Namespace", target.namespace) is None:
        target.kube.apply({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": target.namespace}})  # fmt: skip
        say(f"created namespace {target.namespace}")


# ---- Slurm nodes ------------------------------------------------------------------------


def _retire_nodes(changes: list[Change], target: Target, options: ApplyOptions, say: Say) -> None:
    names = [c.ref.name for c in changes]
    if not names:
        return
    for name in names:
        reason = f"{DRAIN_REASON_PREFIX} removed by apply"
        target.nodes.drain_node(name, reason)
        tell_node_of_pod(target.kube, target.namespace, name, EVENT_SLURM_NODE_DRAINED,
                         "Drain", f"Slurm node {name} drained: {reason}")  # fmt: skip
    say(f"drained {', '.join(names)}; waiting for their jobs to finish")
    busy = _wait_drained(names, target, options.drain_timeout, options.poll, say)
    if busy and options.on_drain_timeout == "requeue":
        _requeue_jobs_on(busy, target, say)
        busy = _wait_drained(busy, target, 60.0, options.poll, say)
    if busy:
        raise ApplyError(
            f"nodes still run jobs after {options.drain_timeout:g} s: {', '.join(busy)}",
            hint="they stay drained; rerun apply when the jobs end, or pass "
            "--on-drain-timeout requeue (or a longer --drain-timeout)",
        )
    for name in names:
        # A drained node cannot go to FUTURE directly (Slurm 22.05, 24.11); DOWN first. It has no
        # jobs now, so DOWN kills nothing.
        target.nodes.set_node_state(name, NodeState.DOWN, f"{DRAIN_REASON_PREFIX} retired")
        target.nodes.set_node_state(name, NodeState.FUTURE)
    say(f"retired {', '.join(names)} (FUTURE: declared, hidden, no jobs)")


def _wait_drained(
    names: Iterable[str], target: Target, timeout: float, poll: float, say: Say
) -> list[str]:
    """Until no job runs on these nodes. Judged from the jobs, not the node state:
    slurmrestd 22.05 keeps reporting a node MIXED after its last job has ended."""
    deadline = time.monotonic() + timeout
    pending = list(names)
    last_report = time.monotonic()
    while pending:
        busy = jobs_on(pending, target)
        pending = [n for n in pending if busy.get(n)]
        if not pending or time.monotonic() >= deadline:
            break
        if time.monotonic() - last_report >= 10:
            jobs = "; ".join(f"{n}: jobs {', '.join(map(str, busy[n]))}" for n in pending)
            say(f"still waiting for {jobs}")
            last_report = time.monotonic()
        time.sleep(poll)
    return pending


_ACTIVE_JOB_STATES = frozenset({"RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "STOPPED"})


def jobs_on(names: Iterable[str], target: Target) -> dict[str, list[int]]:
    """Node -> ids of the jobs that hold it now. The list is streamed and only those jobs
    kept (`jobs_where`): asked every few seconds while a drain waits, it must not hold
    Slurm's whole job list each time (megabytes on a busy cluster)."""
    wanted = set(names)

    def holds(job: SlurmJob) -> bool:
        return job.state in _ACTIVE_JOB_STATES and bool(job.nodes) and bool(_on(job, wanted))

    found: dict[str, list[int]] = {}
    for job in target.slurm.jobs_where(holds).items:
        for node in _on(job, wanted):
            found.setdefault(node, []).append(job.job_id)
    return found


def _on(job: SlurmJob, wanted: set[str]) -> set[str]:
    return wanted & set(hostlist.expand_hostlist(job.nodes))


def _requeue_jobs_on(names: list[str], target: Target, say: Say) -> None:
    for node, jobs in jobs_on(names, target).items():
        for job_id in jobs:
            target.scontrol.run(["requeue", str(job_id)])
            say(f"requeued job {job_id} (on {node})")


def _resume_nodes(changes: list[Change], target: Target, say: Say) -> None:
    for change in changes:
        node = target.slurm.node(change.ref.name)
        # Check again: never clear a drain that someone else set since the plan was made.
        if (
            node is not None
            and "DRAIN" in node.flags
            and node.reason.startswith(DRAIN_REASON_PREFIX)
        ):
            target.nodes.resume_node(change.ref.name)
            say(f"resumed {change.ref.name} (drain by reconciler cleared)")
            said = f"Slurm node {change.ref.name} resumed (was {node.reason!r})"
            tell_node_of_pod(target.kube, target.namespace, change.ref.name,
                             EVENT_SLURM_NODE_RESUMED, "Resume", said)  # fmt: skip


def _wait_registered(
    changes: list[Change], target: Target, options: ApplyOptions, say: Say
) -> None:
    names = [c.ref.name for c in changes]
    if not names:
        return
    say(f"waiting up to {options.register_timeout:g} s for {', '.join(names)} to join")
    deadline = time.monotonic() + options.register_timeout
    pending = names
    while pending and time.monotonic() < deadline:
        pending = [n for n in pending if not _registered(target.slurm.node(n))]
        if pending:
            time.sleep(options.poll)
    if pending:
        say(f"warning: not registered yet: {', '.join(pending)} (their Pods may still be starting)")
    else:
        say(f"joined: {', '.join(names)}")


def _registered(node: SlurmNode | None) -> bool:
    return node is not None and node.state not in ("FUTURE", "UNKNOWN", "DOWN")


# ---- Slurm reservations -------------------------------------------------------------------
