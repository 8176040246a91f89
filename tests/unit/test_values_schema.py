"""values.schema.json: made from the reconciler's own type tables, so an editor and the
reconciler agree on every key. The committed file is what the tables make; it accepts our
fixture repos and refuses a wrong type at the key path the reconciler names."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from reconciler.config.json_schema import values_schema
from reconciler.config.keys import ALL_VALUES
from reconciler.config.value_types import Key
from reconciler.config.values_file import check_values_file
from reconciler.config.yamlfile import format_path, parse_yaml
from reconciler.errors import ConfigTypeError, Warning_

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = jsonschema.Draft202012Validator(json.loads((ROOT / "values.schema.json").read_text()))


def _json_view(value: Any) -> Any:
    """YAML as an editor's JSON sees it: an unquoted timestamp is a string."""
    if isinstance(value, dict):
        return {k: _json_view(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_view(v) for v in value]
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


def test_the_committed_schema_is_the_one_the_tables_make() -> None:
    committed = json.loads((ROOT / "values.schema.json").read_text())
    assert committed == values_schema(), (
        "values.schema.json is stale: python -m reconciler.config.json_schema > values.schema.json"
    )
    jsonschema.Draft202012Validator.check_schema(committed)


VALUES_FILES = sorted(
    p.relative_to(ROOT) for p in (ROOT / "fixtures").rglob("*.yaml")
    if p.name == "values.yaml" or p.parent.name == "values.d"
)  # fmt: skip


@pytest.mark.parametrize("path", VALUES_FILES, ids=str)
def test_every_values_file_of_our_fixture_repos_is_valid(path: Path) -> None:
    data = _json_view(yaml.safe_load((ROOT / path).read_text()) or {})
    errors = [f"{format_path(tuple(e.absolute_path))}: {e.message}"
              for e in VALIDATOR.iter_errors(data)]  # fmt: skip
    assert errors == []


@pytest.mark.parametrize(
    "text",
    [
        "compute:\n  nodes:\n    gpu:\n      replicas: two\n",
        "slurmConfig:\n  slurmd:\n    timeout: '30'\n",
        "scheduler:\n  enabled: 'yes'\n",
        "compute:\n  mounts:\n    - name: home\n      pvc: 5\n",
        "directoryService:\n  directories:\n    - name: corp\n      ldapUri: 389\n",
        "controller:\n  image:\n    tag: 24.11\n",
        "compute:\n  topology:\n    topologies:\n      - name: fabric\n        plugin: 7\n",
    ],
    ids=["node-definition", "slurmd-timeout", "scheduler-enabled", "mount", "directory",
         "controller-tag", "topology-entry"],
)  # fmt: skip
def test_a_wrong_type_is_refused_at_the_key_path_the_reconciler_names(text: str) -> None:
    doc = parse_yaml(text, "values.yaml")
    with pytest.raises(ConfigTypeError) as refused:
        check_values_file(doc, list[Warning_]())
    named = refused.value.where.path if refused.value.where else None
    errors = list(VALIDATOR.iter_errors(_json_view(doc.data)))
    assert named is not None and errors, (named, errors)
    assert {format_path(tuple(e.absolute_path)) for e in errors} == {named}


def _nested(dotted: str, value: Any) -> dict[str, Any]:
    data: Any = value
    for key in reversed(dotted.split(".")):
        data = {key: data}
    return data


def _breaking(key: Key) -> list[Any]:
    """Values of the right type that the key's choices or range refuse."""
    bad: list[Any] = []
    if key.choices:
        bad.append(max(key.choices) + 1 if isinstance(key.choices[0], int) else "no-such-value")
    if key.minimum is not None:
        bad.append(key.minimum - 1)
    if key.maximum is not None:
        bad.append(key.maximum + 1)
    return bad


BOUNDED = [(dotted, value) for dotted, key in ALL_VALUES.items() for value in _breaking(key)]


def test_some_keys_declare_choices_and_ranges() -> None:
    assert {"login.service.type", "scheduler.scope.type", "controller.replicas",
            "scheduler.podPolicy.maxPriority"} <= {dotted for dotted, _ in BOUNDED}  # fmt: skip


@pytest.mark.parametrize(("dotted", "value"), BOUNDED, ids=lambda v: str(v))
def test_a_value_outside_choices_or_range_is_refused_by_both(dotted: str, value: Any) -> None:
    """One declaration, two readers: the reconciler and an editor refuse the same values."""
    doc = parse_yaml(yaml.safe_dump(_nested(dotted, value)), "values.yaml")
    with pytest.raises(ConfigTypeError) as refused:
        check_values_file(doc, list[Warning_]())
    assert refused.value.where is not None and refused.value.where.path == dotted
    errors = list(VALIDATOR.iter_errors(doc.data))
    assert {format_path(tuple(e.absolute_path)) for e in errors} == {dotted}


def test_every_value_a_key_allows_is_taken() -> None:
    for dotted, key in ALL_VALUES.items():
        for value in key.choices:
            doc = parse_yaml(yaml.safe_dump(_nested(dotted, value)), "values.yaml")
            check_values_file(doc, list[Warning_]())
            assert not list(VALIDATOR.iter_errors(doc.data)), dotted
