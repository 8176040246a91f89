"""Power saving, decided: which slurmd Pods to delete, which to bind and where. Pure.

Slurm is the truth: a node it has powered down (or is powering down) must have no Pod on a
Kubernetes Node; one it powers up (or never powered down) gets its Pod bound. A StatefulSet
makes a deleted Pod again at once: with power saving its Pods name our scheduler, so that Pod
stays Pending, on no Node and holding nothing, until Slurm resumes the node. Any ordinal can
sleep this way; the StatefulSet is never scaled (which could only drop its highest ordinals).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from reconciler import wellknown as wk
from reconciler.adapters.slurm.model import SlurmNode
from reconciler.kuberules.node_affinity import node_matches
from reconciler.kuberules.pod_requests import Requests, plus, pod_requests, quantities
from reconciler.scheduler.tolerations import blocking_taints, tolerates_all

Obj = dict[str, Any]
# Slurm's power flags (REST node `state` list; sinfo shows `~` powered down, `%` powering down,
# `#` powering up).
ASLEEP_FLAGS = frozenset({"POWERED_DOWN", "POWERING_DOWN"})
WAKING_FLAG = "POWERING_UP"


def is_slurmd_pod(pod: Obj) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return labels.get(wk.LABEL_NAME) == "slurmd" and labels.get(wk.LABEL_MANAGED_BY) == (
        wk.MANAGED_BY_VALUE
    )


def is_asleep(node: SlurmNode | None) -> bool:
    """Powered down or on its way there, and not being brought back."""
    if node is None:  # not declared (yet): a Pod runs as without power saving
        return False
    flags = node.flags | {node.state}
    return bool(flags & ASLEEP_FLAGS) and WAKING_FLAG not in flags


@dataclass(frozen=True)
class PowerStep:
    kind: Literal["delete", "bind", "unplaceable"]
    pod: str
    node: str | None = None  # the Kubernetes Node to bind to
    why: str = ""


def power_steps(
    slurmd_pods: Iterable[Obj],
    slurm_nodes: Mapping[str, SlurmNode],
    kube_nodes: Iterable[Obj],
    used: Mapping[str, Requests],
    *,
    placed_by: str,
) -> list[PowerStep]:
    """One step per Pod that needs one. `used`: requests of the Pods bound to each Node. Any
    slurmd Pod of a sleeping node is deleted (one from before power saving was switched on
    too); only those naming our scheduler (`placed_by`) are bound."""
    nodes = list(kube_nodes)
    pods = [p for p in slurmd_pods if not p["metadata"].get("deletionTimestamp")]
    used = {name: dict(requests) for name, requests in used.items()}
    load: dict[str, int] = {}
    for pod in pods:
        if bound := (pod.get("spec") or {}).get("nodeName"):
            load[bound] = load.get(bound, 0) + 1
    steps = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        name, bound = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
        asleep = is_asleep(slurm_nodes.get(name))
        if asleep and bound:
            steps.append(PowerStep("delete", name, bound, "Slurm powered the node down"))
        elif not asleep and not bound and not _finished(pod) and _placed_by(pod) == placed_by:
            target = choose_node(pod, nodes, used, load)
            if target is None:
                steps.append(PowerStep("unplaceable", name, None, _why_none(pod, nodes)))
                continue
            steps.append(PowerStep("bind", name, target))
            load[target] = load.get(target, 0) + 1
            used[target] = plus(used.get(target, {}), pod_requests(pod))
    return steps


def choose_node(
    pod: Obj, nodes: list[Obj], used: Mapping[str, Requests], load: Mapping[str, int]
) -> str | None:
    """A Node the Pod may run on and fits: the one its Slurm node left when it powered down
    (its place in topology.conf, its warm caches), else the fewest slurmd Pods first (one per
    Node when there are Nodes enough, as SUNK's anti-affinity spreads them), then by name."""
    fitting = [n["metadata"]["name"] for n in nodes if _admits(pod, n, used)]
    left = (pod["metadata"].get("annotations") or {}).get(wk.ANNOTATION_LAST_NODE)
    return min(fitting, key=lambda n: (n != left, load.get(n, 0), n), default=None)


def _admits(pod: Obj, node: Obj, used: Mapping[str, Requests]) -> bool:
    name = node["metadata"]["name"]
    if not node_matches(pod, node["metadata"].get("labels") or {}):
        return False
    if not tolerates_all(pod, blocking_taints(node)):
        return False
    return fits(pod_requests(pod), _allocatable(node), used.get(name, {}))


def fits(wanted: Requests, allocatable: Requests, used: Requests) -> bool:
    """Every resource the Pod asks for is free; one the Node does not offer is not."""
    return all(
        amount <= allocatable.get(resource, Decimal(0)) - used.get(resource, Decimal(0))
        for resource, amount in wanted.items()
        if amount > 0
    )


def requests_by_node(pods: Iterable[Obj]) -> dict[str, Requests]:
    """What the bound, unfinished Pods ask of each Node."""
    used: dict[str, Requests] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not _finished(pod):
            used[node] = plus(used.get(node, {}), pod_requests(pod))
    return used


def _allocatable(node: Obj) -> Requests:
    status = node.get("status") or {}
    return quantities(status.get("allocatable") or status.get("capacity"))


def _placed_by(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")


def _finished(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _why_none(pod: Obj, nodes: list[Obj]) -> str:
    matching = [n for n in nodes if node_matches(pod, n["metadata"].get("labels") or {})]
    if not matching:
        return "no Node matches its nodeSelector and node affinity"
    return (f"{len(matching)} Node(s) match its node affinity, but each is cordoned, tainted "
            "against it, or lacks the free resources it requests")  # fmt: skip
