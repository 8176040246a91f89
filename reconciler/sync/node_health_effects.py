"""Node health, both ways: read Kubernetes Nodes, the slurmd Pods and Slurm's nodes through the
adapters, let `node_health` decide, and carry each action out (one pass per call).

A failed read ends the pass: nothing is decided on half a picture. A failed action is logged
and counted and the others go on; the next pass tries again, level-triggered. Before a drain
or a resume the Slurm node is read once more, so a drain an admin set a moment ago is neither
overwritten nor cleared; a node Slurm does not know then is left alone (slurmrestd answers
"unknown node" in an `errors` array, and failing open on that is how slurm-operator#79 killed
jobs). Nothing here cancels a job or deletes a Pod.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.node_control import NodeControl
from reconciler.adapters.node_events import tell_node
from reconciler.adapters.slurm.model import SlurmNode, SlurmRestApi
from reconciler.errors import KubeApiError, ReconcilerError
from reconciler.sync.node_health_decide import (
    Action,
    Cordon,
    Drain,
    NodeSyncPlan,
    NodeSyncSettings,
    Resume,
    SetPodHealth,
    SlurmNodeView,
    Uncordon,
    drained_by_k8s,
    kube_node_from,
    may_drain,
    plan_node_health,
    slurmd_pod_from,
    standing_reason,
)

log = logging.getLogger(__name__)

# Told of each action carried out and each failure: the operation ("list", "unknown_node",
# "drain", "resume", "pod_health", "cordon", "uncordon") and whether it succeeded. It runs on
# the sync's thread: keep it cheap, and it must not raise.
NodeSyncObserver = Callable[[str, bool], None]

_OPERATION = {Drain: "drain", Resume: "resume", SetPodHealth: "pod_health", Cordon: "cordon",
              Uncordon: "uncordon"}  # fmt: skip
OPERATIONS = ("list", "unknown_node", *_OPERATION.values())


@dataclass(frozen=True)
class Skipped:
    """An action left undone on a second look at the Slurm node, and why."""

    why: str
    unknown: bool = False  # Slurm does not know the node (any more): a sync error


@dataclass
class PassReport:
    """What one pass did: actions carried out, failed, skipped on a second look; problems."""

    done: list[Action] = field(default_factory=list)
    failed: list[tuple[Action, str]] = field(default_factory=list)
    skipped: list[tuple[Action, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    error: str = ""  # a read failed: nothing was decided


class NodeSync:
    def __init__(
        self,
        kube: Kube,
        slurm: SlurmRestApi,
        nodes: NodeControl,
        *,
        namespace: str,
        release: str,
        settings: NodeSyncSettings,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._kube = kube
        self._slurm = slurm
        self._nodes = nodes
        self._namespace = namespace
        self._selector = ",".join((
            f"{wk.LABEL_NAME}={wk.SLURMD_APP_NAME}",
            f"{wk.LABEL_MANAGED_BY}={wk.MANAGED_BY_VALUE}",
            f"{wk.LABEL_RELEASE}={release}",
        ))  # fmt: skip
        self.settings = settings
        self._clock = clock
        self._observer: NodeSyncObserver | None = None
        self._problems: set[str] = set()  # logged once while they last

    def observe(self, observer: NodeSyncObserver | None) -> None:
        self._observer = observer

    def close(self) -> None:
        self._slurm.close()

    # ---- one pass ---------------------------------------------------------------------------

    def run_once(self) -> PassReport:
        report = PassReport()
        try:
            plan = self.plan()
        except ReconcilerError as error:
            log.warning("node sync: reading Nodes, slurmd Pods or Slurm nodes failed: %s", error)
            self._tell("list", ok=False)
            report.error = str(error)
            return report
        self._report_problems(plan, report)
        for action in plan.actions:
            self._carry_out(action, report)
        if any(isinstance(a, Drain | Resume) for a in report.done):
            self._report_slurm_changes(report)
        return report

    def _report_slurm_changes(self, report: PassReport) -> None:
        """The Pods of nodes drained or resumed just now show it in this pass, not the next."""
        try:
            plan = self.plan()
        except ReconcilerError as error:
            log.warning("node sync: reading back after drains and resumes failed: %s", error)
            self._tell("list", ok=False)
            return
        for action in plan.actions:
            if isinstance(action, SetPodHealth):
                self._carry_out(action, report)

    def plan(self) -> NodeSyncPlan:
        nodes = self._kube.list("v1", "Node").items
        pods = self._kube.list("v1", "Pod", self._namespace, label_selector=self._selector).items
        slurm_nodes = self._slurm.nodes().items
        running = (slurmd_pod_from(p) for p in pods)
        return plan_node_health(
            (kube_node_from(n) for n in nodes),
            (p for p in running if p is not None),
            (view_of(s) for s in slurm_nodes),
            self.settings,
            now=self._clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
        )

    def _report_problems(self, plan: NodeSyncPlan, report: PassReport) -> None:
        now = {p.message for p in plan.problems}
        for message in sorted(now - self._problems):
            log.warning("node sync: %s (retried every pass)", message)
        for message in sorted(self._problems - now):
            log.info("node sync: resolved: %s", message)
        self._problems = now
        for _ in plan.problems:
            self._tell("unknown_node", ok=False)
        report.problems = sorted(now)

    def _carry_out(self, action: Action, report: PassReport) -> None:
        operation = _OPERATION[type(action)]
        try:
            skipped = self._act(action)
        except ReconcilerError as error:
            log.warning("node sync: %s failed (retried next pass): %s", describe(action), error)
            self._tell(operation, ok=False)
            report.failed.append((action, str(error)))
            return
        except Exception as error:  # a bug: keep the trace, and let the other actions run
            log.exception("node sync: %s failed", describe(action))
            self._tell(operation, ok=False)
            report.failed.append((action, repr(error)))
            return
        if skipped is not None:
            report.skipped.append((action, skipped.why))
            if skipped.unknown:
                log.warning("node sync: %s not done: %s", describe(action), skipped.why)
                self._tell("unknown_node", ok=False)
            else:
                log.info("node sync: %s not done: %s", describe(action), skipped.why)
            return
        self._tell(operation, ok=True)
        report.done.append(action)

    def _act(self, action: Action) -> Skipped | None:
        """Carry out one action, or say why it was left undone."""
        if isinstance(action, Drain):
            return self._drain(action)
        if isinstance(action, Resume):
            return self._resume(action)
        if isinstance(action, SetPodHealth):
            self._set_pod_health(action)
        elif isinstance(action, Cordon):
            self._patch_node(action.node, action.resource_version, cordon=True)
            log.info("node sync: cordoned Node %s (%s)", action.node, action.why)
        else:
            self._patch_node(action.node, action.resource_version, cordon=False)
            log.info("node sync: uncordoned Node %s (its Slurm nodes are back)", action.node)
        return None

    # ---- Slurm ------------------------------------------------------------------------------

    def _drain(self, action: Drain) -> Skipped | None:
        current = self._slurm.node(action.slurm_node)
        if current is None:
            return Skipped(f"Slurm does not know node {action.slurm_node}", unknown=True)
        if not may_drain(view_of(current), action.reason):
            return Skipped(f"drained or down by someone else meanwhile ({current.reason!r})")
        self._nodes.drain_node(action.slurm_node, action.reason)
        log.info("node sync: drained Slurm node %s: %s", action.slurm_node, action.reason)
        tell_node(self._kube, action.k8s_node, wk.EVENT_SLURM_NODE_DRAINED, "Drain",
                  f"Slurm node {action.slurm_node} drained: {action.reason}")  # fmt: skip
        return None

    def _resume(self, action: Resume) -> Skipped | None:
        current = self._slurm.node(action.slurm_node)
        if current is None:
            return Skipped(f"Slurm does not know node {action.slurm_node}", unknown=True)
        if not drained_by_k8s(view_of(current)):
            return Skipped(f"its drain is no longer ours ({current.reason!r})")
        self._nodes.resume_node(action.slurm_node)
        log.info("node sync: resumed Slurm node %s (was %r)", action.slurm_node, current.reason)
        tell_node(self._kube, action.k8s_node, wk.EVENT_SLURM_NODE_RESUMED, "Resume",
                  f"Slurm node {action.slurm_node} resumed (was {current.reason!r})")  # fmt: skip
        return None

    # ---- Kubernetes -------------------------------------------------------------------------

    def _set_pod_health(self, action: SetPodHealth) -> None:
        target = f"Pod {action.namespace}/{action.pod}"
        try:
            if action.annotations is not None:
                # A merge patch, not an apply: an apply to a Pod deleted meanwhile would try
                # to create it (and the ServiceAccount may not create Pods).
                self._kube.annotate_pod(
                    action.namespace, action.pod, action.annotations,
                    field_manager=wk.NODE_SYNC_FIELD_MANAGER,
                )  # fmt: skip
            if action.condition is not None:
                self._kube.apply(
                    {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": action.pod, "namespace": action.namespace},
                     "status": {"conditions": [condition_of(action)]}},
                    field_manager=wk.NODE_SYNC_STATUS_MANAGER, force=True, subresource="status",
                )  # fmt: skip
                level = logging.INFO if action.condition.status == "False" else logging.DEBUG
                log.log(level, "node sync: %s: %s=%s (%s)", target,
                        wk.CONDITION_SLURM_NODE_HEALTHY, action.condition.status,
                        action.condition.reason)  # fmt: skip
        except KubeApiError as error:
            if error.status != 404:  # gone meanwhile: nothing left to report on
                raise

    def _patch_node(self, name: str, resource_version: str, *, cordon: bool) -> None:
        """With the resourceVersion read: a Node changed since (say, cordoned by an admin)
        is refused with 409 and looked at again next pass."""
        mark = wk.CORDONED_BY_VALUE if cordon else None
        self._kube.request_json(
            "PATCH", self._kube.resource("v1", "Node").path(name=name),
            query=[("fieldManager", wk.NODE_SYNC_FIELD_MANAGER)],
            body={"metadata": {"resourceVersion": resource_version,
                               "annotations": {wk.ANNOTATION_CORDONED_BY: mark}},
                  "spec": {"unschedulable": True if cordon else None}},
            content_type="application/merge-patch+json", target=f"Node {name}",
        )  # fmt: skip

    def _tell(self, operation: str, *, ok: bool) -> None:
        if self._observer is not None:
            self._observer(operation, ok)


def view_of(node: SlurmNode) -> SlurmNodeView:
    reason = standing_reason(node.state, node.flags, node.reason)
    return SlurmNodeView(node.name, node.state, node.flags, reason)


def condition_of(action: SetPodHealth) -> Mapping[str, Any]:
    condition = action.condition
    assert condition is not None
    return {
        "type": wk.CONDITION_SLURM_NODE_HEALTHY,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "lastTransitionTime": condition.last_transition,
    }


def describe(action: Action) -> str:
    if isinstance(action, Drain):
        return f"drain of Slurm node {action.slurm_node}"
    if isinstance(action, Resume):
        return f"resume of Slurm node {action.slurm_node}"
    if isinstance(action, SetPodHealth):
        return f"health of Pod {action.namespace}/{action.pod}"
    if isinstance(action, Cordon):
        return f"cordon of Node {action.node}"
    return f"uncordon of Node {action.node}"
