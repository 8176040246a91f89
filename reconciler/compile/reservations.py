"""slurmConfig.reservations -> the Slurm reservations apply keeps in place (pure).

Each file's entries were checked where they were written (config/reservations.py); what only the
merged values can say is checked here: one of users/accounts, nodes or nodeDefinition, a start,
a duration or an end, and nodes that our slurm.conf declares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import hostlist

from reconciler.config.reservations import (
    reservation_flags,
    reservation_minutes,
    reservation_names,
    reservation_nodes,
    reservation_recurrence,
    reservation_start,
    reservation_time,
)
from reconciler.errors import CompileError, Location
from reconciler.suggest import did_you_mean
from reconciler.wellknown import RESERVATION_NAME_FORMAT

MAX_NAME = 128  # what our scontrol adapter accepts for a name


@dataclass(frozen=True)
class Reservation:
    """A reservation as git declares it; times are seconds since the epoch (UTC)."""

    name: str  # in Slurm: <release>-<key>
    key: str  # in git, under slurmConfig.reservations
    nodes: tuple[str, ...]  # Slurm node names, sorted
    start: int | None  # None: `now`, the moment apply creates it
    end: int | None  # set when git gives endTime
    duration_minutes: int | None  # set when git gives duration
    recurring: str | None  # HOURLY, DAILY, WEEKDAY, WEEKEND, WEEKLY
    users: tuple[str, ...]
    accounts: tuple[str, ...]
    flags: tuple[str, ...]  # sorted, without the recurrence
    where: str  # file:line of its entry

    @property
    def hostlist(self) -> str:
        return str(hostlist.collect_hostlist(list(self.nodes)))


def compile_reservations(
    release: str,
    values: Mapping[str, Any],
    locations: Mapping[str, Mapping[str, Location]],
    nodes_by_definition: Mapping[str, Iterable[str] | None],
    declared: Iterable[str],
) -> tuple[Reservation, ...]:
    """`nodes_by_definition`: the Slurm nodes of each node definition (replicas, not spares;
    None when it is disabled); `declared`: every node our slurm.conf declares (spares too)."""
    entries = ((values.get("slurmConfig") or {}).get("reservations")) or {}
    known = set(declared)
    by_definition = {
        name: None if nodes is None else tuple(nodes) for name, nodes in nodes_by_definition.items()
    }
    out = []
    for key in sorted(entries):
        where = locations.get(key, {})
        out.append(_reservation(release, key, entries[key], where, by_definition, known))
    return tuple(out)


def _reservation(
    release: str,
    key: str,
    entry: Mapping[str, Any],
    where: Mapping[str, Location],
    by_definition: Mapping[str, tuple[str, ...] | None],
    declared: set[str],
) -> Reservation:
    entry = {k: v for k, v in entry.items() if v is not None}
    at = where.get("") or Location("values.yaml", None, f"slurmConfig.reservations.{key}")
    name = RESERVATION_NAME_FORMAT.format(release=release, name=key)
    if len(name) > MAX_NAME:
        raise CompileError(f"reservation name {name!r} is longer than {MAX_NAME}", where=at)
    nodes = _nodes(key, entry, where, at, by_definition, declared)
    if "startTime" not in entry:
        raise CompileError(
            f"reservation {key!r} has no startTime",
            where=at,
            hint="add `startTime: now` or a time such as 2030-01-01T08:00:00Z",
        )
    start = reservation_start(entry["startTime"])
    end = reservation_time(entry["endTime"]) if "endTime" in entry else None
    minutes = reservation_minutes(entry["duration"]) if "duration" in entry else None
    if (end is None) == (minutes is None):
        raise CompileError(
            f"reservation {key!r} needs exactly one of duration and endTime, "
            + ("got both" if end is not None else "got neither"),
            where=where.get("endTime", at),
            hint="duration: 120 (minutes), or endTime: 2030-01-01T10:00:00Z",
        )
    if end is not None and start is not None and end <= start:
        raise CompileError(
            f"reservation {key!r} ends ({entry['endTime']}) before it starts "
            f"({entry['startTime']})",
            where=where.get("endTime", at),
        )
    users = reservation_names(entry.get("users") or ())
    accounts = reservation_names(entry.get("accounts") or ())
    if not users and not accounts:
        raise CompileError(
            f"reservation {key!r} names no users and no accounts; Slurm requires one of them",
            where=at,
            hint="add `users: [alice]` or `accounts: [research]` (who may run in it)",
        )
    recurring = entry.get("recurring")
    return Reservation(
        name=name,
        key=key,
        nodes=nodes,
        start=start,
        end=end,
        duration_minutes=minutes,
        recurring=reservation_recurrence(recurring) if recurring else None,
        users=users,
        accounts=accounts,
        flags=tuple(sorted(set(reservation_flags(entry.get("flags") or ())))),
        where=f"{at.file}:{at.line}" if at.line is not None else at.file,
    )


def _nodes(
    key: str,
    entry: Mapping[str, Any],
    where: Mapping[str, Location],
    at: Location,
    by_definition: Mapping[str, tuple[str, ...] | None],
    declared: set[str],
) -> tuple[str, ...]:
    if "nodes" in entry and "nodeDefinition" in entry:
        later = max((where.get("nodes", at), where.get("nodeDefinition", at)), key=_order)
        raise CompileError(
            f"reservation {key!r} gives both nodes and nodeDefinition",
            where=later,
            hint="keep one: nodes (a Slurm hostlist) or nodeDefinition (a compute.nodes entry)",
        )
    if "nodeDefinition" in entry:
        definition = str(entry["nodeDefinition"])
        nodes = by_definition.get(definition)
        if not nodes:
            raise CompileError(
                _no_definition_nodes(key, definition, by_definition),
                where=where.get("nodeDefinition", at),
                hint=_closest(definition, by_definition, "node definitions")
                if definition not in by_definition
                else "enable it and give it replicas, or remove the reservation",
            )
        return tuple(sorted(nodes))
    if "nodes" not in entry:
        raise CompileError(
            f"reservation {key!r} names no nodes",
            where=at,
            hint="add nodes (a Slurm hostlist such as slurm-gpu-small-[0-1]) or "
            "nodeDefinition (every Slurm node of a compute.nodes entry)",
        )
    nodes = reservation_nodes(entry["nodes"])
    unknown = sorted(set(nodes) - declared)
    if unknown:
        raise CompileError(
            f"reservation {key!r} names Slurm nodes our slurm.conf does not declare: "
            + ", ".join(unknown[:10])
            + (f" and {len(unknown) - 10:,} more" if len(unknown) > 10 else ""),
            where=where.get("nodes", at),
            hint="declared nodes: " + (hostlist.collect_hostlist(sorted(declared)) or "none"),
        )
    return tuple(sorted(set(nodes)))


def _no_definition_nodes(
    key: str, definition: str, by_definition: Mapping[str, tuple[str, ...] | None]
) -> str:
    text = f"reservation {key!r}: node definition {definition!r}"
    if definition not in by_definition:
        return f"{text} is not a compute.nodes entry"
    if by_definition[definition] is None:
        return f"{text} is disabled (enabled: false), so it has no Slurm nodes"
    return f"{text} has no Slurm nodes (replicas: 0)"


def _closest(name: str, choices: Iterable[str], what: str) -> str:
    options = sorted(choices)
    return did_you_mean(name, options, limit=3) or f"{what}: " + (", ".join(options[:10]) or "none")


def _order(where: Location) -> tuple[bool, str, int]:
    """Later file (values.d after values.yaml), then later line."""
    return (where.file != "values.yaml", where.file, where.line or 0)
