"""What both kinds of `local up` share: progress lines, the foreground wait, Nodes shaped for a
repo, and a workload's readiness."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from reconciler.adapters.kube import Kube
from reconciler.compile.desired import DesiredState
from reconciler.local.agent.placement import NodeTemplate, node_templates, required_labels
from reconciler.local.stack import LocalStack

DEFAULT_REPO = Path("fixtures/config-repo")


def progress(text: str) -> None:
    print(f"local: {text}", file=sys.stderr, flush=True)


def interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def wait_for_stop(stack: LocalStack) -> None:
    """Until Ctrl-C, SIGTERM, or someone else stops the daemons; reaps them as they exit.
    The caller stops the node agent before the daemons, so its watches never see the API
    server vanish under them."""
    while True:
        stack.supervisor.reap_exited()
        if not stack.supervisor.children():
            return
        time.sleep(0.5)


def templates(probe: DesiredState, count: int | None) -> list[NodeTemplate]:
    """One Node per Slurm node by default, labelled so its definition's affinity fits it."""
    by_name = {n.name: n.definition for n in probe.nodesets if n.enabled}
    label_sets, gpus = [], []
    for node in probe.slurm_nodes:
        label_sets.append(required_labels(by_name[node.nodeset].get("affinity")))
        gpus.append(node.gpus)
    return node_templates(count or max(len(probe.slurm_nodes), 1), label_sets, gpus)


def unready_workloads(kube: Kube, state: DesiredState) -> list[str]:
    """The repo's Deployments and StatefulSets without every replica ready ("Kind name")."""
    workloads = [o for o in state.kube_objects if o["kind"] in ("Deployment", "StatefulSet")]
    return [f"{o['kind']} {o['metadata']['name']}" for o in workloads if not all_ready(kube, o)]


def all_ready(kube: Kube, workload: dict[str, Any]) -> bool:
    """A Deployment or StatefulSet with every replica its spec asks for ready."""
    meta = workload["metadata"]
    live = kube.get("apps/v1", workload["kind"], meta["name"], meta["namespace"]) or {}
    wanted = int(workload["spec"].get("replicas", 1))
    return int((live.get("status") or {}).get("readyReplicas") or 0) >= wanted
