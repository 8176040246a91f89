"""Kubernetes' OpenAPI schemas as kubernetes-validate ships them (JSON Schema, one directory per
release, offline), in strict mode: a field the API does not define is an error, as a typo'd
field would be pruned (or refused, with `kubectl apply --validate=strict`) by the API server.

kubernetes_validate.validate() reads its 1.8 MB definitions file again on every call; here each
file is read once and each (release, apiVersion, kind) compiled once, with the library's own
file layout and validator (test_manifest_schemas checks the two agree)."""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

# The releases SUNK, Slinky and Soperator users run.
VERSIONS = tuple(f"1.{minor}" for minor in range(29, 38))


def schema_dir(version: str) -> Traversable:
    schemas = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    return schemas / f"v{version}.0-local-strict"


@functools.cache
def _definitions(version: str) -> Resource[Any]:
    text = (schema_dir(version) / "_definitions.json").read_text()
    return Resource.from_contents(json.loads(text))


@functools.cache
def _validator(version: str, api_version: str, kind: str) -> Draft202012Validator | None:
    # The library's file names: rbac.authorization.k8s.io/v1 -> rbac-v1, v1 -> v1.
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = schema_dir(version) / f"{kind.lower()}-{group}.json"
    if not path.is_file():
        return None
    schema = json.loads(path.read_text())
    registry: Registry[Any] = Registry().with_resources(
        (r.id(), r) for r in (Resource.from_contents(schema), _definitions(version))
    )
    return Draft202012Validator(schema, registry=registry)


def has_schema(obj: dict[str, Any], version: str) -> bool:
    return _validator(version, obj["apiVersion"], obj["kind"]) is not None


def problems(obj: dict[str, Any], version: str) -> list[str]:
    """Each way obj breaks the strict schema of its kind in this release, naming the field."""
    validator = _validator(version, obj["apiVersion"], obj["kind"])
    assert validator is not None, f"no {version} schema for {obj['apiVersion']} {obj['kind']}"
    name = f"{obj['kind']} {obj['metadata'].get('name')}"
    return [
        f"{name}: {'.'.join(map(str, e.absolute_path)) or '(object)'}: {e.message}"
        for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.path)))
    ]
