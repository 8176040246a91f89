"""What we render, and what deploy/ holds, is valid against the strict OpenAPI schemas of every
Kubernetes release users run (1.29 through 1.37): no unknown field, no wrong type, no missing
required field. The render is tests/unit/page_cluster.py's: the fixture repo with accounting, login
and the examples of SUNK's "Slurm Workload Manager" page, so every kind of Pod we make is
checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.kustomize import kustomize
from tests.unit.kube_schemas import VERSIONS, has_schema, problems, schema_dir
from tests.unit.page_cluster import page_repo, reconciler

ROOT = Path(__file__).resolve().parents[2]
# deploy/ also holds objects of other projects' CRDs, which no Kubernetes release defines.
CUSTOM_KINDS = {"GitRepository", "ServiceMonitor", "PrometheusRule"}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    text = reconciler("render", str(page_repo(tmp_path_factory.mktemp("slurm-page-examples"))))
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.fixture(scope="module")
def deployed() -> list[dict[str, Any]]:
    return [
        obj for folder in ("base", "cluster-scope", "example-namespace-scope", "flux", "argocd",
                           "monitoring")
        for obj in kustomize(ROOT / "deploy" / folder)
    ]  # fmt: skip


def test_the_schemas_of_every_release_ship_offline_in_strict_form() -> None:
    for version in VERSIONS:
        assert (schema_dir(version) / "_definitions.json").is_file(), version


def test_the_render_holds_every_kind_of_pod(rendered: list[dict[str, Any]]) -> None:
    pods = [o["spec"]["template"] for o in rendered if o["kind"] in ("Deployment", "StatefulSet")]
    names = {p["metadata"]["labels"]["app.kubernetes.io/name"] for p in pods}
    assert names >= {"slurmctld", "slurmrestd", "slurmdbd", "mysql", "login", "slurmd"}
    containers = {c["name"] for p in pods for c in p["spec"]["containers"]}
    assert {"sssd", "sshd", "munge", "reconfigure"} <= containers


@pytest.mark.parametrize("version", VERSIONS)
def test_rendered_objects_are_valid(rendered: list[dict[str, Any]], version: str) -> None:
    assert [p for obj in rendered for p in problems(obj, version)] == []


@pytest.mark.parametrize("version", VERSIONS)
def test_deploy_manifests_are_valid(deployed: list[dict[str, Any]], version: str) -> None:
    ours = [obj for obj in deployed if obj["kind"] not in CUSTOM_KINDS]
    assert {o["kind"] for o in deployed if not has_schema(o, version)} == CUSTOM_KINDS & {
        o["kind"] for o in deployed}  # fmt: skip
    assert [p for obj in ours for p in problems(obj, version)] == []


def test_a_field_the_api_does_not_define_is_an_error(rendered: list[dict[str, Any]]) -> None:
    statefulset = next(o for o in rendered if o["kind"] == "StatefulSet")
    typo = {**statefulset, "spec": {**statefulset["spec"], "replica": 1}}
    for version in (VERSIONS[0], VERSIONS[-1]):
        assert problems(typo, version) == [
            f"StatefulSet {statefulset['metadata']['name']}: spec: Additional properties are "
            "not allowed ('replica' was unexpected)"
        ]
        # The library's own check agrees: this module only caches what it loads.
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(typo, version, strict=True)
        kubernetes_validate.validate(statefulset, version, strict=True)
