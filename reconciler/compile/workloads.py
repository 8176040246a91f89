"""The shapes every control-plane object shares: a Pod spec from a values section, the
Deployment, StatefulSet, Service and claim around it (plain dicts, in the order `kubectl get
-o yaml` shows them)."""

from __future__ import annotations

from reconciler import wellknown as wk
from reconciler.compile.manifests import owned_labels
from reconciler.compile.profile import Profile
from reconciler.compile.secrets import jwt_secret_name
from reconciler.objects import Obj

JWT_DIR = "/etc/slurm-jwt"
# SUNK's "Slurm Workload Manager" page: controller.securityContext.runAsUser/runAsGroup.
SLURM_UID = 64030


def pod_spec(
    values: Obj,
    component: Obj,
    containers: list[Obj],
    volumes: list[Obj],
    *,
    security: dict[str, int] | None,
    grace: int = 30,
) -> Obj:
    spec: Obj = {
        "terminationGracePeriodSeconds": component.get("terminationGracePeriodSeconds", grace),
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
    }
    wanted_security = {**(security or {}), **(component.get("securityContext") or {})}
    if wanted_security:
        spec["securityContext"] = wanted_security
    if component.get("priorityClassName"):
        spec["priorityClassName"] = component["priorityClassName"]
    for container in containers:
        pull = (component.get("image") or {}).get("pullPolicy")
        if pull and container["name"] != "mysql":
            container["imagePullPolicy"] = pull
    spec["containers"] = containers
    if volumes:
        spec["volumes"] = volumes
    selector = {**region_selector(values), **(component.get("nodeSelector") or {})}
    if selector:
        spec["nodeSelector"] = {str(k): str(v) for k, v in selector.items()}
    for key in ("affinity", "tolerations"):
        if component.get(key):
            spec[key] = component[key]
    if values.get("imagePullSecrets"):
        spec["imagePullSecrets"] = values["imagePullSecrets"]
    return spec


def region_selector(values: Obj) -> dict[str, str]:
    """SUNK's "Slurm Workload Manager" page: nodeSelector.region places the control plane (not
    compute) in a region."""
    region = (values.get("nodeSelector") or {}).get("region")
    return {wk.NODE_LABEL_REGION: str(region)} if region else {}


def template(labels: dict[str, str], default_container: str, pod: Obj) -> Obj:
    return {
        "metadata": {
            "labels": labels,
            "annotations": {wk.ANNOTATION_DEFAULT_CONTAINER: default_container},
        },
        "spec": pod,
    }


def deployment_for(
    release: str, namespace: str, name: str, component: str, selector: dict[str, str],
    main: str, pod: Obj, *, replicas: int,
) -> Obj:  # fmt: skip
    labels = {**owned_labels(release, component), **selector}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            # Never two at once: two slurmctld on one state directory corrupt it.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": template(labels, main, pod),
        },
    }


def statefulset_for(
    release: str, namespace: str, name: str, component: str, selector: dict[str, str],
    main: str, pod: Obj, *, replicas: int = 1,
) -> Obj:  # fmt: skip
    labels = {**owned_labels(release, component), **selector}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": selector},
            "template": template(labels, main, pod),
        },
    }


def service_for(
    release: str, namespace: str, name: str, component: str, selector: dict[str, str],
    port_name: str, port: int, *, headless: bool = False,
) -> Obj:  # fmt: skip
    spec: Obj = {"clusterIP": "None"} if headless else {}
    spec["selector"] = selector
    spec["ports"] = [{"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": owned_labels(release, component)},
        "spec": spec,
    }  # fmt: skip


def claim_for(release: str, namespace: str, name: str, component: str, storage: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": owned_labels(release, component)},
        "spec": claim_spec(storage),
    }  # fmt: skip


def claim_spec(storage: Obj) -> Obj:
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage.get("size", "10Gi")}},
    }
    if storage.get("storageClassName"):
        spec["storageClassName"] = storage["storageClassName"]
    return spec


def jwt_volume(release: str) -> Obj:
    return {"name": "jwt-key",
            "secret": {"secretName": jwt_secret_name(release), "defaultMode": 0o400}}  # fmt: skip


def listen_address(profile: Profile, port: int) -> str:
    return f"{profile.listen_address}:{port}"


def container_port(name: str, port: int) -> Obj:
    return {"name": name, "containerPort": port, "protocol": "TCP"}
