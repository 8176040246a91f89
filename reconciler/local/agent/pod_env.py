"""A container's environment as kubelet resolves it, for the local stack's Pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.local.agent.volumes import Reader, VolumeError, decoded_data
from reconciler.objects import Obj


def container_env(pod: Obj, container: str, read: Reader) -> dict[str, str]:
    """The container's `env` as kubelet resolves it: values, Secret and ConfigMap keys, and
    the Pod fields the local stack knows."""
    spec = pod.get("spec") or {}
    found: Obj = next((c for c in spec.get("containers") or [] if c["name"] == container), {})
    fields = {"metadata.name": pod["metadata"]["name"],
              "metadata.namespace": pod["metadata"]["namespace"],
              "spec.nodeName": spec.get("nodeName", ""), "status.podIP": "127.0.0.1"}  # fmt: skip
    env: dict[str, str] = {}
    for item in found.get("env") or []:
        source = item.get("valueFrom") or {}
        if "value" in item:
            env[item["name"]] = str(item["value"])
        elif "fieldRef" in source:
            env[item["name"]] = fields.get(source["fieldRef"]["fieldPath"], "")
        elif "secretKeyRef" in source or "configMapKeyRef" in source:
            env[item["name"]] = _key_ref(pod, source, read)
    return env


def _key_ref(pod: Obj, source: Mapping[str, Any], read: Reader) -> str:
    kind, ref = (("Secret", source["secretKeyRef"]) if "secretKeyRef" in source
                 else ("ConfigMap", source["configMapKeyRef"]))  # fmt: skip
    obj = read(kind, pod["metadata"]["namespace"], ref["name"])
    data = decoded_data(obj) if obj is not None else {}
    if ref["key"] not in data:
        if ref.get("optional"):
            return ""
        raise VolumeError(f"pod {pod['metadata']['name']}: {kind} {ref['name']!r} has no key "
                          f"{ref['key']!r} for its environment")  # fmt: skip
    return data[ref["key"]].decode()
