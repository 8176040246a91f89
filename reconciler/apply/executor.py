"""Carry out a Plan, in the order that keeps jobs safe:

1. nodes that go away are drained (reason `reconciler: ...`), their jobs finish (up to a
   deadline), then they are retired (DOWN, then FUTURE) — before anything shrinks, so Slurm
   never schedules onto a node that is about to vanish;
2. ConfigMaps and Services; then the new slurm.conf reaches slurmctld (reconfigure, or a
   controller restart when NodeName lines changed); then StatefulSets;
3. pruned Kubernetes objects (StatefulSets before ConfigMaps);
4. drains of ours on nodes that stay are cleared; nodes that join are waited for.

Reservations of ours: deleted, and updated where they name no joining node, before step 1 (so
none names a node when it goes); created, and updated onto joining nodes, after step 4.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

import hostlist

from reconciler.adapters.kube import Kube
from reconciler.adapters.sacctmgr import Sacctmgr
from reconciler.adapters.scontrol import NodeState, Scontrol
from reconciler.adapters.slurm_nodes import NodeControl
from reconciler.adapters.slurm_rest import SlurmNode, SlurmRestApi
from reconciler.apply.accounting import (
    accounting_changes_of,
    apply_accounting,
    refuse_busy_accounts,
)
from reconciler.apply.controller import roll_deployment
from reconciler.apply.secrets import generate
from reconciler.compile.secrets import secret_from_manifest
from reconciler.compile.slurm_conf import declared_nodes
from reconciler.errors import ReconcilerError
from reconciler.plan.model import (
    KUBERNETES,
    SLURM,
    SLURM_CONFIG,
    SLURM_NODE,
    SLURM_RESERVATION,
    STEP_DRAIN,
    STEP_RECREATE,
    STEP_REGISTER,
    STEP_RESUME,
    Action,
    Change,
    ObjectRef,
    Plan,
)
from reconciler.wellknown import (
    DRAIN_REASON_PREFIX,
    LABEL_MANAGED_BY,
    MANAGED_BY_VALUE,
    reservation_prefix,
)

Say = Callable[[str], None]
OWNED = f"{LABEL_MANAGED_BY}={MANAGED_BY_VALUE}"
APPS_KINDS = frozenset({"StatefulSet", "Deployment"})


class ApplyError(ReconcilerError):
    """Apply stopped; what was done before is listed in the progress output."""


class ConfigSink(Protocol):
    """Where slurmctld reads its config: apply waits until it holds the new text."""

    def wait_for(self, slurm_conf: str, gres_conf: str, timeout: float) -> None: ...


class ControllerRestarter(Protocol):
    """slurmctld as our controller Deployment: rolled to restart it; its Pods nudged to pick
    up a ConfigMap change (kubelet resyncs a Pod's volumes when the Pod changes)."""

    def restart(self, timeout: float) -> None: ...
    def nudge(self) -> None: ...


@dataclass(frozen=True)
class ApplyOptions:
    drain_timeout: float = 600.0
    on_drain_timeout: Literal["fail", "requeue"] = "fail"
    register_timeout: float = 60.0
    config_timeout: float = 90.0
    control_plane_timeout: float = 300.0  # a bootstrap: images pulled, Pods started
    poll: float = 0.5


@dataclass
class Target:
    kube: Kube
    slurm: SlurmRestApi
    scontrol: Scontrol
    namespace: str
    sink: ConfigSink | None = None
    restarter: ControllerRestarter | None = None
    sacctmgr: Sacctmgr | None = None  # when the cluster has slurmdbd

    @property
    def nodes(self) -> NodeControl:
        """Node drains and states: over slurmrestd where it can, scontrol otherwise."""
        return NodeControl(self.slurm, self.scontrol)


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
    _refuse_foreign_reservations(plan)
    accounting = accounting_changes_of(plan)
    refuse_busy_accounts(accounting, target.sacctmgr)
    _ensure_namespace(target, say)
    early, late = _reservation_phases(plan)
    _apply_reservations(early, target, say)
    _retire_nodes([c for c in plan.changes if _is_node(c, Action.DELETE)], target, options, say)
    kube = [c for c in plan.changes if c.ref.scope == KUBERNETES]
    _apply_kube(
        [c for c in kube if c.ref.kind != "StatefulSet" and c.action is not Action.DELETE],
        target,
        say,
    )
    _update_slurm_config(plan, target, options, say)
    _apply_kube(
        [c for c in kube if c.ref.kind == "StatefulSet" and c.action is not Action.DELETE],
        target,
        say,
    )
    _delete_kube([c for c in kube if c.action is Action.DELETE], target, say)
    _resume_nodes([c for c in plan.changes if STEP_RESUME in c.steps], target, say)
    _wait_registered([c for c in plan.changes if STEP_REGISTER in c.steps], target, options, say)
    _apply_reservations(late, target, say)
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
        target.nodes.drain_node(name, f"{DRAIN_REASON_PREFIX} removed by apply")
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
        busy = _jobs_on(pending, target)
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


def _jobs_on(names: Iterable[str], target: Target) -> dict[str, list[int]]:
    """Node -> ids of the jobs that hold it now."""
    wanted = set(names)
    found: dict[str, list[int]] = {}
    snapshot = target.slurm.jobs()
    for job in snapshot.items if snapshot else ():
        if job.state in _ACTIVE_JOB_STATES and job.nodes:
            for node in wanted & set(hostlist.expand_hostlist(job.nodes)):
                found.setdefault(node, []).append(job.job_id)
    return found


def _requeue_jobs_on(names: list[str], target: Target, say: Say) -> None:
    for node, jobs in _jobs_on(names, target).items():
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


_SLURM_CONF_REF = ObjectRef(SLURM, SLURM_CONFIG, "", "slurm.conf")


@dataclass(frozen=True)
class ReservationStep:
    change: Change
    options: Mapping[str, Any]  # what scontrol gets
    first_part: bool = False  # an update's node list without the joining nodes


def _refuse_foreign_reservations(plan: Plan) -> None:
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


def _reservation_phases(plan: Plan) -> tuple[list[ReservationStep], list[ReservationStep]]:
    """(before nodes drain, after nodes join). Deletions and updates that name no joining node
    go first, so a reservation never names a node as it is retired or leaves slurm.conf;
    creations and updates onto joining nodes last, once those nodes are registered. An update
    that does both first drops the leaving nodes (keeping those that stay), then takes on the
    joining ones."""
    joining = {c.ref.name for c in plan.changes if STEP_REGISTER in c.steps}
    conf = next((c for c in plan.changes if c.ref == _SLURM_CONF_REF), None)
    if conf is not None and conf.before is not None and conf.after is not None:
        # Nodes slurmctld does not know yet (spares declared by this plan) count as joining.
        joining |= set(declared_nodes(conf.after)) - set(declared_nodes(conf.before))
    early: list[ReservationStep] = []
    late: list[ReservationStep] = []
    for change in (c for c in plan.changes if c.ref.kind == SLURM_RESERVATION):
        step = ReservationStep(change, change.desired or {})
        if change.action is Action.DELETE:
            early.append(step)
        elif change.action is Action.CREATE or STEP_RECREATE in change.steps:
            late.append(step)
        elif not joining & set(_reservation_nodes(change.after)):
            early.append(step)
        else:
            staying = [n for n in _reservation_nodes(change.after) if n not in joining]
            leaving = set(_reservation_nodes(change.before)) - set(staying)
            if staying and leaving:
                nodes = hostlist.collect_hostlist(staying)
                early.append(ReservationStep(change, {"Nodes": nodes}, first_part=True))
            late.append(step)
    return early, late


def _reservation_nodes(shape: Any) -> list[str]:
    text = (shape or {}).get("nodes") or ""
    return list(hostlist.expand_hostlist(text)) if text else []


def _apply_reservations(steps: list[ReservationStep], target: Target, say: Say) -> None:
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


# ---- Kubernetes and slurm.conf ------------------------------------------------------------


def _apply_kube(changes: list[Change], target: Target, say: Say) -> None:
    for change in changes:
        if change.ref.kind == "Secret":
            _create_secret(change, target, say)
            continue
        target.kube.apply(change.desired, force=True)
        say(f"{change.action.value}d {change.ref}")


def _create_secret(change: Change, target: Target, say: Say) -> None:
    """Made once with fresh random data; one that appeared meanwhile is kept as it is. One
    made while workloads that mount it run was lost: they hold the old data (see
    GeneratedSecret.rolls_on_loss)."""
    spec = secret_from_manifest(change.desired)
    made = target.kube.create(generate(spec))
    if not made:
        say(f"kept {change.ref} (it exists)")
        return
    say(f"created {change.ref} (generated)")
    users = _mounting(target.kube, change.ref.namespace, spec.name)
    if not users:
        return  # a new cluster: nothing ran with an older one
    names = ", ".join(f"{kind} {name}" for kind, name in users)
    if spec.rolls_on_loss:
        for kind, name in users:
            if kind == "Deployment":
                roll_deployment(target.kube, change.ref.namespace, name, datetime.now(UTC))
    say(f"warning: {change.ref} was missing and is new; {names} mount it: {spec.loss_hint()}")


def _mounting(kube: Kube, namespace: str, secret: str) -> list[tuple[str, str]]:
    """(kind, name) of our Deployments and StatefulSets whose Pods mount Secret `secret`."""
    found = []
    for kind in ("Deployment", "StatefulSet"):
        for obj in kube.list("apps/v1", kind, namespace, label_selector=OWNED).items:
            volumes = obj["spec"]["template"]["spec"].get("volumes") or []
            if any((v.get("secret") or {}).get("secretName") == secret for v in volumes):
                found.append((kind, obj["metadata"]["name"]))
    return found


def _delete_kube(changes: list[Change], target: Target, say: Say) -> None:
    for change in changes:
        api_version = "apps/v1" if change.ref.kind in APPS_KINDS else "v1"
        target.kube.delete(api_version, change.ref.kind, change.ref.name, change.ref.namespace)
        say(f"deleted {change.ref}")


def _update_slurm_config(plan: Plan, target: Target, options: ApplyOptions, say: Say) -> None:
    configs = {c.ref.name: c for c in plan.changes if c.ref.kind == SLURM_CONFIG}
    if not configs or plan.bootstrap:  # a slurmctld that starts reads the files as they are
        return
    slurm_conf, gres_conf = _texts(plan, configs)
    if target.sink is not None:
        target.sink.wait_for(slurm_conf, gres_conf, options.config_timeout)
    elif target.restarter is not None and not plan.controller_restart:
        # Our controller Pod rereads its mounted config itself once kubelet has updated the
        # files (its reconfigure sidecar): a reconfigure now could read the old ones.
        target.restarter.nudge()
        say("slurm.conf applied: the controller Pod reconfigures slurmctld once kubelet "
            "updates its files (within about a minute)")  # fmt: skip
        return
    if plan.controller_restart:
        assert target.restarter is not None  # checked before anything changed
        target.restarter.restart(options.config_timeout)
        say("restarted slurmctld (NodeName lines changed); waiting for nodes to report back")
        # Nodes this plan adds read UNKNOWN until their Pods start, and those Pods come only
        # with the StatefulSets applied after this step: waiting for them here always ran
        # into register_timeout (60 s). _wait_registered waits for them at the end.
        joining = {c.ref.name for c in plan.changes if STEP_REGISTER in c.steps}
        _wait_settled(target, options, joining)
    else:
        target.scontrol.reconfigure()
        say("slurmctld reconfigured")


def _wait_settled(target: Target, options: ApplyOptions, joining: set[str]) -> None:
    """After a restart nodes read UNKNOWN until their slurmd reports in (a few seconds)."""
    deadline = time.monotonic() + options.register_timeout
    while time.monotonic() < deadline:
        snapshot = target.slurm.nodes()
        if snapshot is not None and all(
            n.state != "UNKNOWN" for n in snapshot.items if n.name not in joining
        ):
            return
        time.sleep(options.poll)


def _texts(plan: Plan, configs: dict[str, Change]) -> tuple[str, str]:
    """The slurm.conf and gres.conf apply puts in place (unchanged ones as they are)."""
    texts = {}
    for name in ("slurm.conf", "gres.conf"):
        change = configs.get(name)
        texts[name] = change.after if change is not None else _unchanged(plan, name)
    return texts["slurm.conf"], texts["gres.conf"]


def _unchanged(plan: Plan, name: str) -> str:
    conf_map = next(
        (c.desired for c in plan.changes if c.ref.kind == "ConfigMap" and c.desired
         and name in (c.desired.get("data") or {})),
        None,
    )  # fmt: skip
    return conf_map["data"][name] if conf_map else ""
