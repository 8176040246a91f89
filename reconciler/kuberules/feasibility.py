"""Which Nodes can take a Pod, and why not, as kube-scheduler's default filters decide it (pure).

The filters run in kube-scheduler 1.20's order and a Node gets the reasons of the first filter
that refuses it, in kube-scheduler's words, so "0/3 nodes are available: ..." reads the same
from us as from it:

1. to 4. NodeUnschedulable, TaintToleration, NodeAffinity and NodeResourcesFit (node_fit.py),
   each Node alone, its resources counted against the Pods bound to it.
5. PodTopologySpread and 6. InterPodAffinity (pod_affinity_spread.py), whose domains are the Nodes
   that pass the Pod's node affinity, tainted or full ones included, as kube-scheduler counts.

Volumes, host ports and node names are not evaluated: Slurm-placed Pods use none of them.
The power binder places slurmd Pods with it; tests run it against the real kube-scheduler.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from reconciler.kuberules.node_fit import node_facts, node_fit
from reconciler.kuberules.pod_affinity_spread import excluded_by_rule, placed_pod
from reconciler.kuberules.pod_phase import finished
from reconciler.kuberules.pod_requests import Requests
from reconciler.kuberules.resource_fit import node_requested
from reconciler.objects import ReadObj as Obj

SPREAD: Final = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL: Final = SPREAD + " (missing required label)"
POD_AFFINITY: Final = "node(s) didn't match pod affinity/anti-affinity"
AFFINITY_RULES: Final = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_RULES: Final = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
_POD_RULE_REASONS: Final = {
    "podAffinity": (POD_AFFINITY, AFFINITY_RULES),
    "podAntiAffinity": (POD_AFFINITY, ANTI_AFFINITY_RULES),
    "existingAntiAffinity": (POD_AFFINITY, EXISTING_ANTI_AFFINITY),
}


def filter_nodes(pod: Obj, nodes: Sequence[Obj], bound: Iterable[Obj]) -> dict[str, list[str]]:
    """Node name -> why the Pod cannot go there (empty: it can). `bound`: the Pods bound to
    these Nodes (spec.nodeName set); finished ones are ignored, as kube-scheduler's cache does."""
    running = [p for p in bound if _assigned(p)]
    used, count = _load(running)
    reasons = {}
    passed = []
    for node in nodes:
        name = node["metadata"]["name"]
        reasons[name] = node_fit(pod, node_facts(node, used.get(name, {}), count.get(name, 0)))
        if not reasons[name]:
            passed.append(name)
    by_kind = _pod_rules(pod, nodes, running, passed)
    for name in passed:
        reasons[name] = _pod_rule_reasons(name, by_kind)
    return reasons


def unavailable_message(reasons: Mapping[str, list[str]]) -> str:
    """kube-scheduler's FitError text: "0/3 nodes are available: 1 Insufficient cpu, 2
    node(s) didn't match Pod's node affinity." (each reason counted, sorted as text)."""
    counts = Counter(reason for why in reasons.values() for reason in why)
    histogram = sorted(f"{count} {reason}" for reason, count in counts.items())
    return f"0/{len(reasons)} nodes are available: {', '.join(histogram)}."


def _pod_rules(
    pod: Obj, nodes: Sequence[Obj], running: list[Obj], passed: list[str]
) -> dict[str, set[str]]:
    """The Nodes that passed filters 1 to 4 each pod-level rule keeps the Pod off."""
    labels = {n["metadata"]["name"]: _labels(n) for n in nodes}
    placed = [placed_pod(p) for p in running]
    return excluded_by_rule(pod, placed, running, labels, passed)


def _pod_rule_reasons(name: str, by_kind: Mapping[str, set[str]]) -> list[str]:
    if name in by_kind.get("spreadLabel", ()):
        return [SPREAD_LABEL]
    if name in by_kind.get("spread", ()):
        return [SPREAD]
    for kind, reasons in _POD_RULE_REASONS.items():
        if name in by_kind.get(kind, ()):
            return list(reasons)
    return []


def _load(running: list[Obj]) -> tuple[dict[str, Requests], dict[str, int]]:
    by_node: dict[str, list[Obj]] = {}
    for p in running:
        by_node.setdefault(p["spec"]["nodeName"], []).append(p)
    used = {node: node_requested(pods) for node, pods in by_node.items()}
    return used, {node: len(pods) for node, pods in by_node.items()}


def _assigned(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and not finished(pod)


def _labels(node: Obj) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}
