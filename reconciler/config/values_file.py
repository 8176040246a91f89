"""SUNK-shaped values and layer files, checked where they are written, against the keys'
declarations (config/keys.py).

Checking each file before merging means a type error always names the file and line that
wrote the bad value. Every key we do not read gets a warning that names it (a SUNK values
file's directoryService, say, or a typo), as does an unknown key inside a node definition.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler import wellknown as wk
from reconciler.config.cluster_labels import check_cluster_labels
from reconciler.config.compute_ssh import check_compute_ssh
from reconciler.config.control_plane import unused_key_paths
from reconciler.config.defaults import MAX_UNIX_ID
from reconciler.config.directory import check_directory_service, unknown_directory_keys
from reconciler.config.keys import (
    ALL_VALUES,
    MOUNT,
    NODE_DEFINITION,
    S6_SCRIPT,
    S6_TYPES,
    UID_HINT,
)
from reconciler.config.lua_plugins import check_lua_plugins
from reconciler.config.pods import check_pod_values
from reconciler.config.release_key import check_release_key
from reconciler.config.topology import check_topology
from reconciler.config.value_types import check_table, wrong
from reconciler.config.yamlfile import KeyPath, YamlFile, lookup
from reconciler.errors import ConfigTypeError, Warning_
from reconciler.suggest import did_you_mean

# An s6-rc service name that is also a ConfigMap key and a file name; s6-rc reserves s6rc-*,
# and s6-overlay's own bundles are base, user and user2.
S6_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
S6_RESERVED = ("base", "user", "user2")


def check_values_file(doc: YamlFile, warnings: list[Warning_]) -> None:
    """Type-check a values.yaml / values.d file in place; raise on the first wrong type."""
    if not isinstance(doc.data, dict):
        wrong(doc, (), "mapping", doc.data)
    check_table(doc, (), doc.data, ALL_VALUES)
    compute = doc.data.get("compute") or {}
    for index, mount in enumerate(compute.get("mounts") or []):
        check_table(doc, ("compute", "mounts", index), mount, MOUNT)
    for name, script in (compute.get("s6") or {}).items():
        _check_s6(doc, ("compute", "s6", name), script)
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
    _check_labels(doc, path, definition.get("labels"))
    for key in definition:
        if key not in NODE_DEFINITION:
            warnings.append(Warning_(str(doc.location((*path, key))), _unknown_key_text(key)))


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
    if not script.get("type"):
        raise ConfigTypeError(
            f"s6 script has no `type` ({', '.join(S6_TYPES)})", where=doc.location(path)
        )
    if not script.get("script"):
        raise ConfigTypeError("s6 script has no `script`", where=doc.location(path))


_POD_POLICY: KeyPath = ("scheduler", "podPolicy")
_ALLOWED_USER_IDS: KeyPath = (*_POD_POLICY, "allowedUserIds")


def _check_pod_policy(doc: YamlFile) -> None:
    """scheduler.podPolicy.allowedUserIds (the shipped pod-user-id-allowed) maps a namespace
    (or "*", any namespace without an entry) to the uids its Pods may run as (null drops a
    namespace an earlier file listed). defaultUserId and maxPriority are ranges of their Key."""
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
            hint=UID_HINT,
        )


def _pod_policy_namespace_keys(data: Any) -> set[str]:
    """The namespaces under allowedUserIds are the user's names, not keys to warn about."""
    allowed, found = lookup(data, list(_ALLOWED_USER_IDS))
    if not found or not isinstance(allowed, dict):
        return set()
    return {".".join(map(str, (*_ALLOWED_USER_IDS, namespace))) for namespace in allowed}
