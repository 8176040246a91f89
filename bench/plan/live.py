"""The live state a plan reads, made from a desired state as kube-apiserver 1.20 and Slurm
would report it after it was applied."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from bench.harness.apiserver import SERVER_TIME, container_defaults, managed_entry
from reconciler.compile.desired import DesiredState
from reconciler.plan.diff import desired_kube_objects
from reconciler.plan.live import LiveNode, LiveState

FIELD_MANAGER_APPLY = "sunk-reconciler"


def server_object(obj: Mapping[str, Any], serial: int, *, generation: int = 1) -> dict[str, Any]:
    """`obj` as the API server would return it after we applied it: a fresh JSON-decoded copy
    with server metadata, managedFields, status and defaults."""
    out: dict[str, Any] = json.loads(json.dumps(obj))
    kind, meta = out["kind"], out["metadata"]
    name = meta["name"]
    managed = [managed_entry(FIELD_MANAGER_APPLY, "Apply", out["apiVersion"], _fields_v1(obj))]
    meta.update(
        uid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{meta.get('namespace')}/{name}")),
        resourceVersion=str(1000 + serial),
        creationTimestamp=SERVER_TIME,
        managedFields=managed,
    )
    if kind == "StatefulSet":
        meta["generation"] = generation
        spec = out["spec"]
        spec.setdefault("revisionHistoryLimit", 10)
        template = spec["template"]
        template["metadata"].setdefault("creationTimestamp", None)
        pod = template["spec"]
        for key, value in (
            ("restartPolicy", "Always"),
            ("dnsPolicy", "ClusterFirst"),
            ("schedulerName", "default-scheduler"),
            ("securityContext", {}),
        ):
            pod.setdefault(key, value)
        for container in [*pod.get("containers", ()), *pod.get("initContainers", ())]:
            container_defaults(container)
        for volume in pod.get("volumes", ()):
            if "configMap" in volume:
                volume["configMap"].setdefault("defaultMode", 420)
        replicas = spec.get("replicas", 1)
        revision = f"{name}-7b9f6cd47d"
        out["status"] = {
            "observedGeneration": generation,
            "replicas": replicas,
            "readyReplicas": replicas,
            "currentReplicas": replicas,
            "updatedReplicas": replicas,
            "currentRevision": revision,
            "updateRevision": revision,
            "collisionCount": 0,
        }
        status_fields = {f"f:{k}": {} for k in out["status"]}
        managed.append(
            managed_entry(
                "kube-controller-manager", "Update", "apps/v1", {"f:status": status_fields}
            )
        )
    elif kind == "Service":
        spec = out["spec"]
        spec.setdefault("clusterIPs", [spec.get("clusterIP", "10.96.0.10")])
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        out["status"] = {"loadBalancer": {}}
    return out


def _fields_v1(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The FieldsV1 set a server-side apply of `obj` records (what managedFields holds)."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("name", "namespace")}
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    return _field_set({"metadata": meta, **body})


def _field_set(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return {f"f:{k}": _field_set(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(i, dict) for i in value):
        keyed: dict[str, Any] = {}
        for item in value:
            key = _list_key(item)
            if key is None:
                return {}  # an atomic list: owned as a whole
            keyed[f"k:{json.dumps(key, separators=(',', ':'))}"] = {".": {}, **_field_set(item)}
        return keyed
    return {}


def _list_key(item: Mapping[str, Any]) -> dict[str, Any] | None:
    if "containerPort" in item:
        return {"containerPort": item["containerPort"], "protocol": item.get("protocol", "TCP")}
    if "port" in item:
        return {"port": item["port"], "protocol": item.get("protocol", "TCP")}
    if "mountPath" in item:
        return {"mountPath": item["mountPath"]}
    if "name" in item:
        return {"name": item["name"]}
    return None


def live_nodes(state: DesiredState) -> dict[str, LiveNode]:
    return {
        n.name: LiveNode(
            n.name, frozenset({"IDLE"}), None, n.cpus, n.real_memory_mb, n.gres, n.features
        )
        for n in state.slurm_nodes
    }


def live_state(state: DesiredState) -> LiveState:
    """What the adapters would read back from a cluster where `state` was applied."""
    kube = {
        ref: server_object(obj, i)
        for i, (ref, obj) in enumerate(desired_kube_objects(state).items())
    }
    # The generated Secrets exist (their data is never read into live state).
    secrets = frozenset(s.name for s in state.secrets)
    return LiveState(kube, live_nodes(state), state.slurm_conf, state.gres_conf, secrets=secrets)
