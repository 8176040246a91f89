"""The value types we read from SUNK-shaped values and layer files, checked where they are written.

Checking each file before merging means a type error always names the file and line that
wrote the bad value. Every key we do not read gets a warning that names it (a SUNK values
file's directoryService, say, or a typo), as does an unknown key inside a node definition.
"""

from __future__ import annotations

import datetime
import difflib
import re
from dataclasses import dataclass
from typing import Any

import hostlist

from reconciler import wellknown as wk
from reconciler.config.control_plane import (
    CONTROL_PLANE_VALUES,
    check_control_plane,
    unused_key_paths,
)
from reconciler.config.directory import (
    DIRECTORY_ENTRY,
    DIRECTORY_VALUES,
    check_directory_service,
    unknown_directory_keys,
)
from reconciler.config.yamlfile import KeyPath, YamlFile, format_path, lookup
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
    "time": (str, datetime.date),  # YAML reads an unquoted 2030-01-01T10:00:00Z as a datetime
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
    "scheduler.gangFailurePolicy": "string",
    "scheduler.binPackPartitions": "string or list of strings",
    "scheduler.podPolicy": "mapping",
    "scheduler.podPolicy.allowedUserIds": "mapping",
    "scheduler.podPolicy.maxPriority": "integer",
    "imagePullSecrets": "list of mappings",
}

ALL_VALUES: dict[str, str] = {**VALUES, **CONTROL_PLANE_VALUES, **DIRECTORY_VALUES}
MOUNT: dict[str, str] = {"name": "string", "pvc": "string"}
S6_SCRIPT: dict[str, str] = {"type": "string", "script": "string"}
S6_TYPES = ("oneshot", "longrun")
# An s6-rc service name that is also a ConfigMap key and a file name; s6-rc reserves s6rc-*,
# and s6-overlay's own bundles are base, user and user2.
S6_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
S6_RESERVED = ("base", "user", "user2")
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
    _check_table(doc, (), doc.data, ALL_VALUES)
    check_control_plane(doc)
    compute = doc.data.get("compute") or {}
    for index, mount in enumerate(compute.get("mounts") or []):
        _check_table(doc, ("compute", "mounts", index), mount, MOUNT)
    for name, script in (compute.get("s6") or {}).items():
        _check_s6(doc, ("compute", "s6", name), script)
    _check_scope(doc)
    _check_pod_policy(doc)
    directories, _ = lookup(doc.data, ["directoryService", "directories"])
    for index, entry in enumerate(directories if isinstance(directories, list) else []):
        _check_table(doc, ("directoryService", "directories", index), entry, DIRECTORY_ENTRY)
    check_directory_service(doc)
    for name, definition in (compute.get("nodes") or {}).items():
        _check_name(doc, ("compute", "nodes", name), name)
        check_node_definition(doc, ("compute", "nodes", name), definition, warnings)
    known = set(ALL_VALUES) | _pod_policy_namespace_keys(doc.data)
    for path, why in [*unused_key_paths(doc.data, known), *unknown_directory_keys(doc.data)]:
        warnings.append(Warning_(str(doc.location(path)), why))


def check_layer_file(doc: YamlFile, warnings: list[Warning_]) -> None:
    """A compute-defs file: a mapping of layer name -> node definition."""
    if not isinstance(doc.data, dict):
        _wrong(doc, (), "mapping of layer name to node definition", doc.data)
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
        value, found = lookup(data, dotted.split("."))
        if found and value is not None:
            _check_type(doc, (*base, *dotted.split(".")), value, expected)


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


_ALLOWED_USER_IDS: KeyPath = ("scheduler", "podPolicy", "allowedUserIds")


def _check_pod_policy(doc: YamlFile) -> None:
    """scheduler.podPolicy (the shipped pod-user-id-allowed and pod-priority-at-most-max):
    allowedUserIds maps a namespace to the uids its Pods may name (null drops a namespace an
    earlier file listed); maxPriority is 1 or more."""
    priority, found = lookup(doc.data, ["scheduler", "podPolicy", "maxPriority"])
    if found and isinstance(priority, int) and priority < 1:
        raise ConfigTypeError(
            f"scheduler.podPolicy.maxPriority must be 1 or more, got {priority}",
            where=doc.location(("scheduler", "podPolicy", "maxPriority")),
            hint="Slurm holds a job of priority 0, so admission refuses it in any case",
        )
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
            _wrong(doc, path, "list of integers (user ids)", uids)
        for index, uid in enumerate(uids):
            if isinstance(uid, bool) or not isinstance(uid, int):
                _wrong(doc, (*path, index), "integer (a user id)", uid)
            if uid < 0:
                raise ConfigTypeError(
                    f"a user id must be 0 or more, got {uid}", where=doc.location((*path, index))
                )


def _pod_policy_namespace_keys(data: Any) -> set[str]:
    """The namespaces under allowedUserIds are the user's names, not keys to warn about."""
    allowed, found = lookup(data, list(_ALLOWED_USER_IDS))
    if not found or not isinstance(allowed, dict):
        return set()
    return {".".join((*_ALLOWED_USER_IDS, str(namespace))) for namespace in allowed}


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


# ---- slurmConfig.reservations -------------------------------------------------------------

RESERVATION: dict[str, str] = {
    "nodes": "string",
    "nodeDefinition": "string",
    "startTime": "time",
    "endTime": "time",
    "duration": "string or integer",
    "recurring": "string",
    "users": "string or list of strings",
    "accounts": "string or list of strings",
    "flags": "string or list of strings",
}
# The flags a reservation in git may carry, spelled as scontrol takes them (Slurm 22.05).
RESERVATION_FLAGS = frozenset(
    {"FLEX", "IGNORE_JOBS", "MAGNETIC", "MAINT", "NO_HOLD_JOBS_AFTER", "OVERLAP", "STATIC_ALLOC"}
)
# `recurring:` values (Slurm flags too), and the seconds between two starts of each.
RESERVATION_RECURRENCE: dict[str, int] = {
    "HOURLY": 3600, "DAILY": 86400, "WEEKDAY": 86400, "WEEKEND": 86400, "WEEKLY": 7 * 86400,
}  # fmt: skip
_NODES_ONLY = "a reservation here reserves nodes, not licenses or burst buffers"
_NAMES_NODES = "it needs a node count, and a reservation here names its nodes"
_UNSUPPORTED_FLAGS = {
    "PURGE_COMP": "slurmrestd 22.05 does not report it, so no plan could tell whether it is set",
    "TIME_FLOAT": "its start moves with the clock, so it could never match the time in git",
    "ANY_NODES": _NODES_ONLY,
    "LICENSE_ONLY": _NODES_ONLY,
    "PART_NODES": "a reservation here names its nodes (nodes or nodeDefinition), not a partition",
    "REPLACE": _NAMES_NODES,
    "REPLACE_DOWN": _NAMES_NODES,
    "FIRST_CORES": "it needs a core count, which a reservation here does not take",
    "SPEC_NODES": "Slurm sets it itself on every reservation that names its nodes",
}
UNLIMITED_MINUTES = 365 * 24 * 60  # what Slurm 22.05 makes of Duration=UNLIMITED
_SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_DURATION_TEXT = re.compile(r"(?:(\d+)-)?(\d+(?::\d+){0,2})")
_SEXAGESIMAL = re.compile(r"\bduration\s*:\s*\d+:\d")
_TIME_EXAMPLE = "2030-01-01T08:00:00Z"


class ReservationValueError(ValueError):
    """A reservation value that cannot mean anything to Slurm (the schema adds where)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def reservation_time(value: object) -> int:
    """Seconds since the epoch of an ISO 8601 time with a zone (text, or YAML's datetime)."""
    if isinstance(value, datetime.datetime):
        moment = value
    elif isinstance(value, datetime.date):
        raise ReservationValueError(
            f"{value} is a date without a time", hint=f"write a time with a zone: {_TIME_EXAMPLE}"
        )
    else:
        try:
            moment = datetime.datetime.fromisoformat(str(value).strip())
        except ValueError:
            raise ReservationValueError(
                f"{value!r} is not an ISO 8601 time", hint=f"write it like {_TIME_EXAMPLE}"
            ) from None
    if moment.tzinfo is None:
        raise ReservationValueError(
            f"{moment.isoformat()} has no time zone",
            hint=f"add Z (UTC) or an offset such as +02:00 ({moment.isoformat()}Z): a time in "
            "git must name the same moment wherever reconciler runs",
        )
    return int(moment.timestamp())


def reservation_minutes(value: object) -> int:
    """A duration as Slurm reads it: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]], UNLIMITED;
    seconds round up to the next minute, as Slurm does."""
    hint = "minutes (90), HH:MM:SS in quotes ('1:30:00'), D-HH:MM:SS ('2-00:00:00') or UNLIMITED"
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise ReservationValueError(f"duration must be more than 0 minutes, got {value}")
        return value
    text = str(value).strip().upper()
    if text in ("UNLIMITED", "INFINITE"):
        return UNLIMITED_MINUTES
    found = _DURATION_TEXT.fullmatch(text)
    if found is None:
        raise ReservationValueError(f"{value!r} is not a Slurm duration", hint=hint)
    parts = [int(p) for p in found.group(2).split(":")]
    if found.group(1) is not None:  # days-hours[:minutes[:seconds]]
        hours, minutes, seconds = (*parts, 0, 0)[:3]
        total = int(found.group(1)) * 1440 + hours * 60 + minutes
    elif len(parts) == 3:  # hours:minutes:seconds
        total, seconds = parts[0] * 60 + parts[1], parts[2]
    else:  # minutes[:seconds]
        total, seconds = parts[0], (parts[1] if len(parts) == 2 else 0)
    total += 1 if seconds else 0
    if total <= 0:
        raise ReservationValueError(f"duration must be more than 0 minutes, got {value!r}")
    return total


def reservation_names(value: object) -> tuple[str, ...]:
    """Users or accounts: a list, or one comma-separated string."""
    items = value.split(",") if isinstance(value, str) else value
    names = tuple(str(item).strip() for item in items or ())  # type: ignore[union-attr]
    for name in names:
        if not _SLURM_NAME.fullmatch(name):
            raise ReservationValueError(
                f"{name!r} is not a Slurm user or account name",
                hint="letters, digits, `_ . -`, not starting with `_ . -`",
            )
    return names


def reservation_nodes(value: object) -> tuple[str, ...]:
    """A Slurm hostlist (slurm-gpu-[0-3],slurm-cpu-0), expanded."""
    try:
        names = tuple(hostlist.expand_hostlist(str(value).strip()))
    except hostlist.BadHostlist as error:
        raise ReservationValueError(
            f"{value!r} is not a Slurm hostlist ({error})", hint="e.g. slurm-gpu-small-[0-1]"
        ) from None
    if not names or not all(_SLURM_NAME.fullmatch(name) for name in names):
        raise ReservationValueError(
            f"{value!r} is not a Slurm hostlist", hint="e.g. slurm-gpu-small-[0-1],slurm-cpu-0"
        )
    return names


def reservation_flag(value: object) -> str:
    flag = str(value).strip().upper()
    if flag in RESERVATION_FLAGS:
        return flag
    if flag in RESERVATION_RECURRENCE:
        raise ReservationValueError(
            f"{flag} is a recurrence, not a flag", hint=f"write `recurring: {flag}`"
        )
    if flag in _UNSUPPORTED_FLAGS:
        raise ReservationValueError(f"flag {flag} is not supported: {_UNSUPPORTED_FLAGS[flag]}")
    close = difflib.get_close_matches(flag, sorted(RESERVATION_FLAGS), n=1)
    raise ReservationValueError(
        f"unknown reservation flag {value!r}" + (f"; did you mean {close[0]!r}?" if close else ""),
        hint="flags are " + ", ".join(sorted(RESERVATION_FLAGS)),
    )


def reservation_flags(value: object) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    return tuple(reservation_flag(item) for item in items or ())  # type: ignore[union-attr]


def reservation_recurrence(value: object) -> str:
    recurring = str(value).strip().upper()
    if recurring not in RESERVATION_RECURRENCE:
        raise ReservationValueError(
            f"recurring must be one of {', '.join(RESERVATION_RECURRENCE)}, got {value!r}"
        )
    return recurring


def reservation_start(value: object) -> int | None:
    """None for `now` (the moment apply creates it)."""
    if isinstance(value, str) and value.strip().lower() == "now":
        return None
    return reservation_time(value)


_RESERVATION_VALUES = {
    "nodes": reservation_nodes,
    "startTime": reservation_start,
    "endTime": reservation_time,
    "duration": reservation_minutes,
    "recurring": reservation_recurrence,
    "users": reservation_names,
    "accounts": reservation_names,
    "flags": reservation_flags,
}


def check_reservations(doc: YamlFile, text: str) -> None:
    """Each entry of slurmConfig.reservations in one file: its name, keys, types and values.
    What needs the merged values (one of users/accounts, nodes xor nodeDefinition, ...) is
    checked when they are compiled (compile/reservations.py)."""
    reservations, found = lookup(doc.data, ["slurmConfig", "reservations"])
    if not found or not isinstance(reservations, dict):
        return
    for name, entry in reservations.items():
        path: KeyPath = ("slurmConfig", "reservations", name)
        if not isinstance(name, str) or not _SLURM_NAME.fullmatch(name):
            raise ConfigTypeError(
                f"reservation name {name!r} cannot name a Slurm reservation",
                where=doc.location(path),
                hint="letters, digits, `_ . -`, starting with a letter or digit",
            )
        if entry is None:  # null removes a reservation an earlier file declared
            continue
        if not isinstance(entry, dict):
            _wrong(doc, path, "mapping (a reservation)", entry)
        for key in entry:
            if key not in RESERVATION:
                close = difflib.get_close_matches(str(key), list(RESERVATION), n=1)
                raise ConfigTypeError(
                    f"unknown reservation key {key!r}"
                    + (f"; did you mean {close[0]!r}?" if close else ""),
                    where=doc.location((*path, key)),
                    hint="reservation keys are " + ", ".join(RESERVATION),
                )
        _check_table(doc, path, entry, RESERVATION)
        for key, parse in _RESERVATION_VALUES.items():
            if entry.get(key) is not None:
                _check_reservation_value(doc, text, (*path, key), entry[key], parse)


def _check_reservation_value(
    doc: YamlFile, text: str, path: KeyPath, value: Any, parse: Any
) -> None:
    where = doc.location(path)
    if path[-1] == "duration" and isinstance(value, int) and where.line is not None:
        line = text.splitlines()[where.line - 1] if where.line <= len(text.splitlines()) else ""
        if _SEXAGESIMAL.search(line):
            raise ConfigTypeError(
                f"YAML reads an unquoted H:MM:SS as a number in base 60 ({value})",
                where=where,
                hint="quote it: duration: '1:30:00', or give minutes: duration: 90",
            )
    try:
        parse(value)
    except ReservationValueError as error:
        raise ConfigTypeError(str(error), where=where, hint=error.hint) from None
