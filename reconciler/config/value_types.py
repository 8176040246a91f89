"""The types a values or layer file may give a key, written as short names ("string",
"list of strings") so messages read like the docs, and the checks that name the file, line
and key of a value of the wrong type.
"""

from __future__ import annotations

import datetime
from typing import Any

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

def check_table(doc: YamlFile, base: KeyPath, data: Any, table: dict[str, str]) -> None:
    for dotted, expected in table.items():
        value, found = lookup(data, dotted.split("."))
        if found and value is not None:
            check_type(doc, (*base, *dotted.split(".")), value, expected)


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
