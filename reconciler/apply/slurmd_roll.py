"""One pass of slurmd's roll in an upgrade's slurmd stage: what plan/upgrade_roll.py decides
from the stage's StatefulSets, their Pods and Slurm's nodes, done through the target (drains
and resumes as Slurm node states with an Event on the Kubernetes Node; a Pod deleted for its
StatefulSet to make it anew)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from reconciler import wellknown as wk
from reconciler.adapters.node_events import tell_node_of_pod
from reconciler.adapters.slurm.model import SlurmNode
from reconciler.apply.executor import jobs_on
from reconciler.apply.target import Say, Target
from reconciler.plan.upgrade import UpgradeStage
from reconciler.plan.upgrade_roll import Roll, RollNode, roll, upgrade_drain_reason

log = logging.getLogger(__name__)


def roll_slurmd(
    stage: UpgradeStage, workloads: Sequence[Mapping[str, Any]], target: Target, say: Say
) -> Roll:
    """Drain, delete and resume what the roll says now; what it did. Nothing while a
    StatefulSet's controller has not yet seen its new template (its Pods would all look
    current)."""
    if any(not _observed(w) for w in workloads):
        return Roll()
    pods = [(w, name, pod) for w in workloads for name, pod in _pods(w, target).items()]
    nodes = {n.name: n for n in target.slurm.nodes().items}
    versions = target.scontrol.node_versions()
    busy = jobs_on([name for _, name, _ in pods], target)
    seen = [
        RollNode(
            name=name,
            exists=pod is not None,
            current=pod is not None and _current(pod, w),
            drain_reason=_drain_reason(nodes.get(name)),
            busy=bool(busy.get(name)),
            version=versions.get(name),
        )
        for w, name, pod in pods
    ]
    moves = roll(seen, stage.after)
    reason = upgrade_drain_reason(stage.after)
    namespace = {name: w["metadata"]["namespace"] for w, name, _ in pods}
    for name in moves.drain:
        target.nodes.drain_node(name, reason)
        tell_node_of_pod(target.kube, namespace[name], name, wk.EVENT_SLURM_NODE_DRAINED,
                         "Drain", f"Slurm node {name} drained: {reason}")  # fmt: skip
    for name in moves.delete:
        target.kube.delete("v1", "Pod", name, namespace[name])
    for name in moves.resume:
        target.nodes.resume_node(name)
        tell_node_of_pod(
            target.kube,
            namespace[name],
            name,
            wk.EVENT_SLURM_NODE_RESUMED,
            "Resume",
            f"Slurm node {name} resumed at {', '.join(stage.after)}",
        )
    for verb, names in (("drained", moves.drain), ("restarting", moves.delete),
                        ("resumed", moves.resume)):  # fmt: skip
        if names:
            say(f"upgrade stage {stage.number}/{stage.of} (slurmd): {verb} {', '.join(names)}")
    return moves


def _drain_reason(node: SlurmNode | None) -> str | None:
    return node.reason if node is not None and node.drain_requested else None


def replica_names(workload: Mapping[str, Any]) -> list[str]:
    """A StatefulSet's Pods by ordinal, each named as its Slurm node."""
    replicas = int((workload.get("spec") or {}).get("replicas", 1))
    return [f"{workload['metadata']['name']}-{i}" for i in range(replicas)]


def _pods(workload: Mapping[str, Any], target: Target) -> dict[str, Mapping[str, Any] | None]:
    labels = ((workload.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    found = {p["metadata"]["name"]: p
             for p in target.kube.list("v1", "Pod", workload["metadata"]["namespace"],
                                       label_selector=selector).items
             if not p["metadata"].get("deletionTimestamp")}  # fmt: skip
    return {name: found.get(name) for name in replica_names(workload)}


def _observed(workload: Mapping[str, Any]) -> bool:
    status = workload.get("status") or {}
    generation = int(workload["metadata"].get("generation") or 0)
    return int(status.get("observedGeneration") or 0) >= generation and bool(
        status.get("updateRevision")
    )


def _current(pod: Mapping[str, Any], workload: Mapping[str, Any]) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    revision = (workload.get("status") or {}).get("updateRevision")
    return labels.get(wk.LABEL_CONTROLLER_REVISION) == revision
