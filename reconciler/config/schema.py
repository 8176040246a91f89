"""The value types we read from SUNK-shaped values and layer files, checked where they are written.

Checking each file before merging means a type error always names the file and line that
wrote the bad value. Every key we do not read gets a warning that names it (a SUNK values
file's directoryService, say, or a typo), as does an unknown key inside a node definition.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler import wellknown as wk
from reconciler.config.cluster_labels import CLUSTER_LABEL_VALUES, check_cluster_labels
from reconciler.config.compute_ssh import COMPUTE_SSH_VALUES, check_compute_ssh
from reconciler.config.control_plane import (
    CONTROL_PLANE_VALUES,
    check_control_plane,
    unused_key_paths,
)
from reconciler.config.defaults import MAX_UNIX_ID
from reconciler.config.directory import (
    DIRECTORY_VALUES,
    check_directory_service,
    unknown_directory_keys,
)
from reconciler.config.limits import MAX_NODES
from reconciler.config.lua_plugins import LUA_VALUES, check_lua_plugins
from reconciler.config.pods import POD_VALUES, check_pod_values
from reconciler.config.release_key import RELEASE_VALUES, check_release_key
from reconciler.config.topology import TOPOLOGY_VALUES, check_topology
from reconciler.config.value_types import check_table, wrong
from reconciler.config.yamlfile import KeyPath, YamlFile, lookup
from reconciler.errors import ConfigTypeError, Warning_
from reconciler.suggest import did_you_mean

NODE_DEFINITION: dict[str, str] = {
    "enabled": "boolean",
    "replicas": "integer",
    "maxReplicas": "integer",
    "minReplicas": "integer",
    "definitions": "list of strings",
    "features": "list of strings",
    "image": "mapping",
    "image.repository": "string",
    "image.tag": "string",
    "image.pullPolicy": "string",
    "env": "list of mappings",
    "gresGpu": "string",
    "memSpecLimit": "integer",
    "resources": "mapping",
    "resources.limits": "mapping",
    "resources.requests": "mapping",
    "affinity": "mapping",
    "tolerations": "list of mappings",
    "nodeSelector": "mapping",
    "labels": "mapping",
    "annotations": "mapping",
    "volumes": "list of mappings",
    "volumeMounts": "list of mappings",
    "containers": "list of mappings",
    "initContainers": "list of mappings",
    "terminationGracePeriodSeconds": "integer",
    "priorityClassName": "string",
    "dnsPolicy": "string",
    "dnsConfig": "mapping",
    "securityContext": "mapping",
    "hostNetwork": "boolean",
}

# The keys of a node definition that count Slurm nodes (each capped at MAX_NODES).
NODE_COUNTS = ("replicas", "maxReplicas", "minReplicas")

VALUES: dict[str, str] = {
    "slurmConfig": "mapping",
    "slurmConfig.slurmCtld": "mapping",
    "slurmConfig.slurmCtld.timeout": "integer",
    "slurmConfig.slurmCtld.procTrackType": "string",
    "slurmConfig.slurmCtld.prockTrackType": "string",
    "slurmConfig.slurmCtld.taskPlugin": "string",
    "slurmConfig.slurmd": "mapping",
    "slurmConfig.slurmd.timeout": "integer",
    "slurmConfig.slurmd.suspendTime": "string or integer",
    "slurmConfig.slurmd.suspendTimeout": "integer",
    "slurmConfig.slurmd.resumeTimeout": "integer",
    "slurmConfig.slurmd.prologConfigMap": "string",
    "slurmConfig.slurmd.prologConfigmap": "string",
    "slurmConfig.slurmd.epilogConfigMap": "string",
    "slurmConfig.slurmd.prolog": "string or mapping",
    "slurmConfig.slurmd.epilog": "string or mapping",
    "slurmConfig.inactiveLimit": "integer",
    "slurmConfig.killWait": "integer",
    "slurmConfig.waitTime": "integer",
    "slurmConfig.selectTypeParameters": "string",
    "slurmConfig.defMemPerCPU": "integer",
    "slurmConfig.extraConfig": "string",
    "slurmConfig.cgroupConfig": "string",
    "slurmConfig.gresAutoDetect": "string",
    "slurmConfig.gresConfig": "string",
    "slurmConfig.reservations": "mapping",
    "slurmConfig.accounting": "mapping",
    "compute": "mapping",
    "compute.nodes": "mapping",
    "compute.partitions": "string",
    "compute.mounts": "list of mappings",
    "compute.s6": "mapping",
    "compute.pyxis": "mapping",
    "compute.pyxis.enabled": "boolean",
    "compute.pyxis.mountHome": "boolean",
    "compute.pyxis.required": "boolean",
    "compute.pyxis.pluginPath": "string",
    "compute.pyxis.credentialsSecret": "string",
    "compute.pyxis.seccompProfile": "string",
    "compute.securityContext": "mapping",
    "scheduler": "mapping",
    "scheduler.enabled": "boolean",
    "scheduler.name": "string",
    "scheduler.scope": "mapping",
    "scheduler.scope.type": "string",
    "scheduler.scope.namespaces": "string or list of strings",
    "scheduler.killWait": "integer",
    "scheduler.gangFailurePolicy": "string",
    "scheduler.binPackPartitions": "string or list of strings",
    "scheduler.podPolicy": "mapping",
    "scheduler.podPolicy.allowedUserIds": "mapping",
    "scheduler.podPolicy.defaultUserId": "integer",
    "scheduler.podPolicy.maxPriority": "integer",
    "imagePullSecrets": "list of mappings",
}

ALL_VALUES: dict[str, str] = {**VALUES, **CONTROL_PLANE_VALUES, **DIRECTORY_VALUES}
ALL_VALUES.update(TOPOLOGY_VALUES)  # compute.topology (config/topology.py)
ALL_VALUES.update(RELEASE_VALUES)  # slurmConfig.release (config/release_key.py)
ALL_VALUES.update(POD_VALUES)  # image, sidecars, clusterDomain (config/pods.py)
ALL_VALUES.update(CLUSTER_LABEL_VALUES)  # compute.clusterLabels (config/cluster_labels.py)
ALL_VALUES.update(LUA_VALUES)  # slurmConfig.luaPlugins (config/lua_plugins.py)
ALL_VALUES.update(COMPUTE_SSH_VALUES)  # compute.ssh (config/compute_ssh.py)
MOUNT: dict[str, str] = {"name": "string", "pvc": "string"}
S6_SCRIPT: dict[str, str] = {"type": "string", "script": "string"}
S6_TYPES = ("oneshot", "longrun")
# An s6-rc service name that is also a ConfigMap key and a file name; s6-rc reserves s6rc-*,
# and s6-overlay's own bundles are base, user and user2.
S6_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
S6_RESERVED = ("base", "user", "user2")
SCOPE_TYPES = ("cluster", "namespace")


def check_values_file(doc: YamlFile, warnings: list[Warning_]) -> None:
    """Type-check a values.yaml / values.d file in place; raise on the first wrong type."""
    if not isinstance(doc.data, dict):
        wrong(doc, (), "mapping", doc.data)
    check_table(doc, (), doc.data, ALL_VALUES)
    check_control_plane(doc)
    compute = doc.data.get("compute") or {}
    for index, mount in enumerate(compute.get("mounts") or []):
        check_table(doc, ("compute", "mounts", index), mount, MOUNT)
    for name, script in (compute.get("s6") or {}).items():
        _check_s6(doc, ("compute", "s6", name), script)
    _check_scope(doc)
    _check_pod_policy(doc)
    check_directory_service(doc)
    check_topology(doc)
    check_release_key(doc)
    check_pod_values(doc)
    check_cluster_labels(doc)
    check_lua_plugins(doc)
    check_compute_ssh(doc)
    for name, definition in (compute.get("nodes") or {}).items():
        _check_name(doc, ("compute", "nodes", name), name)
        check_node_definition(doc, ("compute", "nodes", name), definition, warnings)
    known = set(ALL_VALUES) | _pod_policy_namespace_keys(doc.data)
    for path, why in [*unused_key_paths(doc.data, known), *unknown_directory_keys(doc.data)]:
        warnings.append(Warning_(str(doc.location(path)), why))


def check_layer_file(doc: YamlFile, warnings: list[Warning_]) -> None:
    """A compute-defs file: a mapping of layer name -> node definition."""
    if not isinstance(doc.data, dict):
        wrong(doc, (), "mapping of layer name to node definition", doc.data)
    for name, definition in doc.data.items():
        _check_name(doc, (name,), name)
        check_node_definition(doc, (name,), definition, warnings)


def _check_name(doc: YamlFile, path: KeyPath, name: Any) -> None:
    """YAML reads `off:`, `yes:` or `1:` as a bool or a number, not a name."""
    if not isinstance(name, str):
        raise ConfigTypeError(
            f"node definition name {name!r} is not a string",
            where=doc.location(path),
            hint="quote the name: YAML reads on, off, yes, no and numbers unquoted as "
            "booleans and numbers",
        )


def check_node_definition(
    doc: YamlFile, path: KeyPath, definition: Any, warnings: list[Warning_]
) -> None:
    if definition is None:
        return
    if not isinstance(definition, dict):
        wrong(doc, path, "mapping (a node definition)", definition)
    check_table(doc, path, definition, NODE_DEFINITION)
    for key in NODE_COUNTS:
        _check_node_count(doc, (*path, key), definition.get(key))
    _check_labels(doc, path, definition.get("labels"))
    for key in definition:
        if key not in NODE_DEFINITION:
            warnings.append(Warning_(str(doc.location((*path, key))), _unknown_key_text(key)))


def _check_node_count(doc: YamlFile, path: KeyPath, count: Any) -> None:
    """Each count of Slurm nodes, where it is written: one line of values must not make
    millions of node names (all node sets together are capped when compiled)."""
    if not isinstance(count, int) or isinstance(count, bool):
        return  # not set, or the type table said so
    if count < 0:
        raise ConfigTypeError(
            f"{path[-1]} must be 0 or more, got {count}", where=doc.location(path)
        )
    if count > MAX_NODES:
        raise ConfigTypeError(
            f"{path[-1]} {count:,} is past the {MAX_NODES:,} Slurm nodes a config may declare",
            where=doc.location(path),
            hint="the largest Slurm clusters have about 10,000 nodes (Frontier: 9,408); "
            f"{MAX_NODES:,} is the limit for all node sets together",
        )


def _check_labels(doc: YamlFile, path: KeyPath, labels: Any) -> None:
    """A Pod label we own would take the Pods out of our live state (managed-by, release),
    or out of their StatefulSet's selector: refused, not dropped, so nothing written is lost."""
    for key in labels if isinstance(labels, dict) else ():
        if key in wk.OWNED_POD_LABELS or str(key).startswith(f"{wk.DOMAIN}/"):
            raise ConfigTypeError(
                f"node definition {path[-1]!r}: label {key!r} is one the reconciler sets "
                "(ownership or selectors); a node definition cannot set it",
                where=doc.location((*path, "labels", key)),
                hint="use a label key of your own, e.g. example.com/team",
            )


def _unknown_key_text(key: str) -> str:
    close = did_you_mean(key, [k for k in NODE_DEFINITION if "." not in k])
    text = f"unknown node definition key {key!r} is ignored"
    return text + (f"; {close}" if close else "")


def _check_s6(doc: YamlFile, path: KeyPath, script: Any) -> None:
    name = path[-1]
    reserved = name in S6_RESERVED or str(name).startswith("s6rc-")
    if not isinstance(name, str) or not S6_NAME.fullmatch(name) or reserved:
        raise ConfigTypeError(
            f"{name!r} cannot name an s6 service",
            where=doc.location(path),
            hint="letters, digits, `_ -`, starting with a letter or digit, at most 63; not "
            f"{', '.join(S6_RESERVED)} or s6rc-* (s6-overlay's and s6-rc's own)",
        )
    if not isinstance(script, dict):
        wrong(doc, path, "mapping with `type` and `script`", script)
    check_table(doc, path, script, S6_SCRIPT)
    if script.get("type") not in S6_TYPES:
        raise ConfigTypeError(
            f"s6 script type must be one of {', '.join(S6_TYPES)}, got {script.get('type')!r}",
            where=doc.location((*path, "type")),
        )
    if not script.get("script"):
        raise ConfigTypeError("s6 script has no `script`", where=doc.location(path))


def _check_scope(doc: YamlFile) -> None:
    for path, allowed in (
        (("scheduler", "scope", "type"), SCOPE_TYPES),
        (("scheduler", "gangFailurePolicy"), wk.GANG_FAILURE_POLICIES),
    ):
        value, found = lookup(doc.data, list(path))
        if found and value not in allowed:
            raise ConfigTypeError(
                f"{'.'.join(path)} must be one of {', '.join(allowed)}, got {value!r}",
                where=doc.location(path),
            )


_POD_POLICY: KeyPath = ("scheduler", "podPolicy")
_ALLOWED_USER_IDS: KeyPath = (*_POD_POLICY, "allowedUserIds")


def _check_pod_policy(doc: YamlFile) -> None:
    """scheduler.podPolicy (the shipped pod-user-id-allowed and pod-priority-at-most-max):
    allowedUserIds maps a namespace (or "*", any namespace without an entry) to the uids its
    Pods may run as (null drops a namespace an earlier file listed); defaultUserId is one uid;
    maxPriority is 1 or more."""
    priority, found = lookup(doc.data, ["scheduler", "podPolicy", "maxPriority"])
    if found and isinstance(priority, int) and priority < 1:
        raise ConfigTypeError(
            f"scheduler.podPolicy.maxPriority must be 1 or more, got {priority}",
            where=doc.location(("scheduler", "podPolicy", "maxPriority")),
            hint="Slurm holds a job of priority 0, so admission refuses it in any case",
        )
    default_user, found = lookup(doc.data, [*_POD_POLICY, "defaultUserId"])
    if found and isinstance(default_user, int):
        _check_uid(doc, (*_POD_POLICY, "defaultUserId"), default_user)
    allowed, found = lookup(doc.data, list(_ALLOWED_USER_IDS))
    if not found or not isinstance(allowed, dict):  # not a mapping: the type table said so
        return
    for namespace, uids in allowed.items():
        path: KeyPath = (*_ALLOWED_USER_IDS, namespace)
        if not isinstance(namespace, str):
            raise ConfigTypeError(
                f"namespace {namespace!r} is not a string", where=doc.location(path),
                hint="quote it: YAML reads on, off, yes, no and numbers unquoted as booleans "
                "and numbers",
            )  # fmt: skip
        if uids is None:
            continue
        if not isinstance(uids, list):
            wrong(doc, path, "list of integers (user ids)", uids)
        for index, uid in enumerate(uids):
            if isinstance(uid, bool) or not isinstance(uid, int):
                wrong(doc, (*path, index), "integer (a user id)", uid)
            _check_uid(doc, (*path, index), uid)


def _check_uid(doc: YamlFile, path: KeyPath, uid: int) -> None:
    if not 0 <= uid <= MAX_UNIX_ID:
        raise ConfigTypeError(
            f"a user id must be 0 or more and at most {MAX_UNIX_ID}, got {uid}",
            where=doc.location(path),
            hint="Slurm reads 4294967294 and 4294967295 as NO_VAL and INFINITE",
        )


def _pod_policy_namespace_keys(data: Any) -> set[str]:
    """The namespaces under allowedUserIds are the user's names, not keys to warn about."""
    allowed, found = lookup(data, list(_ALLOWED_USER_IDS))
    if not found or not isinstance(allowed, dict):
        return set()
    return {".".join(map(str, (*_ALLOWED_USER_IDS, namespace))) for namespace in allowed}
