"""What kube-apiserver 1.20 adds to an object it stores, for benchmarks that synthesize live
objects instead of reading them from a server (bench.plan_bench, bench.policy_bench)."""

from __future__ import annotations

from typing import Any

SERVER_TIME = "2024-05-01T12:00:00Z"


def managed_entry(
    manager: str, operation: str, api_version: str, fields: dict[str, Any]
) -> dict[str, Any]:
    """One managedFields entry (FieldsV1) as the server records it."""
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": SERVER_TIME,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }


def container_defaults(container: dict[str, Any]) -> None:
    """The server's defaults of a container, in place: termination message, image pull policy
    (IfNotPresent for a pinned tag, else Always), fieldRef apiVersion, port protocol."""
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    image = container.get("image", "")
    pinned = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
    container.setdefault("imagePullPolicy", "IfNotPresent" if pinned else "Always")
    for env in container.get("env", ()):
        ref = (env.get("valueFrom") or {}).get("fieldRef")
        if ref is not None:
            ref.setdefault("apiVersion", "v1")
    for port in container.get("ports", ()):
        port.setdefault("protocol", "TCP")
