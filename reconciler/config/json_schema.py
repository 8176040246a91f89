"""values.schema.json, made from the declarations the reconciler checks values with (pure).

Editors (yaml-language-server) and other tools read a JSON Schema; the reconciler reads its own
declarations (`config/keys.py` and the tables it gathers). This module turns the tables into the
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

from reconciler.config.keys import ALL_VALUES, NESTED
from reconciler.config.value_types import NO_DEFAULT, Key, Table

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


def values_schema() -> Schema:
    """The schema of one values file (values.yaml or a values.d file: every key optional)."""
    root = _tree(ALL_VALUES)
    for nested in NESTED:
        node = _at(root, nested.under)
        inner = _nullable(_tree(nested.table))
        if nested.items:
            node["items"] = inner
        else:
            node["additionalProperties"] = inner
    return {"$schema": DIALECT, "title": "reconciler values (SUNK-shaped Helm values)", **root}


def _tree(table: Table) -> Schema:
    """A table of dotted keys as nested object schemas, each key's where it is declared."""
    root: Schema = {"type": "object"}
    for dotted in sorted(table, key=lambda k: k.count(".")):
        node = root
        *parents, last = dotted.split(".")
        for key in parents:
            node = node.setdefault("properties", {}).setdefault(key, _nullable({"type": "object"}))
        typed = _key_schema(table[dotted])
        existing = node.setdefault("properties", {}).get(last)
        node["properties"][last] = {**typed, **(existing or {})} if existing else typed
    return root


def _key_schema(key: Key) -> Schema:
    """One key: its type (or null), and what else its Key declares that JSON Schema can say."""
    schema = _nullable(dict(_TYPES[key.type]))
    if key.doc:
        schema["description"] = key.doc
    if key.default is not NO_DEFAULT:
        schema["default"] = key.default
    if key.choices:
        schema["enum"] = [*key.choices, None]
    if key.minimum is not None:
        schema["minimum"] = key.minimum
    if key.maximum is not None:
        schema["maximum"] = key.maximum
    return schema


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
