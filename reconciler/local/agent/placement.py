"""What the local node agent decides, as pure functions over plain dicts: which Node a slurmd
Pod lands on, what the Nodes look like, what status a running Pod reports.

The agent plays kubelet and, for slurmd Pods only, the default scheduler. It honors required
node affinity and nodeSelector, so a slurmd Pod whose affinity no local Node satisfies stays
Pending, as it would on a real cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler import wellknown as wk
from reconciler.kuberules.node_affinity import required_terms
from reconciler.kuberules.node_fit import NodeFacts, node_fit
from reconciler.objects import Obj

# What one local Node offers; slurmd claims its own size through config_overrides anyway.
NODE_CAPACITY = {"cpu": "64", "memory": "512Gi", "pods": "110"}


@dataclass(frozen=True)
class NodeTemplate:
    """A local Node: its name and the labels that node definitions select on."""

    name: str
    labels: Mapping[str, str]
    gpus: int = 0


def node_templates(
    count: int, label_sets: list[dict[str, str]], gpus: list[int]
) -> list[NodeTemplate]:
    """`count` Nodes, cycling through the label sets the node definitions ask for."""
    sets = label_sets or [{}]
    counts = gpus or [0]
    return [
        NodeTemplate(f"local-node-{i}", sets[i % len(sets)], counts[i % len(counts)])
        for i in range(count)
    ]


def required_labels(affinity: Mapping[str, Any] | None) -> dict[str, str]:
    """Labels that satisfy a definition's required node affinity (first value of each `In`)."""
    labels: dict[str, str] = {}
    for term in required_terms(affinity)[:1]:
        for expression in term.get("matchExpressions") or []:
            if expression.get("operator") == "In" and expression.get("values"):
                labels[expression["key"]] = str(expression["values"][0])
    return labels


def node_object(template: NodeTemplate, now: datetime, kubelet_port: int = 0) -> Obj:
    """The Node as its kubelet registers it; `kubelet_port` is where the API server reaches
    its kubelet API (logs, exec)."""
    capacity = dict(NODE_CAPACITY)
    if template.gpus:
        capacity[wk.RESOURCE_NVIDIA_GPU] = str(template.gpus)
        capacity[wk.RESOURCE_SUNK_ACCELERATOR] = str(template.gpus)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": template.name,
            "labels": {
                "kubernetes.io/hostname": template.name,
                "kubernetes.io/os": "linux",
                wk.LABEL_LOCAL_NODE: "true",
                **template.labels,
            },
        },
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "reconciler local node agent is posting ready status",
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": stamp,
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": template.name},
            ],
            "nodeInfo": _node_info(),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        },
    }


def _node_info() -> dict[str, str]:
    return {
        "architecture": "amd64",
        "operatingSystem": "linux",
        "kubeletVersion": "v1.20.2-reconciler-local",
        "kubeProxyVersion": "",
        "containerRuntimeVersion": "reconciler://local",
        "osImage": "reconciler local node",
        "kernelVersion": "",
        "machineID": "",
        "systemUUID": "",
        "bootID": "",
    }


def choose_node(
    pod: Mapping[str, Any], nodes: Iterable[NodeTemplate], load: Mapping[str, int]
) -> str | None:
    """The matching Node with the fewest Pods (ties by name), or None: the Pod stays Pending."""
    fits = [n.name for n in nodes if not node_fit(pod, NodeFacts(n.name, n.labels))]
    return min(fits, key=lambda name: (load.get(name, 0), name)) if fits else None


def is_ours(pod: Mapping[str, Any]) -> bool:
    """A Pod of the objects we render (control plane, login, slurmd)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(wk.LABEL_MANAGED_BY) == wk.MANAGED_BY_VALUE


def running_status(
    pod: Mapping[str, Any], started: datetime, *, ready: bool, restarts: int = 0
) -> Obj:
    """The status kubelet would post for a Pod whose containers all run; `restarts`: how
    often its containers were restarted after their daemon exited."""
    stamp = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    containers = (pod.get("spec") or {}).get("containers") or []
    flag = "True" if ready else "False"
    return {
        "phase": "Running",
        "hostIP": "127.0.0.1",
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
        "startTime": stamp,
        "conditions": [
            {
                "type": kind,
                "status": flag if kind in ("Ready", "ContainersReady") else "True",
                "lastTransitionTime": stamp,
            }
            for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": ready,
                "started": True,
                "restartCount": restarts,
                "state": {"running": {"startedAt": stamp}},
            }
            for c in containers
        ],
    }


def volume_for(claim: Mapping[str, Any], host_path: str) -> Obj:
    """A hostPath PersistentVolume made for `claim` (pre-bound: only it can take it)."""
    meta, spec = claim["metadata"], claim.get("spec") or {}
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"local-{meta['namespace']}-{meta['name']}"[:253],
            "labels": {wk.LABEL_LOCAL_NODE: "true"},
        },
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": spec.get("storageClassName") or "",
            "hostPath": {"path": host_path},
            "claimRef": {"namespace": meta["namespace"], "name": meta["name"],
                         "uid": meta.get("uid", "")},
        },
    }  # fmt: skip


def failed_status(pod: Mapping[str, Any], reason: str, message: str) -> Obj:
    """A Pod whose containers cannot start yet: `kubectl describe` shows why."""
    containers = (pod.get("spec") or {}).get("containers") or []
    return {
        "phase": "Pending",
        "conditions": [{"type": "Ready", "status": "False", "reason": reason, "message": message}],
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": reason, "message": message}},
            }
            for c in containers
        ],
    }
