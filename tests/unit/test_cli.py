"""The commands as a user runs them: output streams, exit codes, and errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args], capture_output=True, text=True, timeout=60
    )


def write_repo(root: Path, values: str, **files: str) -> Path:
    (root / "values.yaml").write_text(values)
    for name, text in files.items():
        path = root / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_version_is_the_installed_distributions() -> None:
    done = run("--version")
    assert (done.returncode, done.stderr) == (0, "")
    project = tomllib.loads((FIXTURE.parents[1] / "pyproject.toml").read_text())["project"]
    assert done.stdout == f"reconciler {project['version']}\n"


def test_render_is_a_yaml_stream_on_stdout_and_byte_identical() -> None:
    first, second = run("render", str(FIXTURE)), run("render", str(FIXTURE))
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    docs = list(yaml.safe_load_all(first.stdout))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("ConfigMap", "slurm-prolog"), ("ConfigMap", "slurm-s6"),
        ("ConfigMap", "slurm-slurm-conf"), ("ConfigMap", "slurm-slurmdbd-conf"),
        ("Service", "slurm-accounting"), ("Service", "slurm-compute"),
        ("Service", "slurm-controller"), ("PersistentVolumeClaim", "slurm-controller-state"),
        ("Service", "slurm-login"), ("Service", "slurm-mysql"), ("Service", "slurm-rest"),
        ("Deployment", "slurm-accounting"), ("Deployment", "slurm-controller"),
        ("StatefulSet", "slurm-cpu"), ("StatefulSet", "slurm-gpu-small"),
        ("StatefulSet", "slurm-login"), ("StatefulSet", "slurm-mysql"),
        ("Deployment", "slurm-rest"), ("Secret", "slurm-munge-key"),
        ("Secret", "slurm-jwt-key"), ("Secret", "slurm-mysql-password"),
    ]  # fmt: skip
    # Generated Secrets are described, never shown: no data, no stringData.
    for secret in (d for d in docs if d["kind"] == "Secret"):
        assert set(secret) == {"apiVersion", "kind", "metadata", "type"}


def test_compile_json_for_one_nodeset() -> None:
    result = run("compile", str(FIXTURE), "--nodeset", "gpu-small", "-o", "json")
    data = json.loads(result.stdout)
    assert list(data) == ["gpu-small"] and data["gpu-small"]["replicas"] == 2


def test_compile_explain_names_layer_and_line() -> None:
    result = run("compile", str(FIXTURE), "--nodeset", "gpu-small", "--explain")
    lines = result.stdout.splitlines()
    assert lines[1] == "# applied: base -> rtx4000 -> cu117 -> las1 -> local-size -> gpu-small"
    replicas = next(line for line in lines if line.startswith("replicas = "))
    assert replicas.endswith("# gpu-small (values.d/10-gpu-scale.yaml:5)")
    gres = next(line for line in lines if line.startswith("gresGpu = "))
    assert '"quadro_rtx_4000:7"' in gres and "# rtx4000 (library/gpu.yaml:" in gres


def test_offline_plan_text_and_detailed_exit_code() -> None:
    result = run("plan", str(FIXTURE), "--offline", "--detailed-exitcode")
    assert result.returncode == 2
    assert "\x1b[" not in result.stdout  # no color when not on a TTY
    assert result.stdout.rstrip().endswith(
        "Plan: 28 to add, 0 to change, 0 to destroy. Slurm: 0 to drain, 1 reconfigure."
    )
    assert "  + StatefulSet slurm/slurm-gpu-small (create)" in result.stdout
    assert run("plan", str(FIXTURE), "--offline").returncode == 0


def test_offline_plan_json_schema() -> None:
    plan = json.loads(run("plan", str(FIXTURE), "--offline", "-o", "json").stdout)
    assert plan["formatVersion"] == 1 and plan["offline"] is True
    assert plan["summary"] == {
        "add": 28,
        "change": 0,
        "destroy": 0,
        "unchanged": 0,
        "drain": 0,
        "reconfigure": 1,
    }
    first = plan["changes"][0]
    assert set(first) == {
        "scope",
        "kind",
        "namespace",
        "name",
        "action",
        "before",
        "after",
        "fields",
        "notes",
        "desired",
        "steps",
    }
    assert {c["action"] for c in plan["changes"]} == {"create"}
    scopes = [c["scope"] for c in plan["changes"]]
    assert scopes == sorted(scopes)  # kubernetes first, then slurm: the apply order


def test_live_plan_without_offline_is_a_clear_error() -> None:
    result = run("plan", str(FIXTURE))
    assert result.returncode == 1 and "--offline" in result.stderr


@pytest.mark.parametrize(
    ("values", "files", "expected"),
    [
        ("compute: [\n", {}, "values.yaml:2: invalid YAML"),
        ("compute:\n  nodes:\n    a: {definitions: [nope]}\n", {}, "uses unknown layer 'nope'"),
        (
            "compute:\n  nodes:\n    a: {definitions: [b]}\n    b: {definitions: [a]}\n",
            {},
            "layer cycle: a -> b -> a",
        ),
        ("compute:\n  nodes:\n    a: {replicas: many}\n", {}, "must be a integer"),
        ("compute:\n  nodes:\n    A_b: {definitions: [rtx4000]}\n", {}, "cannot name Slurm nodes"),
        ("compute: {}\n", {"reconciler.yaml": "release: Bad_Name\n"}, "reconciler.yaml:1"),
    ],
)
def test_bad_input_exits_1_without_traceback(
    tmp_path: Path, values: str, files: dict[str, str], expected: str
) -> None:
    repo = write_repo(tmp_path, values, **files)
    for command in (["render"], ["plan", "--offline"], ["compile"]):
        result = run(*command, str(repo))
        if command == ["compile"] and "cannot name" in expected:
            continue  # compile shows definitions; names are checked when nodes are made
        assert result.returncode == 1, (command, result.stdout)
        assert expected in result.stderr and "Traceback" not in result.stderr
        assert result.stdout == ""


def test_missing_repo_directory(tmp_path: Path) -> None:
    result = run("render", str(tmp_path / "nope"))
    assert result.returncode == 1 and "is not a directory" in result.stderr


def test_warnings_go_to_stderr_and_do_not_fail(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, "compute:\n  nodes:\n    a: {definitions: [rtx4000], replica: 2}\n")
    result = run("render", str(repo))
    assert result.returncode == 0
    assert "did you mean 'replicas'?" in result.stderr and "did you mean" not in result.stdout


def test_release_and_namespace_flags_override_reconciler_yaml() -> None:
    result = run("render", str(FIXTURE), "--release", "train", "--namespace", "hpc")
    docs = list(yaml.safe_load_all(result.stdout))
    assert {d["metadata"]["namespace"] for d in docs} == {"hpc"}
    assert "train-gpu-small" in {d["metadata"]["name"] for d in docs}
    bad = run("render", str(FIXTURE), "--release", "Bad_R")
    assert bad.returncode == 1 and "--release must be a DNS label" in bad.stderr
