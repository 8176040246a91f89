"""May this Pod go on this Node (pure): kube-scheduler 1.20's filters that need nothing but
the Pod and the one Node, in its order, a Node getting the reasons of the first filter that
refuses it, in kube-scheduler's words:

1. NodeUnschedulable: a cordon the Pod does not tolerate.
2. TaintToleration: the first NoSchedule/NoExecute taint the Pod does not tolerate.
3. NodeAffinity: nodeSelector and required node affinity (node_affinity.py).
4. NodeResourcesFit: the Pod's requests against what the Node has left after the Pods bound
   to it, when the caller counts resources (the power binder); where Slurm allocates the
   resources (the Pod scheduler) or nothing does (the local node agent) it is skipped.

Every caller asks here: the Pod scheduler at submit (placement.excluded_nodes) and at bind
(pod_effects, gang_effects), the power binder (feasibility.filter_nodes) and the local node agent
(kubelet_model.choose_node). The rules about other Pods (inter-Pod affinity, spreading) need
every Node and the placed Pods at once: pod_affinity_spread.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from reconciler.kuberules.node_affinity import node_matches
from reconciler.kuberules.pod_requests import Requests, pod_requests, quantities
from reconciler.kuberules.resource_fit import insufficient_resources
from reconciler.kuberules.tolerations import UNSCHEDULABLE_TAINT, Taint, node_taints, untolerated
from reconciler.objects import ReadObj as Obj

UNSCHEDULABLE: Final = "node(s) were unschedulable"
NODE_AFFINITY: Final = "node(s) didn't match Pod's node affinity"


@dataclass(frozen=True)
class NodeFacts:
    """What the per-Node filters read of a Node, as plain data."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Taint] = ()  # its NoSchedule/NoExecute taints; a cordon is `unschedulable`
    unschedulable: bool = False
    allocatable: Requests | None = None  # None: resources are not counted (filter 4 skipped)
    used: Requests = field(default_factory=dict)  # what the Pods bound to it request
    pods: int = 0  # how many Pods are bound to it


def node_facts(node: Obj, used: Requests | None = None, pods: int = 0) -> NodeFacts:
    """A Node object's facts. Its resources are counted when `used` is given: what the `pods`
    Pods bound to it request (resource_fit.node_requested)."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    allocatable = status.get("allocatable") or status.get("capacity")
    return NodeFacts(
        name=node["metadata"]["name"],
        labels=node["metadata"].get("labels") or {},
        taints=tuple(node_taints(node)),
        unschedulable=bool(spec.get("unschedulable")),
        allocatable=None if used is None else quantities(allocatable),
        used=used or {},
        pods=pods,
    )


def node_fit(pod: Obj, node: NodeFacts) -> list[str]:
    """Why the Pod may not go on the Node, in kube-scheduler's words; [] when it may."""
    if node.unschedulable and untolerated(pod, [UNSCHEDULABLE_TAINT]):
        return [UNSCHEDULABLE]
    if refused := untolerated(pod, node.taints):
        taint = refused[0]
        return [f"node(s) had taint {{{taint.get('key')}: {taint.get('value') or ''}}}, "
                "that the pod didn't tolerate"]  # fmt: skip
    if not node_matches(pod, node.labels, node.name):
        return [NODE_AFFINITY]
    if node.allocatable is None:
        return []
    wanted = pod_requests(pod)
    short = insufficient_resources(wanted, node.allocatable, node.used, pods_on_node=node.pods)
    return [item.reason for item in short]
