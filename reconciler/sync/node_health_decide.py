"""Node health, both ways, decided from plain data: the Kubernetes Nodes, the slurmd Pods on
them and the Slurm nodes those Pods are -> the actions that bring each side in line.

Kubernetes -> Slurm: a Node that is cordoned, NotReady, or carries a configured condition
(True) or NoSchedule/NoExecute taint drains every Slurm node it hosts, with a reason that
starts with `k8s:` and says why. When the cause clears, only drains with that prefix are
resumed. A drain, DOWN or FAIL that someone else set (an admin, Slurm itself, our own
scale-down with `reconciler:`) is never overwritten and never cleared.

Slurm -> Kubernetes: each slurmd Pod carries its Slurm node's health as a Pod condition and its
state and reason as annotations, written only when they change. Optionally a Node whose Slurm
nodes are all down or failing is cordoned and marked as ours; only a Node so marked is ever
uncordoned.

What cannot be seen is not acted on: a slurmd Pod whose Slurm node Slurm does not list, or
whose Node the API server does not list, gives a Problem and no action at all for it.

Level-triggered and without memory: each pass looks at both sides as they are now, so a
restart or a failover resumes where the last pass stopped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from reconciler import wellknown as wk
from reconciler.kuberules.tolerations import BLOCKING_EFFECTS
from reconciler.objects import ReadObj as Obj

# What `scontrol update ... Reason=` takes (reconciler/adapters/scontrol_args.py check_text): any
# other character is replaced, so a Node name or condition type never makes a drain fail.
MAX_REASON = 255
_NOT_IN_REASON = re.compile(r"[^A-Za-z0-9_.,:;/@#()+\-\[\] ]")
_BUSY_STATES = frozenset({"ALLOCATED", "MIXED"})
_CAMEL_PARTS = re.compile(r"[^A-Za-z0-9]+")


# ---- the facts ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeSyncSettings:
    drain_on_conditions: frozenset[str] = frozenset()  # e.g. Node Problem Detector's types
    drain_on_taints: frozenset[str] = frozenset()  # taint keys (NoSchedule/NoExecute)
    cordon_when_slurm_down: bool = False


@dataclass(frozen=True)
class KubeNode:
    name: str
    unschedulable: bool = False
    ready: str = "True"  # the Ready condition's status; "" when the Node has none
    conditions: Mapping[str, str] = field(default_factory=dict)  # type -> status
    taints: tuple[tuple[str, str], ...] = ()  # (key, effect)
    cordoned_by_us: bool = False
    resource_version: str = ""


@dataclass(frozen=True)
class PodHealth:
    """Our condition on a slurmd Pod."""

    status: str  # "True" | "False"
    reason: str  # CamelCase Slurm state: Up, Drained, Draining, Down, Fail, ...
    message: str  # the Slurm reason
    last_transition: str = ""  # RFC 3339; kept while the status stays the same

    def same_as(self, other: PodHealth | None) -> bool:
        return other is not None and (self.status, self.reason, self.message) == (
            other.status, other.reason, other.message,
        )  # fmt: skip


@dataclass(frozen=True)
class SlurmdPod:
    """A running slurmd Pod: `slurmd -N <pod name>`, so its name is its Slurm node's."""

    namespace: str
    name: str
    node: str  # the Kubernetes Node it runs on
    annotations: Mapping[str, str] = field(default_factory=dict)  # ours only
    health: PodHealth | None = None  # our condition as it is now


@dataclass(frozen=True)
class SlurmNodeView:
    name: str
    state: str  # base state, upper case: IDLE, ALLOCATED, MIXED, DOWN, ...
    flags: frozenset[str] = frozenset()  # upper case: DRAIN, FAIL, NOT_RESPONDING, ...
    reason: str = ""


# ---- the actions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Drain:
    slurm_node: str
    reason: str  # starts with wk.DRAIN_REASON_K8S_PREFIX
    k8s_node: str = field(default="", compare=False)  # the Node told of it (an Event)


@dataclass(frozen=True)
class Resume:
    slurm_node: str
    reason: str  # the k8s: drain being cleared (for the log)
    k8s_node: str = field(default="", compare=False)  # the Node told of it (an Event)


@dataclass(frozen=True)
class SetPodHealth:
    """Only what changed is written: None leaves the condition, or the annotations, alone."""

    namespace: str
    pod: str
    condition: PodHealth | None
    annotations: Mapping[str, str | None] | None  # None as a value removes that annotation


@dataclass(frozen=True)
class Cordon:
    node: str
    resource_version: str  # the write is refused if the Node changed since it was read
    why: str


@dataclass(frozen=True)
class Uncordon:
    node: str
    resource_version: str


Action = Drain | Resume | SetPodHealth | Cordon | Uncordon


@dataclass(frozen=True)
class Problem:
    """Something the sync cannot see, so it does nothing about it; logged and counted."""

    subject: str  # the Slurm node (slurmd Pod) concerned
    message: str


@dataclass(frozen=True)
class NodeSyncPlan:
    actions: tuple[Action, ...] = ()
    problems: tuple[Problem, ...] = ()


# ---- Slurm node state -----------------------------------------------------------------------


def standing_reason(state: str, flags: frozenset[str], reason: str) -> str:
    """The reason that still holds the node: Slurm 24.11 keeps a node's reason after RESUME
    (22.05 cleared it), so a reason counts only while the node is drained, failed or down."""
    return reason if "DRAIN" in flags or "FAIL" in flags or state == "DOWN" else ""


def drained_by_k8s(node: SlurmNodeView) -> bool:
    return "DRAIN" in node.flags and node.reason.startswith(wk.DRAIN_REASON_K8S_PREFIX)


def held_by_others(node: SlurmNodeView) -> bool:
    """Drained, down or failed by someone else (or carrying their reason): not ours to touch."""
    if node.reason.startswith(wk.DRAIN_REASON_K8S_PREFIX):
        return False
    troubled = "DRAIN" in node.flags or "FAIL" in node.flags or node.state == "DOWN"
    return troubled or bool(node.reason)


def may_drain(node: SlurmNodeView, reason: str) -> bool:
    """A drain for `reason` is due: the node is not someone else's, and not drained so."""
    return not held_by_others(node) and not ("DRAIN" in node.flags and node.reason == reason)


def is_down(node: SlurmNodeView) -> bool:
    return node.state == "DOWN" or "FAIL" in node.flags


def state_text(node: SlurmNodeView) -> str:
    """As scontrol shows it: base state, then flags, joined by "+" ("IDLE+DRAIN")."""
    return "+".join([node.state, *sorted(node.flags)])


def pod_health(node: SlurmNodeView) -> PodHealth:
    """The condition for a slurmd Pod. Every state jobs can run in is reported as `Up`, so
    jobs starting and ending do not rewrite the condition (the annotation has the state).
    NOT_RESPONDING alone is not a verdict: slurmctld sets it for a moment after every resume
    while it pings slurmd, and marks the node DOWN itself if the silence lasts."""
    busy = node.state in _BUSY_STATES or "COMPLETING" in node.flags
    if node.state == "DOWN":
        reason = "Down"
    elif "FAIL" in node.flags:
        reason = "Failing" if busy else "Fail"
    elif "DRAIN" in node.flags:
        reason = "Draining" if busy else "Drained"
    elif node.state in ("IDLE", "ALLOCATED", "MIXED"):
        reason = "Up"
    else:  # UNKNOWN, FUTURE, ...: not known to be able to run jobs
        reason = "".join(p.capitalize() for p in _CAMEL_PARTS.split(node.state)) or "Unknown"
    return PodHealth("True" if reason == "Up" else "False", reason, node.reason)


def pod_annotations(node: SlurmNodeView) -> dict[str, str]:
    wanted = {wk.ANNOTATION_SLURM_STATE: state_text(node)}
    if node.reason:
        wanted[wk.ANNOTATION_SLURM_REASON] = node.reason
    return wanted


# ---- Kubernetes Node causes -----------------------------------------------------------------


def drain_causes(node: KubeNode, settings: NodeSyncSettings) -> list[str]:
    """Why a Node's Slurm nodes must not take jobs, in words for the drain reason. Our own
    cordon is not a cause: it follows from Slurm's state, it is not news from Kubernetes."""
    causes = []
    if node.unschedulable and not node.cordoned_by_us:
        causes.append("cordoned")
    if node.ready in ("False", "Unknown"):
        causes.append("NotReady")
    causes += [
        f"condition {kind}"
        for kind in sorted(settings.drain_on_conditions)
        if node.conditions.get(kind) == "True"
    ]
    causes += sorted(
        {f"taint {key}" for key, effect in node.taints
         if key in settings.drain_on_taints and effect in BLOCKING_EFFECTS}
    )  # fmt: skip
    return causes


def drain_reason(node: str, causes: Iterable[str]) -> str:
    text = f"{wk.DRAIN_REASON_K8S_PREFIX} node {node} {', '.join(causes)}"
    return _NOT_IN_REASON.sub("_", text)[:MAX_REASON].strip()


# ---- the decision ---------------------------------------------------------------------------


def plan_node_health(
    nodes: Iterable[KubeNode],
    pods: Iterable[SlurmdPod],
    slurm_nodes: Iterable[SlurmNodeView],
    settings: NodeSyncSettings,
    *,
    now: str,
) -> NodeSyncPlan:
    """Everything to do this pass; `now` (RFC 3339) stamps a condition whose status changes."""
    by_name = {n.name: n for n in nodes}
    slurm = {s.name: s for s in slurm_nodes}
    actions: list[Action] = []
    problems: list[Problem] = []
    hosted: dict[str, list[SlurmNodeView | None]] = {}
    for pod in sorted(pods, key=lambda p: p.name):
        node, seen = by_name.get(pod.node), slurm.get(pod.name)
        if node is None:
            problems.append(Problem(pod.name, (
                f"slurmd Pod {pod.namespace}/{pod.name} runs on Node {pod.node}, which the "
                "API server does not list: its Slurm node is left as it is"
            )))  # fmt: skip
            continue
        hosted.setdefault(node.name, []).append(seen)
        if seen is None:
            problems.append(Problem(pod.name, (
                f"Slurm does not know node {pod.name} (slurmd Pod {pod.namespace}/{pod.name} "
                f"on Node {node.name}): nothing is drained, resumed or reported for it"
            )))  # fmt: skip
            continue
        actions += _slurm_side(node, seen, settings)
        update = _pod_side(pod, seen, now)
        if update is not None:
            actions.append(update)
    if settings.cordon_when_slurm_down:
        for name in sorted(hosted):
            action = _cordon_side(by_name[name], hosted[name])
            if action is not None:
                actions.append(action)
    return NodeSyncPlan(tuple(actions), tuple(problems))


def _slurm_side(
    node: KubeNode, seen: SlurmNodeView, settings: NodeSyncSettings
) -> list[Drain | Resume]:
    causes = drain_causes(node, settings)
    if causes:
        reason = drain_reason(node.name, causes)
        return [Drain(seen.name, reason, node.name)] if may_drain(seen, reason) else []
    if drained_by_k8s(seen):
        return [Resume(seen.name, seen.reason, node.name)]
    return []


def _pod_side(pod: SlurmdPod, seen: SlurmNodeView, now: str) -> SetPodHealth | None:
    health = pod_health(seen)
    condition = None
    if not health.same_as(pod.health):
        kept = pod.health is not None and pod.health.status == health.status
        stamp = pod.health.last_transition if kept and pod.health else now
        condition = PodHealth(health.status, health.reason, health.message, stamp or now)
    wanted = pod_annotations(seen)
    annotations: dict[str, str | None] | None = None
    if dict(pod.annotations) != wanted:
        annotations = {key: wanted.get(key) for key in (*wanted, *pod.annotations)}
    if condition is None and annotations is None:
        return None
    return SetPodHealth(pod.namespace, pod.name, condition, annotations)


def _cordon_side(node: KubeNode, hosted: list[SlurmNodeView | None]) -> Cordon | Uncordon | None:
    if any(s is None for s in hosted):  # one unseen Slurm node: no verdict on the Node
        return None
    seen = [s for s in hosted if s is not None]
    down = bool(seen) and all(is_down(s) for s in seen)
    if down and not node.unschedulable and not node.cordoned_by_us:
        names = ", ".join(s.name for s in seen)
        return Cordon(node.name, node.resource_version, f"Slurm nodes down: {names}")
    if not down and node.cordoned_by_us:
        # Ours to lift. Marked but schedulable: an admin uncordoned it meanwhile, and that
        # stood until now; the mark goes, so a later outage cordons it again.
        return Uncordon(node.name, node.resource_version)
    return None


# ---- from API objects (plain dicts) ---------------------------------------------------------


def kube_node_from(obj: Obj) -> KubeNode:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    conditions = {
        str(c.get("type")): str(c.get("status"))
        for c in status.get("conditions") or []
        if isinstance(c, Mapping)
    }
    taints = tuple(
        (str(t.get("key", "")), str(t.get("effect", "")))
        for t in spec.get("taints") or []
        if isinstance(t, Mapping)
    )
    annotations = meta.get("annotations") or {}
    return KubeNode(
        name=str(meta.get("name", "")),
        unschedulable=bool(spec.get("unschedulable")),
        ready=conditions.get("Ready", ""),
        conditions=conditions,
        taints=taints,
        cordoned_by_us=annotations.get(wk.ANNOTATION_CORDONED_BY) == wk.CORDONED_BY_VALUE,
        resource_version=str(meta.get("resourceVersion", "")),
    )


def slurmd_pod_from(obj: Obj) -> SlurmdPod | None:
    """None for a Pod that is not (or no longer) a running slurmd: not bound, not Running
    yet (its slurmd may not have registered), or being deleted (scale-down retires it)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    if not spec.get("nodeName") or meta.get("deletionTimestamp"):
        return None
    if status.get("phase") != "Running":
        return None
    ours = (wk.ANNOTATION_SLURM_STATE, wk.ANNOTATION_SLURM_REASON)
    annotations = meta.get("annotations") or {}
    health = next(
        (
            PodHealth(str(c.get("status", "")), str(c.get("reason", "")),
                      str(c.get("message", "")), str(c.get("lastTransitionTime", "")))
            for c in status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == wk.CONDITION_SLURM_NODE_HEALTHY
        ),
        None,
    )  # fmt: skip
    return SlurmdPod(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        node=str(spec["nodeName"]),
        annotations={k: str(annotations[k]) for k in ours if k in annotations},
        health=health,
    )
