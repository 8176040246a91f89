"""Kubernetes objects for the compute side: ConfigMaps, the compute Service, one StatefulSet per
enabled node set. Plain dicts, keys in the order `kubectl get -o yaml` shows them.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler import wellknown as wk
from reconciler.compile import probes
from reconciler.compile.directory import with_directory
from reconciler.compile.dns import compute_service_name, with_compute_search
from reconciler.compile.images import compute_image
from reconciler.compile.job_scripts import KINDS, script_config_map
from reconciler.compile.lines import one_line, write_script
from reconciler.compile.munge import munge_socket_mount, munge_volumes, with_munge
from reconciler.compile.power import power_saving
from reconciler.compile.pyxis import with_pyxis
from reconciler.compile.s6_services import s6_services, s6_volume, s6_volume_mounts
from reconciler.compile.slurm_nodes import SlurmNodeSpec
from reconciler.compile.sshd import (
    SSHD_PORT,
    compute_ssh_enabled,
    sshd_beside,
    sshd_mount,
    sshd_volume,
)
from reconciler.compile.user_containers import check_container_names, user_containers
from reconciler.config.defaults import default_scheduler_name
from reconciler.config.keys import NODE_DEFINITION
from reconciler.config.value_types import default_in

SLURMD_CONTAINER = "slurmd"
SLURMD_PORT = 6818
CONF_MOUNT = "/etc/slurm"


# A slurmd Pod's grace period when its definition sets none.
_GRACE = default_in(NODE_DEFINITION, "terminationGracePeriodSeconds")


def owned_labels(release: str, component: str) -> dict[str, str]:
    """Labels on every object we render; LABEL_MANAGED_BY + LABEL_RELEASE select live state."""
    return {
        wk.LABEL_MANAGED_BY: wk.MANAGED_BY_VALUE,
        wk.LABEL_PART_OF: "slurm",
        wk.LABEL_COMPONENT: component,
        wk.LABEL_RELEASE: release,
    }


def config_map(
    name: str,
    namespace: str,
    release: str,
    data: dict[str, str],
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": owned_labels(release, "config"),
    }
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": dict(sorted(data.items())),
    }


def slurm_conf_map_name(release: str) -> str:
    return f"{release}-slurm-conf"


def compute_service(release: str, namespace: str) -> dict[str, Any]:
    """Headless Service that gives slurmd Pods stable DNS names (<pod>.<release>-compute)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": compute_service_name(release),
            "namespace": namespace,
            "labels": owned_labels(release, "compute"),
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {wk.LABEL_NAME: "slurmd", wk.LABEL_RELEASE: release},
            # `protocol` spelled out: server-side apply needs every key of an associative list.
            "ports": [
                {
                    "name": "slurmd",
                    "port": SLURMD_PORT,
                    "targetPort": SLURMD_PORT,
                    "protocol": "TCP",
                }
            ],
        },
    }


def statefulset(
    release: str,
    namespace: str,
    spec: SlurmNodeSpec,
    definition: dict[str, Any],
    values: dict[str, Any],
    *,
    cgroups: bool = False,
) -> dict[str, Any]:
    """`cgroups`: slurm.conf loads a cgroup plugin (compile/cgroup.py), so slurmd needs a
    writable cgroup hierarchy."""
    selector = {wk.LABEL_NAME: "slurmd", wk.LABEL_INSTANCE: spec.statefulset}
    labels = {**owned_labels(release, "compute"), wk.LABEL_NODESET: spec.nodeset}
    pod = with_directory(
        _power_managed(_pod_spec(release, namespace, definition, values, cgroups),
                       namespace, release, values),
        release, values,
        # sshd beside slurmd takes the directory's keys, as the login's does.
        login=compute_ssh_enabled(values),
    )  # fmt: skip
    check_container_names(pod, definition, f"node definition {spec.nodeset!r}")
    pod_labels = {**selector, **labels, **_strings(definition.get("labels"))}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": spec.statefulset, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": spec.replicas,
            "serviceName": compute_service_name(release),
            "podManagementPolicy": "Parallel",
            # OnDelete: a template change must never restart slurmd under running jobs; the
            # reconciler rolls nodes itself, draining each first.
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {
                        wk.ANNOTATION_DEFAULT_CONTAINER: SLURMD_CONTAINER,
                        **_strings(definition.get("annotations")),
                    },
                },
                "spec": pod,
            },
        },
    }


def _power_managed(spec: dict[str, Any], namespace: str, release: str,
                   values: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """With power saving, our scheduler places slurmd Pods: it holds a powered-down node's Pod
    (which the StatefulSet makes again) Pending, on no Node, until Slurm resumes the node."""
    if power_saving(values) is None:
        return spec
    scheduler = values.get("scheduler") or {}
    name = scheduler.get("name") or default_scheduler_name(namespace, release)
    return {**spec, "schedulerName": name}


def _boot_flag(values: dict[str, Any]) -> list[str]:
    """With power saving, `slurmd -b`: a resumed node must report a boot after Slurm asked for
    it, and a container's uptime is its host's (slurmctld would wait for the boot forever)."""
    return ["-b"] if power_saving(values) is not None else []


def _pod_spec(release: str, namespace: str, definition: dict[str, Any],
              values: dict[str, Any], cgroups: bool) -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": definition.get("terminationGracePeriodSeconds", _GRACE),
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
    }
    for key in ("dnsPolicy", "dnsConfig", "priorityClassName", "hostNetwork"):
        if definition.get(key) is not None:
            spec[key] = definition[key]
    spec["containers"] = [
        _slurmd_container(release, definition, values, cgroups),
        *user_containers(definition, "containers"),
    ]
    if definition.get("initContainers"):
        spec["initContainers"] = user_containers(definition, "initContainers")
    spec = with_compute_search(with_munge(spec, values), release, namespace, values)
    spec["volumes"] = _volumes(release, definition, values)
    for key in ("nodeSelector", "affinity", "tolerations"):
        if definition.get(key):
            spec[key] = definition[key]
    if values.get("imagePullSecrets"):
        spec["imagePullSecrets"] = values["imagePullSecrets"]
    return with_pyxis(spec, release, values)


def _slurmd_container(release: str, definition: dict[str, Any], values: dict[str, Any],
                      cgroups: bool) -> dict[str, Any]:  # fmt: skip
    compute = values.get("compute") or {}
    ports = [{"name": "slurmd", "containerPort": SLURMD_PORT, "protocol": "TCP"}]
    # The Pod name is the Slurm node name (<release>-<nodeset>-<ordinal>).
    args = ["slurmd", "-D", *_boot_flag(values), "-N", "$(POD_NAME)"]
    if compute_ssh_enabled(values):
        ports.append({"name": "sshd", "containerPort": SSHD_PORT, "protocol": "TCP"})
        args = ["sh", "-c", sshd_beside(args, values)]
    container: dict[str, Any] = {
        "name": SLURMD_CONTAINER,
        "image": compute_image(values, definition),
        "args": args,
        "env": [
            field_env("POD_NAME", "metadata.name"),
            field_env("NODE_NAME", "spec.nodeName"),
            field_env("POD_IP", "status.podIP"),
            *(definition.get("env") or []),
        ],
        "ports": ports,
        **probes.slurmd(),
        "resources": definition.get("resources") or {},
        "volumeMounts": _volume_mounts(release, definition, values),
    }
    if pull := (definition.get("image") or {}).get("pullPolicy"):
        container["imagePullPolicy"] = pull
    container["securityContext"] = {
        # slurmd runs as root: it starts each job as its user (CONTRACT-32).
        "runAsUser": 0,
        "runAsGroup": 0,
        **({"privileged": True} if cgroups else {}),
        **(compute.get("securityContext") or {}),
        **(definition.get("securityContext") or {}),
    }
    return container


def field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _volume_mounts(
    release: str, definition: dict[str, Any], values: dict[str, Any]
) -> list[dict[str, Any]]:
    compute = values.get("compute") or {}
    slurmd = (values.get("slurmConfig") or {}).get("slurmd") or {}
    mounts = [
        {"name": "slurm-conf", "mountPath": CONF_MOUNT, "readOnly": True},
        munge_socket_mount(),
    ]
    for kind in KINDS:
        if script_config_map(slurmd, kind, release):
            mounts.append(
                {"name": f"slurm-{kind}", "mountPath": f"{CONF_MOUNT}/{kind}.d", "readOnly": True}
            )
    mounts += s6_volume_mounts(s6_services(values))
    mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    if compute_ssh_enabled(values):
        mounts.append(sshd_mount())  # no root keys: PermitRootLogin no (compile/sshd.py)
    for mount in compute.get("mounts") or []:
        mounts.append({"name": pvc_volume_name(mount["pvc"]), "mountPath": mount["name"]})
    return [*mounts, *(definition.get("volumeMounts") or [])]


def _volumes(
    release: str, definition: dict[str, Any], values: dict[str, Any]
) -> list[dict[str, Any]]:
    compute = values.get("compute") or {}
    slurmd = (values.get("slurmConfig") or {}).get("slurmd") or {}
    volumes: list[dict[str, Any]] = [
        {"name": "slurm-conf", "configMap": {"name": slurm_conf_map_name(release)}},
        *munge_volumes(release),
    ]
    for kind in KINDS:
        name = script_config_map(slurmd, kind, release)
        if name:
            volumes.append(
                {"name": f"slurm-{kind}", "configMap": {"name": name, "defaultMode": 0o755}}
            )
    if services := s6_services(values):
        volumes.append(s6_volume(release, services))
    volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory"}})
    if compute_ssh_enabled(values):
        volumes.append(sshd_volume())
    for mount in compute.get("mounts") or []:
        volumes.append(
            {
                "name": pvc_volume_name(mount["pvc"]),
                "persistentVolumeClaim": {"claimName": mount["pvc"]},
            }
        )
    return [*volumes, *(definition.get("volumes") or [])]


def script_files(source: str | dict[str, str], kind: str) -> dict[str, str]:
    """slurmd.prolog may be one script or a mapping of file name -> script."""
    key = f"slurmConfig.slurmd.{kind}"
    if isinstance(source, str):
        return {f"00-{kind}.sh": write_script(key, source)}
    return {one_line(f"the {kind} ConfigMap", f"a file name of {key}", str(k)):
            write_script(f"{key}.{k}", str(v)) for k, v in source.items()}  # fmt: skip


def pvc_volume_name(pvc: str) -> str:
    """SUNK's rule: underscores become dashes, lowercased."""
    return re.sub(r"_", "-", pvc).lower()


def _strings(mapping: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in (mapping or {}).items()}
