"""The value types we read from SUNK-shaped values and layer files, checked where they are written.

Checking each file before merging means a type error always names the file and line that
wrote the bad value. Keys we do not read are left alone at the top level (a SUNK values file
carries controller, login, directoryService... that belong to other components), but an
unknown key inside a node definition is almost always a typo, so it gets a warning.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from reconciler.config.yamlfile import KeyPath, YamlFile, format_path
from reconciler.errors import ConfigTypeError

# Expected types are written as short names so messages read like the docs.
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "mapping": (dict,),
    "list": (list,),
    "list of strings": (list,),
    "list of mappings": (list,),
    "string or integer": (str, int),
    "string or mapping": (str, dict),
    "string or list of strings": (str, list),
}

NODE_DEFINITION: dict[str, str] = {
    "enabled": "boolean",
    "replicas": "integer",
    "maxReplicas": "integer",
    "definitions": "list of strings",
    "features": "list of strings",
    "image": "mapping",
    "image.repository": "string",
    "image.tag": "string",
    "image.pullPolicy": "string",
    "env": "list of mappings",
    "gresGpu": "string",
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
    "compute": "mapping",
    "compute.nodes": "mapping",
    "compute.partitions": "string",
    "compute.mounts": "list of mappings",
    "compute.s6": "mapping",
    "compute.pyxis": "mapping",
    "compute.pyxis.enabled": "boolean",
    "compute.pyxis.mountHome": "boolean",
    "compute.ssh": "mapping",
    "compute.ssh.enabled": "boolean",
    "compute.securityContext": "mapping",
    "scheduler": "mapping",
    "scheduler.enabled": "boolean",
    "scheduler.name": "string",
    "scheduler.scope": "mapping",
    "scheduler.scope.type": "string",
    "scheduler.scope.namespaces": "string or list of strings",
    "scheduler.killWait": "integer",
    "imagePullSecrets": "list of mappings",
}

MOUNT: dict[str, str] = {"name": "string", "pvc": "string"}
S6_SCRIPT: dict[str, str] = {"type": "string", "script": "string"}
S6_TYPES = ("oneshot", "longrun")
SCOPE_TYPES = ("cluster", "namespace")


@dataclass(frozen=True)
class Warning_:
    """Something suspicious that does not stop the compile (printed on stderr)."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: warning: {self.message}"


def check_values_file(doc: YamlFile, warnings: list[Warning_]) -> None:
    """Type-check a values.yaml / values.d file in place; raise on the first wrong type."""
    if not isinstance(doc.data, dict):
        _wrong(doc, (), "mapping", doc.data)
    _check_table(doc, (), doc.data, VALUES)
    compute = doc.data.get("compute") or {}
    for index, mount in enumerate(compute.get("mounts") or []):
        _check_table(doc, ("compute", "mounts", index), mount, MOUNT)
    for name, script in (compute.get("s6") or {}).items():
        _check_s6(doc, ("compute", "s6", name), script)
    _check_scope(doc)
    for name, definition in (compute.get("nodes") or {}).items():
        check_node_definition(doc, ("compute", "nodes", name), definition, warnings)


def check_layer_file(doc: YamlFile, warnings: list[Warning_]) -> None:
    """A compute-defs file: a mapping of layer name -> node definition."""
    if not isinstance(doc.data, dict):
        _wrong(doc, (), "mapping of layer name to node definition", doc.data)
    for name, definition in doc.data.items():
        check_node_definition(doc, (name,), definition, warnings)


def check_node_definition(
    doc: YamlFile, path: KeyPath, definition: Any, warnings: list[Warning_]
) -> None:
    if definition is None:
        return
    if not isinstance(definition, dict):
        _wrong(doc, path, "mapping (a node definition)", definition)
    _check_table(doc, path, definition, NODE_DEFINITION)
    replicas = definition.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        raise ConfigTypeError(
            f"replicas must be 0 or more, got {replicas}", where=doc.location((*path, "replicas"))
        )
    for key in definition:
        if key not in NODE_DEFINITION:
            warnings.append(Warning_(str(doc.location((*path, key))), _unknown_key_text(key)))


def _unknown_key_text(key: str) -> str:
    close = difflib.get_close_matches(key, [k for k in NODE_DEFINITION if "." not in k], n=1)
    text = f"unknown node definition key {key!r} is ignored"
    return text + (f"; did you mean {close[0]!r}?" if close else "")


def _check_table(doc: YamlFile, base: KeyPath, data: Any, table: dict[str, str]) -> None:
    for dotted, expected in table.items():
        value, found = _lookup(data, dotted.split("."))
        if found and value is not None:
            _check_type(doc, (*base, *dotted.split(".")), value, expected)


def _lookup(data: Any, keys: list[str]) -> tuple[Any, bool]:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None, False
        data = data[key]
    return data, True


def _check_type(doc: YamlFile, path: KeyPath, value: Any, expected: str) -> None:
    types = _TYPES[expected]
    if isinstance(value, bool) and bool not in types:
        _wrong(doc, path, expected, value)
    if not isinstance(value, types):
        _wrong(doc, path, expected, value)
    if expected.endswith("list of strings") and isinstance(value, list):
        for index, item in enumerate(value):
            if not isinstance(item, str):
                _wrong(doc, (*path, index), "string", item)
    if expected == "list of mappings":
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                _wrong(doc, (*path, index), "mapping", item)


def _check_s6(doc: YamlFile, path: KeyPath, script: Any) -> None:
    if not isinstance(script, dict):
        _wrong(doc, path, "mapping with `type` and `script`", script)
    _check_table(doc, path, script, S6_SCRIPT)
    if script.get("type") not in S6_TYPES:
        raise ConfigTypeError(
            f"s6 script type must be one of {', '.join(S6_TYPES)}, got {script.get('type')!r}",
            where=doc.location((*path, "type")),
        )
    if not script.get("script"):
        raise ConfigTypeError("s6 script has no `script`", where=doc.location(path))


def _check_scope(doc: YamlFile) -> None:
    scope_type, found = _lookup(doc.data, ["scheduler", "scope", "type"])
    if found and scope_type not in SCOPE_TYPES:
        raise ConfigTypeError(
            f"scheduler.scope.type must be one of {', '.join(SCOPE_TYPES)}, got {scope_type!r}",
            where=doc.location(("scheduler", "scope", "type")),
        )


def _wrong(doc: YamlFile, path: KeyPath, expected: str, value: Any) -> None:
    hint = None
    if expected == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        hint = f'quote it: "{value}" (YAML reads unquoted {value} as a number)'
    raise ConfigTypeError(
        f"{format_path(path) or 'document'} must be a {expected}, got {_describe(value)}",
        where=doc.location(path),
        hint=hint,
    )


def _describe(value: Any) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "mapping"}
    kind = names.get(type(value), "list" if isinstance(value, list) else type(value).__name__)
    shown = repr(value)
    return f"{kind} {shown if len(shown) <= 40 else shown[:37] + '...'}"
