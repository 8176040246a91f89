"""A values key's one declaration (`Key`: its type, allowed values, default, what it does and
whether it reaches a Slurm config file), and the checks that name the file, line and key of a
value that breaks it.

Types are short names ("string", "list of strings") so messages read like the docs. From the
same entries come the checks here, `values.schema.json` (config/json_schema.py), the key
reference in docs/values.md (config/values_doc.py), the defaults the compiler renders
(`default_of` in config/keys.py) and the values checked as Slurm words (config/slurm_words.py).
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from reconciler.config.yamlfile import KeyPath, YamlFile, format_path, lookup
from reconciler.errors import ConfigTypeError

TYPES: dict[str, tuple[type, ...]] = {
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


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True)
class Key:
    """One values key. `doc` says what it becomes, in one line; `default` is what the
    reconciler uses when it is unset (NO_DEFAULT: nothing is rendered, or the doc says what
    decides); `slurm` is "word" for a value rendered after `KEY=` in slurm.conf or
    slurmdbd.conf, "text" for lines of a Slurm config file (config/slurm_words.py)."""

    type: str
    doc: str = ""
    default: Any = NO_DEFAULT
    choices: tuple[Any, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    slurm: Literal["word", "text"] | None = None
    hint: str | None = None  # added to a refusal of choices or range


Table = Mapping[str, Key]


def default_in(table: Table, dotted: str) -> Any:
    """What the reconciler uses for a key of `table` that is unset: the one home of it (a
    copy: a default list or mapping is never shared)."""
    default = table[dotted].default
    if default is NO_DEFAULT:
        raise KeyError(f"values key {dotted} declares no default")
    return copy.deepcopy(default)


def check_table(doc: YamlFile, base: KeyPath, data: Any, table: Table) -> None:
    for dotted, key in table.items():
        value, found = lookup(data, dotted.split("."))
        if found and value is not None:
            path = (*base, *dotted.split("."))
            check_type(doc, path, value, key.type)
            check_allowed(doc, path, value, key)


def check_allowed(doc: YamlFile, path: KeyPath, value: Any, key: Key) -> None:
    """The key's choices and range, once its type is right."""
    if key.choices and value not in key.choices:
        shown = ", ".join(str(choice) for choice in key.choices)
        _refuse(doc, path, f"must be one of {shown}, got {value!r}", key.hint)
    if not isinstance(value, int) or isinstance(value, bool):
        return
    low, high = key.minimum, key.maximum
    if (low is not None and value < low) or (high is not None and value > high):
        _refuse(doc, path, f"must be {range_text(key)}, got {value}", key.hint)


def range_text(key: Key) -> str:
    """ "from 0 to 65536", "1 or more", "at most 9": as messages and docs say it."""
    if key.minimum is not None and key.maximum is not None:
        return f"from {key.minimum} to {key.maximum}"
    return f"{key.minimum} or more" if key.maximum is None else f"at most {key.maximum}"


def _refuse(doc: YamlFile, path: KeyPath, what: str, hint: str | None) -> None:
    raise ConfigTypeError(f"{format_path(path)} {what}", where=doc.location(path), hint=hint)


def check_type(doc: YamlFile, path: KeyPath, value: Any, expected: str) -> None:
    types = TYPES[expected]
    if isinstance(value, bool) and bool not in types:
        wrong(doc, path, expected, value)
    if not isinstance(value, types):
        wrong(doc, path, expected, value)
    if expected.endswith("list of strings") and isinstance(value, list):
        for index, item in enumerate(value):
            if not isinstance(item, str):
                wrong(doc, (*path, index), "string", item)
    if expected == "list of mappings":
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                wrong(doc, (*path, index), "mapping", item)


def wrong(doc: YamlFile, path: KeyPath, expected: str, value: Any) -> None:
    hint = None
    if expected == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        hint = f'quote it: "{value}" (YAML reads unquoted {value} as a number)'
    raise ConfigTypeError(
        f"{format_path(path) or 'document'} must be a {expected}, got {describe(value)}",
        where=doc.location(path),
        hint=hint,
    )


def describe(value: Any) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "mapping"}
    kind = names.get(type(value), "list" if isinstance(value, list) else type(value).__name__)
    shown = repr(value)
    return f"{kind} {shown if len(shown) <= 40 else shown[:37] + '...'}"
