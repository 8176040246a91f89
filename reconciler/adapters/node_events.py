"""Events on Kubernetes Nodes about the Slurm nodes they host: a drain or a resume by node sync
or apply, so `kubectl describe node` tells an operator why its Slurm node is drained."""

from __future__ import annotations

import logging

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.errors import ReconcilerError

log = logging.getLogger(__name__)


def tell_node(kube: Kube, node: str, reason: str, action: str, message: str) -> None:
    """An Event on Kubernetes Node `node` (kubectl describe node shows it); a failed write is
    logged, never a failed drain or resume."""
    if not node:
        return
    # kubectl describe node finds a Node's Events by uid = the Node's name, as kubelet's.
    regarding = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "uid": node}}
    kind = "Warning" if reason == wk.EVENT_SLURM_NODE_DRAINED else "Normal"
    try:
        kube.create_event(regarding, reason=reason, message=message, action=action, type=kind,
                          reporting_controller=wk.EVENT_REPORTER,
                          reporting_instance=wk.EVENT_REPORTER)  # fmt: skip
    except ReconcilerError as error:
        log.warning("the Event on Node %s failed: %s", node, error)


def tell_node_of_pod(
    kube: Kube, namespace: str, pod: str, reason: str, action: str, message: str
) -> None:
    """The same, on the Node that runs slurmd Pod `pod` (its name is the Slurm node's)."""
    try:
        found = kube.get("v1", "Pod", pod, namespace) or {}
    except ReconcilerError as error:
        log.warning("the Event for Slurm node %s: reading its Pod failed: %s", pod, error)
        return
    tell_node(kube, (found.get("spec") or {}).get("nodeName") or "", reason, action, message)
