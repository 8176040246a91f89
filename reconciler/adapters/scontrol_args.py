"""scontrol's arguments, checked and built before anything runs; sacctmgr shares the checkers.

Argument policy: reject, never quote. scontrol is run without a shell, one `Key=value` per argv
element, keys only from the tables below. Every value is checked against the grammar of its kind
(names, hostlists, integers, times, flag words, free text); anything else is refused with
SlurmArgumentError before scontrol starts. Quoting is not an option: scontrol strips a leading
double quote and keeps the rest, keeps newlines in a reason, and so on. Free text (a drain
reason) allows ASCII letters, digits, spaces and `_ . , : ; / @ # ( ) + - [ ]`; no `=`, quotes,
backslashes, control characters, or leading/trailing space (so a reason reads back exactly as
it was written).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Final

from reconciler.errors import SlurmArgumentError

MAX_NAME = 128
MAX_TEXT = 255

OptionValue = str | int | bool | Sequence[str]  # sequences: comma lists (Flags, Users)
Checker = Callable[[str, object], str]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_HOSTLIST = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-\[\],]*")
_TEXT = re.compile(r"[A-Za-z0-9_.,:;/@#()+\-\[\] ]+")
_DURATION = re.compile(r"\d+|\d+:\d{1,2}(:\d{1,2})?|\d+-\d{1,2}(:\d{1,2}(:\d{1,2})?)?")
_TIME_POINT = re.compile(
    r"now(\+\d+(seconds?|minutes?|hours?|days?|weeks?)?)?|\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?"
)
_FEATURES = re.compile(r"[A-Za-z0-9_.]+([&|,][A-Za-z0-9_.]+)*")
_LICENSES = re.compile(r"[A-Za-z0-9_.]+(:\d+)?(,[A-Za-z0-9_.]+(:\d+)?)*")
_UNLIMITED = frozenset({"UNLIMITED", "INFINITE"})


class NodeState(StrEnum):
    """Node states `scontrol update nodename=... state=` accepts that the reconciler uses."""

    DOWN = "DOWN"
    DRAIN = "DRAIN"
    FAIL = "FAIL"
    FUTURE = "FUTURE"
    RESUME = "RESUME"
    UNDRAIN = "UNDRAIN"
    POWER_DOWN = "POWER_DOWN"
    POWER_UP = "POWER_UP"


# scontrol refuses these without a reason ("You must specify a reason when DOWNING or DRAINING").
STATES_NEEDING_REASON: Final = frozenset({NodeState.DOWN, NodeState.DRAIN, NodeState.FAIL})


def check_name(what: str, value: object) -> str:
    """A Slurm object name: node, partition, reservation, account, user, QOS."""
    return _matching(what, value, _NAME, MAX_NAME, "letters, digits, `_ . -`, not starting with -")


def check_hostlist(what: str, value: object) -> str:
    """A node name, a comma list, or a hostlist expression like node[1-4,7]."""
    text = _matching(what, value, _HOSTLIST, 4096, "a hostlist such as node[1-4],gpu7")
    if not _brackets_balanced(text) or ",," in text or text.endswith(","):
        raise SlurmArgumentError(what, value, "malformed hostlist")
    return text


def check_text(what: str, value: object) -> str:
    """Free text such as a drain reason (see the module docstring for the allowed characters)."""
    text = _matching(
        what, value, _TEXT, MAX_TEXT, "letters, digits, spaces, _ . , : ; / @ # ( ) + - [ ]"
    )
    if text != text.strip():
        raise SlurmArgumentError(what, value, "leading or trailing whitespace")
    return text


def _matching(what: str, value: object, pattern: re.Pattern[str], limit: int, expected: str) -> str:
    if not isinstance(value, str) or not value:
        raise SlurmArgumentError(what, value, "expected a non-empty string")
    if len(value) > limit:
        raise SlurmArgumentError(what, value, f"longer than {limit} characters")
    if not pattern.fullmatch(value):
        raise SlurmArgumentError(what, value, f"expected {expected}")
    return value


def _brackets_balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            return False
    return depth == 0


def _flag_words(allowed: frozenset[str]) -> Checker:
    def check(what: str, value: object) -> str:
        words = value.split(",") if isinstance(value, str) else value
        if not isinstance(words, list | tuple) or not words:
            raise SlurmArgumentError(what, value, "expected words separated by commas")
        upper = [w.upper() if isinstance(w, str) else w for w in words]
        unknown = [w for w in upper if w not in allowed]
        if unknown:
            raise SlurmArgumentError(what, value, f"expected some of {', '.join(sorted(allowed))}")
        return ",".join(upper)

    return check


def _integer(what: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SlurmArgumentError(what, value, "expected an integer >= 0")
    return str(value)


def _duration(what: str, value: object) -> str:
    """Minutes, [D-]HH:MM[:SS], or UNLIMITED/INFINITE, as scontrol reads time limits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _integer(what, value)
    if isinstance(value, str) and value.upper() in _UNLIMITED:
        return value.upper()
    return _matching(what, value, _DURATION, 32, "minutes, [D-]HH:MM[:SS] or UNLIMITED")


def _time_point(what: str, value: object) -> str:
    """now[+N units], a local YYYY-MM-DDTHH:MM[:SS], or seconds since the epoch (an int),
    sent as `uts<seconds>`: Slurm's parse_time reads that the same in every time zone."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"uts{_integer(what, value)}"
    if isinstance(value, str) and value.lower().startswith("now"):
        value = value.lower()
    return _matching(
        what,
        value,
        _TIME_POINT,
        32,
        "now, now+N[minutes|hours|days], YYYY-MM-DDTHH:MM:SS or seconds since the epoch",
    )


def _name_list(what: str, value: object) -> str:
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, list | tuple) or not names:
        raise SlurmArgumentError(what, value, "expected names separated by commas")
    return ",".join(check_name(what, name) for name in names)


def _name_list_or_clear(what: str, value: object) -> str:
    """Names, or an empty list/tuple: `Users=` clears a reservation's users (Slurm keeps it
    only if accounts remain)."""
    if isinstance(value, list | tuple) and not value:
        return ""
    return _name_list(what, value)


def _pattern(pattern: re.Pattern[str], expected: str, *, upper: bool = False) -> Checker:
    def check(what: str, value: object) -> str:
        if upper and isinstance(value, str):
            value = value.upper()
        return _matching(what, value, pattern, 1024, expected)

    return check


RESERVATION_FLAGS: Final = frozenset(
    {
        "ANY_NODES",
        "DAILY",
        "FLEX",
        "FIRST_CORES",
        "IGNORE_JOBS",
        "HOURLY",
        "LICENSE_ONLY",
        "MAINT",
        "MAGNETIC",
        "NO_HOLD_JOBS_AFTER",
        "OVERLAP",
        "PART_NODES",
        "PURGE_COMP",
        "REPLACE",
        "REPLACE_DOWN",
        "SPEC_NODES",
        "STATIC_ALLOC",
        "TIME_FLOAT",
        "WEEKDAY",
        "WEEKEND",
        "WEEKLY",
    }
)

RESERVATION_OPTIONS: Final[Mapping[str, Checker]] = {
    "Nodes": check_hostlist,
    "NodeCnt": _integer,
    "CoreCnt": _integer,
    "StartTime": _time_point,
    "EndTime": _time_point,
    "Duration": _duration,
    "Users": _name_list_or_clear,
    "Accounts": _name_list_or_clear,
    "Groups": _name_list_or_clear,
    "PartitionName": check_name,
    "Features": _pattern(_FEATURES, "feature names joined by & | ,"),
    "Licenses": _pattern(_LICENSES, "name[:count],..."),
    # On update, `Flags=` adds flags and `Flags-=` removes them (Slurm 22.05; it refuses to
    # remove some, e.g. OVERLAP, with "Error parsing flags").
    "Flags": _flag_words(RESERVATION_FLAGS),
    "Flags-": _flag_words(RESERVATION_FLAGS),
}


def option_args(
    kind: str, table: Mapping[str, Checker], options: Mapping[str, OptionValue]
) -> list[str]:
    """`Key=value` argv elements; keys match case-insensitively and come out canonical."""
    canonical = {key.lower(): key for key in table}
    args = []
    for key, value in options.items():
        name = canonical.get(key.lower()) if isinstance(key, str) else None
        if name is None:
            raise SlurmArgumentError(f"{kind} option", key, f"expected one of {', '.join(table)}")
        args.append(f"{name}={table[name](f'{kind} {name}', value)}")
    return args


def node_state_args(nodes: str, state: NodeState, reason: str | None = None) -> list[str]:
    try:
        state = NodeState(state)
    except ValueError:
        expected = ", ".join(s.value for s in NodeState)
        raise SlurmArgumentError("node state", state, f"expected one of {expected}") from None
    args = ["update", f"NodeName={check_hostlist('node', nodes)}", f"State={state.value}"]
    if reason is not None:
        args.append(f"Reason={check_text('reason', reason)}")
    elif state in STATES_NEEDING_REASON:
        raise SlurmArgumentError(
            "reason", reason, f"scontrol requires a reason for state {state.value}"
        )
    return args


def node_weight_args(nodes: str, weight: int) -> list[str]:
    if isinstance(weight, bool) or not isinstance(weight, int) or not 0 < weight < 2**32 - 1:
        raise SlurmArgumentError("node weight", weight, "expected an integer from 1 to 2^32-2")
    return ["update", f"NodeName={check_hostlist('node', nodes)}", f"Weight={weight}"]


def reservation_args(verb: str, name: str, options: Mapping[str, OptionValue]) -> list[str]:
    head = [verb, f"ReservationName={check_name('reservation', name)}"]
    if verb == "delete":
        return head
    return head + option_args("reservation", RESERVATION_OPTIONS, options)
