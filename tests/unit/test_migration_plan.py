"""`reconciler plan --offline` of a migrating SUNK user's values (fixtures/sunk-migration-values,
shaped like the "Slurm Workload Manager" page's examples) names what the compile did silently:
every node definition that makes no nodes and the layer and line that turned it off, every
image without a tag and the tag it gets, and a controller on another Slurm build than the
compute nodes, and pyxis `required` on our image, which has none. Warnings, not errors: the
plan is still made, in every output."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from tests.unit.test_cli import run, write_repo

REPO = Path(__file__).resolve().parents[2] / "fixtures" / "sunk-migration-values"
DISABLED_AT = "values.yaml:26"  # rtx4000's `enabled: false`
REPOSITORY_AT = "values.yaml:30"  # rtx4000's untagged image.repository


def _warnings(output: str) -> list[str]:
    result = run("plan", str(REPO), "--offline", "-o", output)
    assert result.returncode == 0, result.stderr
    if output == "json":
        return list(json.loads(result.stdout)["warnings"])
    if output == "markdown":  # read as the reader sees it: no escapes
        return [html.unescape(re.sub(r"\\(.)", r"\1", line)) for line in result.stdout.splitlines()]
    return result.stdout.splitlines()


@pytest.mark.parametrize("output", ["text", "json", "markdown"])
def test_the_plan_names_every_definition_without_nodes_and_why(output: str) -> None:
    lines = _warnings(output)
    for name in ("rtx4000-cu117", "gpu-lga"):
        [line] = [w for w in lines if f"node definition {name!r} makes no nodes" in w]
        assert f"layer 'rtx4000' sets `enabled: false` ({DISABLED_AT})" in line, line
    [own] = [w for w in lines if "node definition 'rtx4000' makes no nodes" in w]
    assert f"it sets `enabled: false` ({DISABLED_AT})" in own, own
    assert "replaces the shipped layer 'rtx4000' (library/gpu.yaml:" in own, own
    assert not [w for w in lines if "'cpu-las' makes no nodes" in w]


@pytest.mark.parametrize("output", ["text", "json", "markdown"])
def test_the_plan_names_every_image_without_a_tag(output: str) -> None:
    lines = _warnings(output)
    [line] = [w for w in lines if "has no tag" in w]
    assert (
        f"{REPOSITORY_AT}: warning: image.repository "
        "'registry.example.com/hpc/slurmd-cuda117-extras' of layer 'rtx4000' has no tag"
    ) in line, line
    assert "definitions 'gpu-lga', 'rtx4000', 'rtx4000-cu117' run it as " in line, line
    assert "registry.example.com/hpc/slurmd-cuda117-extras:24.11.5" in line, line


@pytest.mark.parametrize("output", ["text", "json", "markdown"])
def test_the_plan_names_the_controller_and_compute_skew(output: str) -> None:
    lines = _warnings(output)
    [line] = [w for w in lines if "two Slurm builds" in w]
    assert (
        "values.yaml:15: warning: controller.image runs "
        "registry.example.com/hpc/slurm-controller:24.11.5-site.3, but node definition "
        "'cpu-las' runs our image ghcr.io/sunk-reconciler/slurm:24.11.5"
    ) in line, line


CPU = "compute:\n  nodes:\n    c:\n      definitions: [cpu-epyc]\n      replicas: 1\n"


def _plan_stderr(root: Path, values: str) -> str:
    result = run("plan", str(write_repo(root, values + "slurmConfig: {defMemPerCPU: 1024}\n")),
                 "--offline")  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_a_control_plane_image_without_a_tag_is_named_with_its_file(tmp_path: Path) -> None:
    values = "login:\n  image:\n    repository: registry.example.com/hpc/login\n" + CPU
    assert (
        "values.yaml:3: warning: login.image.repository 'registry.example.com/hpc/login' has no "
        "tag: it runs registry.example.com/hpc/login:24.11.5"
    ) in _plan_stderr(tmp_path, values)


def test_a_compute_image_of_its_own_under_our_controller_is_a_skew(tmp_path: Path) -> None:
    values = CPU + "      image: {repository: registry.example.com/hpc/slurmd, tag: '23.11.10'}\n"
    assert (
        "values.yaml:6: warning: node definition 'c' runs registry.example.com/hpc/slurmd:"
        "23.11.10, but the control plane runs our image ghcr.io/sunk-reconciler/slurm:24.11.5: "
        "two Slurm builds"
    ) in _plan_stderr(tmp_path, values)


def test_definitions_that_run_on_one_image_say_nothing(tmp_path: Path) -> None:
    assert "warning" not in _plan_stderr(tmp_path, CPU)


@pytest.mark.parametrize("output", ["text", "json", "markdown"])
def test_the_plan_names_pyxis_on_our_image(output: str) -> None:
    """pyxis on, as SUNK's values usually have it: every srun on our image would fail."""
    lines = _warnings(output)
    [line] = [w for w in lines if "pyxis" in w and "compute.pyxis.required" in w]
    assert "ghcr.io/sunk-reconciler/slurm:" in line and "cpu-las" in line, line
