"""The OpenAPI documents slurmrestd publishes (tests/unit/slurm_openapi/) as test data: request
bodies validated against a version's own schemas, response bodies built from them, and a
Mapping that records which fields a codec reads, to check each against the schema."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft4Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

RELEASE = "26.05.3"
SPECS = Path(__file__).parent / "slurm_openapi" / RELEASE
_BASE = "urn:slurmrestd-openapi"
# How deep a built body goes: the job schema nests `het`, `job_resources`, ... several levels.
_MAX_DEPTH = 8


@functools.cache
def spec(version: str) -> dict[str, Any]:
    return json.loads((SPECS / f"{version}.json").read_text())


def _operation(version: str, path: str, method: str) -> Mapping[str, Any]:
    return spec(version)["paths"][f"/slurm/{version}{path}"][method]


def request_schema(version: str, path: str, method: str = "post") -> Mapping[str, Any]:
    body = _operation(version, path, method)["requestBody"]
    return body["content"]["application/json"]["schema"]


def response_schema(version: str, path: str, method: str = "get") -> Mapping[str, Any]:
    answer = _operation(version, path, method)["responses"]["200"]
    return answer["content"]["application/json"]["schema"]


@functools.cache
def _registry(version: str) -> Registry[Any]:
    document = Resource.from_contents(spec(version), default_specification=DRAFT4)
    return Registry().with_resource(_BASE, document)


def validator(version: str, schema: Mapping[str, Any]) -> Draft4Validator:
    """A validator of `schema` (a `$ref` into the document, or one with `$ref`s in it); OpenAPI
    3.0's schema objects are JSON Schema draft 4 with a few keywords draft 4 ignores."""
    rooted = {"$ref": _BASE + schema["$ref"]} if "$ref" in schema else schema
    return Draft4Validator(rooted, registry=_registry(version))


def problems(version: str, schema: Mapping[str, Any], body: Any) -> list[str]:
    """What in `body` the schema refuses, one line each ([] when valid)."""
    found = validator(version, schema).iter_errors(body)
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message[:160]}" for e in found)


def resolve(version: str, schema: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in schema:
        node: Any = spec(version)
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def field(version: str, schema: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    """The schema at `path` ("jobs/[]/time_limit/number", "[]" for an array's items), or None
    where the document has no such field."""
    node = resolve(version, schema)
    for part in path.split("/") if path else ():
        if part == "[]":
            if node.get("type") != "array":
                return None
            node = resolve(version, node["items"])
        else:
            properties = node.get("properties") or {}
            if part not in properties:
                return None
            node = resolve(version, properties[part])
    return node


def build(version: str, schema: Mapping[str, Any], depth: int = 0) -> Any:
    """A body with every field the schema has (to `_MAX_DEPTH`), each a plain value of its
    type: an enum's first value, "x", 1, False, one item per array."""
    node = resolve(version, schema)
    kind = node.get("type")
    if "enum" in node:
        return node["enum"][0]
    if kind == "object":
        if depth >= _MAX_DEPTH:
            return {}
        properties = node.get("properties") or {}
        return {k: build(version, v, depth + 1) for k, v in properties.items()}
    if kind == "array":
        return [build(version, node["items"], depth + 1)] if depth < _MAX_DEPTH else []
    return {"string": "x", "integer": 1, "number": 1.0, "boolean": False}.get(kind)


class Reads(Mapping[str, Any]):
    """A wire body that records every key a codec asks it for, present or not, by path
    ("time_limit/number"); nested objects are recorded under their key."""

    def __init__(self, body: Mapping[str, Any], log: set[str] | None = None, at: str = "") -> None:
        self._body, self.log, self._at = body, set() if log is None else log, at

    def __getitem__(self, key: str) -> Any:
        path = f"{self._at}{key}"
        self.log.add(path)
        value = self._body[key]
        if isinstance(value, Mapping):
            return Reads(value, self.log, path + "/")
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._body)

    def __len__(self) -> int:
        return len(self._body)


def missing_reads(version: str, item_schema: Mapping[str, Any], log: set[str]) -> list[str]:
    """The recorded reads the schema has no field for."""
    return sorted(path for path in log if field(version, item_schema, path) is None)


def job(version: str) -> dict[str, Any]:
    """One job of `GET /jobs/` built to the version's schema, without `job_resources`: its
    `required` names paths ("cpus/count") no body can hold, and no codec reads it."""
    built = build(version, response_schema(version, "/jobs/"))["jobs"][0]
    built.pop("job_resources")
    return built
