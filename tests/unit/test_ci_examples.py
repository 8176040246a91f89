"""The CI examples of deploy/ci/: valid for their forge (SchemaStore's GitHub workflow schema
and GitLab's CI schema, as check-jsonschema vendors them), and their plan step, run as the
forge runs it (offline here), makes the comment they post from a real plan."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from reconciler.plan.markdown import MARKER
from tests.unit.test_cli import FIXTURE

ROOT = Path(__file__).resolve().parents[2]
GITHUB = ROOT / "deploy" / "ci" / "github-reconciler-plan.yml"
GITLAB = ROOT / "deploy" / "ci" / "gitlab-reconciler-plan.yml"


def _schema(name: str) -> dict[str, Any]:
    vendor = resources.files("check_jsonschema.builtin_schemas.vendor")
    return json.loads((vendor / name).read_text())


def _load(path: Path) -> dict[Any, Any]:
    # PyYAML reads `on:` as True (YAML 1.1); the forge reads it as the key "on".
    data = yaml.safe_load(path.read_text())
    return {("on" if k is True else k): v for k, v in data.items()}


@pytest.mark.parametrize(
    ("path", "schema"),
    [(GITHUB, "github-workflows.json"), (GITLAB, "gitlab-ci.json")],
)
def test_ci_files_are_valid_for_their_forge(path: Path, schema: str) -> None:
    validator = jsonschema.Draft7Validator(_schema(schema))
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(_load(path))]
    assert errors == []


def _reconciler_on_path(tmp_path: Path) -> dict[str, str]:
    """`reconciler` as the forge installs it: this tree's code."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "reconciler"
    tool.write_text(f'#!/bin/sh\nexec {sys.executable} -m reconciler "$@"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}


def _config_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "config"
    shutil.copytree(FIXTURE, repo)
    return repo


def test_github_plan_step_makes_the_comment_the_script_finds(tmp_path: Path) -> None:
    steps = _load(GITHUB)["jobs"]["plan"]["steps"]
    plan_step = next(s for s in steps if s.get("id") == "plan")
    repo, output = _config_repo(tmp_path), tmp_path / "github_output"
    env = {**_reconciler_on_path(tmp_path), "ENVIRONMENT": "production",
           "REVISION": "abc1234", "BASE": "def5678", "RECONCILER_TARGET": "--offline",
           "GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(tmp_path)}  # fmt: skip
    done = subprocess.run(["bash", "-e", "-c", plan_step["run"]], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert output.read_text() == "exitcode=2\n"  # changes (--detailed-exitcode)
    comment = (repo / "comment" / "comment-1.md").read_text()
    post = next(s for s in steps if "sticky" in s.get("name", ""))["with"]["script"]
    assert f"`<!-- {MARKER}:${{env}} `" in post  # the marker it looks for ...
    assert comment.startswith(f"<!-- {MARKER}:production ")  # ... is the comment's
    assert "revision `abc1234`" in comment and "base `def5678`" in comment
    assert (repo / "verdict" / "production").read_text() == "changes\n"
    assert json.loads((repo / "plan.json").read_text())["revision"] == "abc1234"


def test_gitlab_plan_job_makes_the_note_and_the_terraform_report(tmp_path: Path) -> None:
    config = _load(GITLAB)
    job = config[".reconciler-plan"]
    plan_script = next(line for line in job["script"] if "reconciler plan" in line)
    repo = _config_repo(tmp_path)
    env = {**_reconciler_on_path(tmp_path), "CI_ENVIRONMENT_NAME": "staging",
           "CI_COMMIT_SHA": "abc1234", "CI_MERGE_REQUEST_DIFF_BASE_SHA": "def5678",
           "RECONCILER_TARGET": "--offline"}  # fmt: skip
    done = subprocess.run(["bash", "-e", "-c", plan_script], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (repo / "exitcode").read_text() == "2\n"
    report = json.loads((repo / "tfplan.json").read_text())
    assert report == {"create": 28, "update": 0, "delete": 0}
    assert job["artifacts"]["reports"]["terraform"] == "tfplan.json"
    note = (repo / "comment" / "comment-1.md").read_text()
    assert note.startswith(f"<!-- {MARKER}:staging verdict=changes part=1/1 -->")
    assert 'marker = f"<!-- reconciler-plan:{env} "' in config["variables"]["POST_NOTE"]
    for name in ("POST_NOTE", "SET_LABEL"):  # the inline scripts are Python
        compile(config["variables"][name], name, "exec")
