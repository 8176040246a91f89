"""slurmConfig.reservations as a values file writes them: the keys of an entry, and each value
read as Slurm would take it (times, durations, names, flags), checked in the file that wrote
it. What needs the merged values is checked when they are compiled (compile/reservations.py).
"""

from __future__ import annotations

import datetime
import re
import reprlib
from typing import Any

import hostlist

from reconciler import hostlists
from reconciler.config.limits import MAX_NODES, ValueBudget
from reconciler.config.value_types import Key, Table, check_table, wrong
from reconciler.config.yamlfile import KeyPath, YamlFile, lookup
from reconciler.errors import ConfigTypeError
from reconciler.suggest import did_you_mean

RESERVATION: Table = {
    "nodes": Key("string", "a hostlist of Slurm nodes"),
    "nodeDefinition": Key("string", "all nodes of a node definition"),
    "startTime": Key("time", "when it starts: a time, or now"),
    "endTime": Key("time", "when it ends"),
    "duration": Key("string or integer", "how long (minutes, or Slurm's [days-]hours:minutes)"),
    "recurring": Key("string", "HOURLY, DAILY, WEEKDAY, WEEKEND or WEEKLY"),
    "users": Key("string or list of strings", "who may use it"),
    "accounts": Key("string or list of strings", "which accounts may use it"),
    "flags": Key("string or list of strings", "Slurm reservation flags"),
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
_WHOLE = "reserve a node definition whole with nodeDefinition, which names no hostlist"


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


def _listed(items: object) -> list[Any]:
    """A list's items; nothing for None (the types table refused anything else before)."""
    return list(items) if isinstance(items, (list, tuple)) else []


def reservation_names(value: object) -> tuple[str, ...]:
    """Users or accounts: a list, or one comma-separated string."""
    items = value.split(",") if isinstance(value, str) else value
    names = tuple(str(item).strip() for item in _listed(items))
    for name in names:
        if not _SLURM_NAME.fullmatch(name):
            raise ReservationValueError(
                f"{name!r} is not a Slurm user or account name",
                hint="letters, digits, `_ . -`, not starting with `_ . -`",
            )
    return names


def reservation_nodes(value: object) -> tuple[str, ...]:
    """A Slurm hostlist (slurm-gpu-[0-3],slurm-cpu-0), expanded; counted first (hostlists)."""
    shown = reprlib.repr(value)  # a hostile value may be megabytes long
    try:
        names = tuple(hostlists.expand(str(value).strip()))
    except hostlists.HostlistTooLarge as error:
        raise ReservationValueError(f"the hostlist {error}", hint=_WHOLE) from None
    except hostlist.BadHostlist as error:
        raise ReservationValueError(
            f"{shown} is not a Slurm hostlist ({error})", hint="e.g. slurm-gpu-small-[0-1]"
        ) from None
    if not names or not all(_SLURM_NAME.fullmatch(name) for name in names):
        raise ReservationValueError(
            f"{shown} is not a Slurm hostlist", hint="e.g. slurm-gpu-small-[0-1],slurm-cpu-0"
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
    close = did_you_mean(flag, RESERVATION_FLAGS)
    raise ReservationValueError(
        f"unknown reservation flag {value!r}" + (f"; {close}" if close else ""),
        hint="flags are " + ", ".join(sorted(RESERVATION_FLAGS)),
    )


def reservation_flags(value: object) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    return tuple(reservation_flag(item) for item in _listed(items))


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


def check_reservations(doc: YamlFile, text: str, budget: ValueBudget) -> None:
    """Each entry of slurmConfig.reservations in one file: its name, keys, types and values.
    What needs the merged values (one of users/accounts, nodes xor nodeDefinition, ...) is
    checked when they are compiled (compile/reservations.py). `budget` is the repo's: the
    nodes of all reservations of all files are capped together."""
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
            wrong(doc, path, "mapping (a reservation)", entry)
        for key in entry:
            if key not in RESERVATION:
                close = did_you_mean(str(key), RESERVATION)
                raise ConfigTypeError(
                    f"unknown reservation key {key!r}" + (f"; {close}" if close else ""),
                    where=doc.location((*path, key)),
                    hint="reservation keys are " + ", ".join(RESERVATION),
                )
        check_table(doc, path, entry, RESERVATION)
        for key, parse in _RESERVATION_VALUES.items():
            if entry.get(key) is not None:
                _check_reservation_value(doc, text, (*path, key), entry[key], parse)
        if entry.get("nodes") is not None:
            _spend_names(doc, (*path, "nodes"), entry["nodes"], budget)


def _spend_names(doc: YamlFile, path: KeyPath, nodes: Any, budget: ValueBudget) -> None:
    """Each hostlist is capped on its own; ten thousand reservations under the cap would
    still make (and compile would keep) hundreds of millions of names."""
    budget.names_left -= hostlists.count(str(nodes).strip())
    if budget.names_left < 0:
        raise ConfigTypeError(
            f"the reservations of the config repo name more than {MAX_NODES:,} nodes in all "
            "(counted up to this one)",
            where=doc.location(path),
            hint=_WHOLE,
        )


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
