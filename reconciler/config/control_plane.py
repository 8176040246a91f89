"""The control-plane keys of a SUNK values file (SUNK's "Slurm Workload Manager" page: controller.*,
login.*, plus the accounting, rest and mysql sections), and the report of keys we accept but do not
act on.

Every key a user writes is either used or named in a warning: the tables here list what the
compiler reads; `unused_key_warnings` walks the file and reports the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reconciler.config.yamlfile import KeyPath, YamlFile, lookup
from reconciler.errors import ConfigTypeError
from reconciler.suggest import did_you_mean

_IMAGE = {"image": "mapping", "image.repository": "string", "image.tag": "string",
          "image.pullPolicy": "string"}  # fmt: skip
_POD = {
    **_IMAGE,
    "resources": "mapping",
    "securityContext": "mapping",
    "terminationGracePeriodSeconds": "integer",
    "priorityClassName": "string",
    "nodeSelector": "mapping",
    "tolerations": "list of mappings",
    "affinity": "mapping",
}
_STORAGE = {"size": "string", "storageClassName": "string"}


def _prefixed(prefix: str, table: dict[str, str]) -> dict[str, str]:
    return {f"{prefix}.{key}": kind for key, kind in table.items()}


CONTROL_PLANE_VALUES: dict[str, str] = {
    "nodeSelector": "mapping",
    "nodeSelector.region": "string",
    "controller": "mapping",
    "controller.replicas": "integer",
    **_prefixed("controller", _POD),
    "controller.stateVolume": "mapping",
    **_prefixed("controller.stateVolume", _STORAGE),
    "rest": "mapping",
    "rest.enabled": "boolean",
    "rest.replicas": "integer",
    **_prefixed("rest", _POD),
    "accounting": "mapping",
    "accounting.enabled": "boolean",
    **_prefixed("accounting", _POD),
    "accounting.external": "mapping",
    "accounting.external.host": "string",
    "accounting.external.port": "integer",
    "accounting.database": "mapping",
    "accounting.database.host": "string",
    "accounting.database.port": "integer",
    "accounting.database.name": "string",
    "accounting.database.user": "string",
    "accounting.database.passwordSecret": "string",
    "mysql": "mapping",
    **_prefixed("mysql", _POD),
    "mysql.storage": "mapping",
    **_prefixed("mysql.storage", _STORAGE),
    "login": "mapping",
    "login.enabled": "boolean",
    "login.replicas": "integer",
    **_prefixed("login", _POD),
    "login.service": "mapping",
    "login.service.type": "string",
    "login.service.externalTrafficPolicy": "string",
    "login.service.exposePublicIP": "boolean",
    "login.service.annotations": "mapping",
    "login.authorizedKeysSecret": "string",
    # Sidecars on the login Pods (SUNK's "About SUNK"), as a node definition takes them.
    "login.containers": "list of mappings",
    "login.initContainers": "list of mappings",
}

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
TRAFFIC_POLICIES = ("Cluster", "Local")

# Mappings handed to Kubernetes whole: their inside is Kubernetes', not ours to list.
PASSED_WHOLE = (
    "resources", "securityContext", "nodeSelector", "tolerations", "affinity", "annotations",
    "imagePullSecrets", "compute.nodes", "compute.s6", "compute.mounts", "slurmConfig.reservations",
    "slurmConfig.accounting", "slurmConfig.slurmd.prolog", "slurmConfig.slurmd.epilog",
    "login.service.annotations", "directoryService.directories",
)  # fmt: skip

# Keys of the values table of SUNK's "Slurm Workload Manager" page that this project accepts but
# does not act on, and why.
NOT_ACTED_ON: dict[str, str] = {
    "network": "CoreWeave VPC networking has no equivalent on a generic Kubernetes cluster",
    "login.service.exposePublicIP": "a public IP is a CoreWeave load-balancer feature; set the "
    "provider's annotation in login.service.annotations instead",
}


def check_control_plane(doc: YamlFile) -> None:
    """Value checks beyond types: the ones whose wrong value would fail only in the cluster."""
    for path, allowed in (
        (("login", "service", "type"), SERVICE_TYPES),
        (("login", "service", "externalTrafficPolicy"), TRAFFIC_POLICIES),
    ):
        value, found = lookup(doc.data, path)
        if found and value not in allowed:
            raise ConfigTypeError(
                f"{'.'.join(path)} must be one of {', '.join(allowed)}, got {value!r}",
                where=doc.location(path),
            )
    replicas, found = lookup(doc.data, ("controller", "replicas"))
    if found and replicas not in (0, 1):
        raise ConfigTypeError(
            f"controller.replicas must be 0 or 1, got {replicas!r}",
            where=doc.location(("controller", "replicas")),
            hint="one slurmctld owns the state directory; Kubernetes restarts it when it "
            "fails, so a backup controller is not needed (SUNK's 'About SUNK')",
        )


def unused_key_paths(data: Any, known: set[str]) -> Iterator[tuple[KeyPath, str]]:
    """(path, why) for every key in `data` that no table reads."""
    yield from _walk(data, (), known)


def _walk(data: Any, path: KeyPath, known: set[str]) -> Iterator[tuple[KeyPath, str]]:
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        here = (*path, key)
        dotted = ".".join(str(p) for p in here)
        if dotted in NOT_ACTED_ON:
            yield here, f"{dotted} is accepted but not acted on: {NOT_ACTED_ON[dotted]}"
        elif dotted not in known:
            yield here, _unknown(dotted, known)
        elif not any(dotted == p or dotted.endswith(f".{p}") for p in PASSED_WHOLE):
            yield from _walk(value, here, known)


def _unknown(dotted: str, known: set[str]) -> str:
    parent, _, key = dotted.rpartition(".")
    siblings = [k.rpartition(".")[2] for k in known if k.rpartition(".")[0] == parent]
    close = did_you_mean(key, siblings)
    text = f"{dotted} is not a key this reconciler reads; it is ignored"
    return text + (f"; {close}" if close else "")
