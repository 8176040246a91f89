"""The CI examples of deploy/ci/: valid for their forge (SchemaStore's GitHub workflow schema
and GitLab's CI schema, as check-jsonschema vendors them); they run our release only (our
image, by digest); and their plan step, run as the forge runs it (offline here), makes the
comment they post from a real plan. Hostile pull requests: test_ci_examples_hostile.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from reconciler.plan.markdown import MARKER
from tests.unit.ci_jobs import GITHUB, GITLAB, ROOT, gitlab_job
from tests.unit.ci_jobs import load as _load
from tests.unit.test_cli import FIXTURE


def _schema(name: str) -> dict[str, Any]:
    vendor = resources.files("check_jsonschema.builtin_schemas.vendor")
    return json.loads((vendor / name).read_text())


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
    out = tmp_path / "reconciler-plan"  # under $RUNNER_TEMP: no commit reaches it
    assert output.read_text() == (f"verdict={out}/verdict/production\n"
                                  "exitcode=2\n")  # changes (--detailed-exitcode)  # fmt: skip
    comment = (out / "comment" / "comment-1.md").read_text()
    post = next(s for s in steps if "sticky" in s.get("name", ""))["with"]["script"]
    assert f"`<!-- {MARKER}:${{env}} `" in post  # the marker it looks for ...
    assert comment.startswith(f"<!-- {MARKER}:production ")  # ... is the comment's
    assert "revision `abc1234`" in comment and "base `def5678`" in comment
    assert (out / "verdict" / "production").read_text() == "changes\n"
    assert json.loads((out / "plan.json").read_text())["revision"] == "abc1234"
    assert sorted(p.name for p in repo.iterdir()) == sorted(p.name for p in FIXTURE.iterdir())


def test_gitlab_plan_job_makes_the_note_and_the_terraform_report(tmp_path: Path) -> None:
    config = _load(GITLAB)
    job = config[".reconciler-plan"]
    plan_script = next(line for line in job["script"] if "reconciler plan" in line)
    repo, temp = _config_repo(tmp_path), tmp_path / "tmp"
    temp.mkdir()
    env = {**_reconciler_on_path(tmp_path), "CI_ENVIRONMENT_NAME": "staging",
           "CI_COMMIT_SHA": "abc1234", "CI_MERGE_REQUEST_DIFF_BASE_SHA": "def5678",
           "RECONCILER_TARGET": "--offline", "TMPDIR": str(temp)}  # fmt: skip
    done = subprocess.run(["bash", "-e", "-c", plan_script], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    [out] = temp.iterdir()  # $RECONCILER_OUT, outside $CI_PROJECT_DIR
    report = json.loads((repo / "reconciler-plan" / "tfplan.json").read_text())
    assert report == {"create": 28, "update": 0, "delete": 0}
    assert job["artifacts"]["paths"] == ["reconciler-plan/"]  # made from its own files
    assert job["artifacts"]["reports"]["terraform"] == "reconciler-plan/tfplan.json"
    assert (repo / "reconciler-plan" / "verdict" / "staging").read_text() == "changes\n"
    note = (out / "comment" / "comment-1.md").read_text()
    assert note.startswith(f"<!-- {MARKER}:staging verdict=changes part=1/1 -->")
    assert 'marker = f"<!-- reconciler-plan:{env} "' in config["variables"]["POST_NOTE"]
    for name in ("POST_NOTE", "SET_LABEL"):  # the inline scripts are Python
        compile(config["variables"][name], name, "exec")


# Our image by digest; the tag is the project's version (the digest is what is pulled).
OUR_IMAGE = re.compile(r"ghcr\.io/sunk-reconciler/reconciler:(?P<tag>[\w.-]+)"
                       r"@sha256:(?:[0-9a-f]{64}|REPLACE-WITH-THE-IMAGE-DIGEST)")  # fmt: skip


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def _image(value: Any) -> str:
    return str(value["name"] if isinstance(value, dict) and "name" in value else
               value["image"] if isinstance(value, dict) else value)  # fmt: skip


def _images(path: Path) -> list[tuple[str, str]]:
    """(job, image) for every image a job runs in: its container/image and services, and
    `docker://` steps."""
    config, found = _load(path), []
    if path == GITHUB:
        for name, job in config["jobs"].items():
            found += [(name, _image(job["container"]))] if "container" in job else []
            found += [(name, _image(s)) for s in (job.get("services") or {}).values()]
            found += [(name, s["uses"].removeprefix("docker://")) for s in job["steps"]
                      if str(s.get("uses", "")).startswith("docker://")]  # fmt: skip
        return found
    jobs = [n for n, v in config.items() if isinstance(v, dict) and "script" in v]
    found += [("default", _image(config["default"]["image"]))] if "image" in config.get(
        "default", {}) else []  # fmt: skip
    if "image" in config:
        found.append(("top", _image(config["image"])))
    for name in jobs:
        job = gitlab_job(config, name)
        found += [(name, _image(job["image"]))] if "image" in job else []
        found += [(name, _image(s)) for s in job.get("services") or []]
    return found


@pytest.mark.parametrize("path", [GITHUB, GITLAB], ids=["github", "gitlab"])
def test_ci_examples_run_our_release_only(path: Path) -> None:
    """`reconciler` on PyPI is another project's: the jobs run our image, by digest, and pip
    installs nothing but a hash-pinned requirements file."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    images = _images(path)
    assert images, "no job runs in our image"
    for job, image in images:
        found = OUR_IMAGE.fullmatch(image)
        assert found, f"{job} runs {image}, not our image by digest"
        assert found["tag"] == version
    for text in _strings(_load(path)):
        for command in re.findall(r"pip3? install[^\n;&|]*", text):
            words = command.split()[2:]
            assert "--require-hashes" in words and "-r" in words, command
            assert all(w.startswith("-") or words[i - 1] == "-r" for i, w in enumerate(words))


def test_every_job_that_plans_runs_in_our_image() -> None:
    github = _load(GITHUB)["jobs"]
    for name, job in github.items():
        if any("reconciler plan" in str(s.get("run", "")) for s in job["steps"]):
            assert OUR_IMAGE.fullmatch(_image(job.get("container", ""))), name
    gitlab = _load(GITLAB)
    for name in [n for n, v in gitlab.items() if isinstance(v, dict) and "script" in v]:
        job = gitlab_job(gitlab, name)
        assert OUR_IMAGE.fullmatch(_image(job.get("image", ""))), name
