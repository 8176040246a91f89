"""values.schema.json, made from the type tables the reconciler checks values with (pure).

Editors (yaml-language-server) and other tools read a JSON Schema; the reconciler reads its own
tables (`config/schema.py` and the tables it gathers). This module turns the tables into the
schema, so a key is declared once and both agree; `tests/unit/test_values_schema.py` fails
when the committed values.schema.json drifts from it. Regenerate with

    python -m reconciler.config.json_schema > values.schema.json

Every key may be null, as in the reconciler (a null value is "not set"; an entry set to null
in a later file removes it). Keys the tables do not hold are allowed: the reconciler warns
about them (`plan`), it does not refuse them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from reconciler.config.directory import DIRECTORY_ENTRY
from reconciler.config.reservations import RESERVATION
from reconciler.config.schema import ALL_VALUES, MOUNT, NODE_DEFINITION, S6_SCRIPT
from reconciler.config.topology import ENTRY_VALUES

Schema = dict[str, Any]
DIALECT = "https://json-schema.org/draft/2020-12/schema"
_STRINGS: Schema = {"type": "array", "items": {"type": "string"}}
_MAPPINGS: Schema = {"type": "array", "items": {"type": "object"}}
# The table's type names (config/value_types.py) as JSON Schema.
_TYPES: Mapping[str, Schema] = {
    "string": {"type": "string"},
    "integer": {"type": "integer"},
    "boolean": {"type": "boolean"},
    "mapping": {"type": "object"},
    "list": {"type": "array"},
    "list of strings": _STRINGS,
    "list of mappings": _MAPPINGS,
    "string or integer": {"type": ["string", "integer"]},
    "string or mapping": {"type": ["string", "object"]},
    "string or list of strings": {"anyOf": [{"type": "string"}, _STRINGS]},
    # YAML reads an unquoted 2030-01-01T10:00:00Z as a date; in JSON it is a string.
    "time": {"type": "string"},
}
# Where a table of its own types the items of a list or the entries of a mapping.
_NESTED: tuple[tuple[str, str, Mapping[str, str]], ...] = (
    ("compute.nodes", "entries", NODE_DEFINITION),
    ("compute.mounts", "items", MOUNT),
    ("compute.s6", "entries", S6_SCRIPT),
    ("compute.topology.topologies", "items", ENTRY_VALUES),
    ("slurmConfig.reservations", "entries", RESERVATION),
    ("directoryService.directories", "items", DIRECTORY_ENTRY),
)


def values_schema() -> Schema:
    """The schema of one values file (values.yaml or a values.d file: every key optional)."""
    root = _tree(ALL_VALUES)
    for dotted, kind, table in _NESTED:
        node = _at(root, dotted)
        inner = _nullable(_tree(table))
        if kind == "items":
            node["items"] = inner
        else:
            node["additionalProperties"] = inner
    return {"$schema": DIALECT, "title": "reconciler values (SUNK-shaped Helm values)", **root}


def _tree(table: Mapping[str, str]) -> Schema:
    """A table of dotted keys as nested object schemas, each key's type where it is declared."""
    root: Schema = {"type": "object"}
    for dotted in sorted(table, key=lambda k: k.count(".")):
        node = root
        *parents, last = dotted.split(".")
        for key in parents:
            node = node.setdefault("properties", {}).setdefault(key, _nullable({"type": "object"}))
        typed = _nullable(dict(_TYPES[table[dotted]]))
        existing = node.setdefault("properties", {}).get(last)
        node["properties"][last] = {**typed, **(existing or {})} if existing else typed
    return root


def _at(root: Schema, dotted: str) -> Schema:
    node = root
    for key in dotted.split("."):
        node = node["properties"][key]
    return node


def _nullable(schema: Schema) -> Schema:
    """`schema`, or null."""
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    kinds = schema.get("type")
    if kinds is None:
        return schema
    listed = kinds if isinstance(kinds, list) else [kinds]
    return {**schema, "type": [*listed, "null"]}


if __name__ == "__main__":
    json.dump(values_schema(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
