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
from typing import Literal

from reconciler import wellknown as wk
from reconciler.adapters.slurm.model import SlurmNode
from reconciler.kuberules.feasibility import filter_nodes, unavailable_message
from reconciler.kuberules.pod_phase import finished
from reconciler.objects import Obj

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
    bound: Iterable[Obj],
    *,
    placed_by: str,
) -> list[PowerStep]:
    """One step per Pod that needs one. `bound`: every live Pod bound to a Node (what they
    request, their labels for pod affinity and spreading). Any slurmd Pod of a sleeping node
    is deleted (one from before power saving was switched on too); only those naming our
    scheduler (`placed_by`) are bound."""
    nodes = list(kube_nodes)
    pods = [p for p in slurmd_pods if not p["metadata"].get("deletionTimestamp")]
    placed = list(bound)
    load: dict[str, int] = {}
    for pod in pods:
        if node := (pod.get("spec") or {}).get("nodeName"):
            load[node] = load.get(node, 0) + 1
    steps = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        name, node = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
        asleep = is_asleep(slurm_nodes.get(name))
        if asleep and node:
            steps.append(PowerStep("delete", name, node, "Slurm powered the node down"))
        elif not asleep and not node and not finished(pod) and _placed_by(pod) == placed_by:
            reasons = filter_nodes(pod, nodes, placed)
            target = choose_node(pod, [n for n, why in reasons.items() if not why], load)
            if target is None:
                steps.append(PowerStep("unplaceable", name, None, unavailable_message(reasons)))
                continue
            steps.append(PowerStep("bind", name, target))
            load[target] = load.get(target, 0) + 1
            placed.append({**pod, "spec": {**pod["spec"], "nodeName": target}})
    return steps


def choose_node(pod: Obj, feasible: list[str], load: Mapping[str, int]) -> str | None:
    """Of the Nodes the Pod may run on (feasibility.filter_nodes: kube-scheduler's filters),
    the one its Slurm node left when it powered down (its place in topology.conf, its warm
    caches), else the fewest slurmd Pods first (one per Node when there are Nodes enough, as
    SUNK's anti-affinity spreads them), then by name."""
    left = (pod["metadata"].get("annotations") or {}).get(wk.ANNOTATION_LAST_NODE)
    return min(feasible, key=lambda n: (n != left, load.get(n, 0), n), default=None)


def _placed_by(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")
