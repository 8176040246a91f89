"""The CI examples' jobs run as their forge runs them, here: each step or script line as
written (bash for shell, node for actions/github-script, python for GitLab's inline scripts),
against a forge on loopback (tests/unit/ci_forge.py), with a stub `reconciler` on PATH whose
plan fails or succeeds per environment. The forge's own parts are stood in for: checkout is
the test's copy of the pull request's files; upload/download-artifact and GitLab's artifacts
copy files as the real ones do (a directory's files under their relative paths, a single file
by its name; merge-multiple writes every artifact into one directory)."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
GITHUB = ROOT / "deploy" / "ci" / "github-reconciler-plan.yml"
GITLAB = ROOT / "deploy" / "ci" / "gitlab-reconciler-plan.yml"
HARNESS = Path(__file__).with_name("ci_github_script.js")
KUBECONFIG_SECRET = "apiVersion: v1\nkind: Config\nusers: [{name: ci, user: {token: s3cr3t-k8s}}]"
SECRET_MARK = "s3cr3t-k8s"
PLAN_TEXT = "THE REAL PLAN"

# `reconciler plan` as the jobs call it: per environment (STUB_PLANS, JSON), an error (exit
# 1, nothing written) or a plan with that verdict (its comment, plan.json, the report).
STUB = """\
import json, os, sys
args = sys.argv[1:]
opt = lambda name: args[args.index(name) + 1] if name in args else None
env = opt("--environment")
verdict = json.loads(os.environ["STUB_PLANS"])[env]
if verdict == "error":
    sys.exit("error: the cluster did not answer")
os.makedirs(opt("--comment-dir"), exist_ok=True)
with open(os.path.join(opt("--comment-dir"), "comment-1.md"), "w") as f:
    f.write(f"<!-- reconciler-plan:{env} verdict={verdict} part=1/1 -->\\n### Plan for {env}\\n\\n"
            f"THE REAL PLAN of {env}: {verdict}\\n")
with open(opt("--out"), "w") as f:
    json.dump({"revision": opt("--revision")}, f)
if opt("-o") == "gitlab-report":
    print(json.dumps({"create": int(verdict != "no-changes"), "update": 0, "delete": 0}))
sys.exit(0 if verdict == "no-changes" else 2)
"""


def load(path: Path) -> dict[Any, Any]:
    # PyYAML reads `on:` as True (YAML 1.1); the forge reads it as the key "on".
    data = yaml.safe_load(path.read_text())
    return {("on" if k is True else k): v for k, v in data.items()}


def tools(tmp_path: Path) -> dict[str, str]:
    """PATH with the stub `reconciler` and `python3` (the image has both)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "reconciler"
    stub.write_text(f"#!{sys.executable}\n{STUB}")
    stub.chmod(0o755)
    if not (bin_dir / "python3").exists():
        (bin_dir / "python3").symlink_to(sys.executable)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path)}


def _files(path: Path) -> dict[str, bytes]:
    """What an artifact holds of `path`: a directory's files by relative path, or the file."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    if path.is_dir():
        return {
            str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
        }
    return {}


def _extract(files: dict[str, bytes], into: Path) -> None:
    for name, data in files.items():
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        (into / name).write_bytes(data)


@dataclass(frozen=True)
class Done:
    ok: bool  # the job succeeded
    log: str


@dataclass
class GitHubRun:
    """One pull request's workflow run: its jobs share the forge and the artifacts."""

    tmp_path: Path
    pull_request: Path  # its files, as actions/checkout leaves them
    forge_url: str
    plans: dict[str, str]
    workflow: dict[str, Any] = field(default_factory=lambda: load(GITHUB))
    artifacts: dict[str, dict[str, bytes]] = field(default_factory=dict)

    def plan(self, environment: str) -> Done:
        return self.job("plan", environment)

    def label(self) -> Done:
        return self.job("label")

    def job(self, name: str, environment: str = "") -> Done:
        """Runs the job on a fresh runner (/home/runner/work/<repo>/<repo> as the workspace,
        /home/runner/work/_temp as RUNNER_TEMP)."""
        runner = self.tmp_path / f"{name}-{environment or 'all'}"
        workspace, temp = runner / "work" / "config" / "config", runner / "work" / "_temp"
        temp.mkdir(parents=True)
        if any(
            "actions/checkout" in s.get("uses", "") for s in self.workflow["jobs"][name]["steps"]
        ):
            shutil.copytree(self.pull_request, workspace, symlinks=True)
        else:
            workspace.mkdir(parents=True)
        known = {
            "matrix.environment": environment,
            "runner.temp": str(temp),
            "github.event.pull_request.head.sha": "abc1234",
            "github.event.pull_request.base.sha": "def5678",
            "secrets.KUBECONFIG": KUBECONFIG_SECRET,
            "secrets.SLURM_JWT": "s3cr3t-jwt",
            "vars.SLURM_URL": "http://127.0.0.1:9",
            "github.event.pull_request.number": "5",
        }
        outputs: dict[str, str] = {}
        base_env = {
            **tools(self.tmp_path),
            "RUNNER_TEMP": str(temp),
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_API_URL": self.forge_url,
            "GITHUB_SERVER_URL": "https://github.example",
            "GITHUB_REPOSITORY": "ops/config",
            "GITHUB_RUN_ID": "42",
            "PR_NUMBER": "5",
            "GITHUB_TOKEN": "ghs_token",
            "STUB_PLANS": json.dumps(self.plans),
        }
        log, failed = [], False

        def expand(text: str) -> str:
            def value(found: re.Match[str]) -> str:
                key = found[1].strip()
                if key.startswith("steps.plan.outputs."):
                    return outputs.get(key.removeprefix("steps.plan.outputs."), "")
                return known[key]

            return re.sub(r"\$\{\{(.*?)\}\}", value, text)

        def runs(step: dict[str, Any]) -> bool:
            condition = str(step.get("if", "success()"))
            if "always()" not in condition and failed:
                return False
            condition = condition.replace("always()", "").replace("success()", "")
            terms = [t.strip() for t in condition.split("&&")]
            for term in filter(None, terms):
                left, op, right = re.fullmatch(r"(\S+) (==|!=) '(.*)'", term).groups()  # type: ignore[union-attr]
                if (expand(f"${{{{ {left} }}}}") == right) != (op == "=="):
                    return False
            return True

        for step in self.workflow["jobs"][name]["steps"]:
            if not runs(step):
                continue
            uses, env = (
                step.get("uses", ""),
                {k: expand(str(v)) for k, v in (step.get("env") or {}).items()},
            )
            env = {
                **base_env,
                **{k: str(v) for k, v in (self.workflow.get("env") or {}).items()},
                **env,
            }
            given = {k: expand(str(v)) for k, v in (step.get("with") or {}).items()}
            if uses.startswith(("actions/checkout", "actions/setup-python")):
                continue
            if "run" in step:
                if step["run"].lstrip().startswith("pip install"):
                    continue  # what it installs is the stub on PATH (the name test checks it)
                output = runner / "github_output"
                output.write_text("")
                done = subprocess.run(
                    ["bash", "-e", "-c", step["run"]],
                    cwd=workspace,
                    env={**env, "GITHUB_OUTPUT": str(output)},
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                outputs |= dict(line.split("=", 1) for line in output.read_text().splitlines())
            elif uses.startswith("actions/github-script"):
                script = runner / "script.js"
                script.write_text(step["with"]["script"])
                done = subprocess.run(
                    ["node", str(HARNESS), str(script)],
                    cwd=workspace,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                if "::error::" in done.stdout:
                    done.returncode = 1
            elif uses.startswith("actions/upload-artifact"):
                files = _files(workspace / given["path"])
                assert files or given.get("if-no-files-found") == "ignore", given
                if files:
                    self.artifacts[given["name"]] = files
                continue
            elif uses.startswith("actions/download-artifact"):
                into = workspace / given.get("path", ".")
                for artifact, files in self.artifacts.items():
                    if fnmatch.fnmatch(artifact, given.get("pattern", "*")):
                        merged = given.get("merge-multiple") in ("true", "True")
                        _extract(files, into if merged else into / artifact)
                continue
            else:
                raise AssertionError(f"no stand-in for {uses}")
            log.append(done.stdout + done.stderr)
            failed = failed or done.returncode != 0
        return Done(not failed, "\n".join(log))


def gitlab_job(config: dict[str, Any], name: str) -> dict[str, Any]:
    """A GitLab job with what it `extends` merged in (variables key by key)."""
    job = dict(config[name])
    parents = job.pop("extends", [])
    merged: dict[str, Any] = {}
    for parent in [parents] if isinstance(parents, str) else parents:
        merged |= gitlab_job(config, parent)
    variables = {**merged.get("variables", {}), **job.get("variables", {})}
    return {**merged, **job, "variables": variables}


@dataclass
class GitLabPipeline:
    """One merge request's pipeline: its jobs share the forge and the artifacts."""

    tmp_path: Path
    merge_request: Path  # its files, as the runner's checkout leaves them (with .git)
    forge_url: str
    plans: dict[str, str]
    config: dict[str, Any] = field(default_factory=lambda: load(GITLAB))
    artifacts: dict[str, dict[str, bytes]] = field(default_factory=dict)

    def plan(self, environment: str) -> Done:
        return self.job(f"reconciler-plan-{environment}")

    def label(self) -> Done:
        return self.job("reconciler-label")

    def job(self, name: str) -> Done:
        job, builds = gitlab_job(self.config, name), self.tmp_path / "builds" / name
        project = builds / "ops" / "config"
        kubeconfig = builds / "ops" / "config.tmp" / "KUBECONFIG"  # a File variable's place
        kubeconfig.parent.mkdir(parents=True)
        kubeconfig.write_text(KUBECONFIG_SECRET)
        variables = {**self.config.get("variables", {}), **job["variables"]}
        if variables.get("GIT_STRATEGY") in ("none", "empty"):
            project.mkdir(parents=True)
        else:
            shutil.copytree(self.merge_request, project, symlinks=True)
        # Artifacts of the jobs it needs, else of every job of an earlier stage, in order.
        stages = self.config["stages"]
        earlier = [
            j
            for j in self.artifacts
            if stages.index(gitlab_job(self.config, j)["stage"]) < stages.index(job["stage"])
        ]
        for other in job.get("needs") or earlier:
            _extract(self.artifacts.get(other, {}), project)
        environment = (job.get("environment") or {}).get("name", "")
        env = {
            **tools(self.tmp_path),
            **{k: str(v) for k, v in variables.items()},
            "CI_PROJECT_DIR": str(project),
            "CI_API_V4_URL": f"{self.forge_url}/api/v4",
            "CI_PROJECT_ID": "3",
            "CI_MERGE_REQUEST_IID": "5",
            "CI_JOB_URL": "https://gl/j/1",
            "CI_ENVIRONMENT_NAME": environment,
            "CI_COMMIT_SHA": "abc1234",
            "CI_MERGE_REQUEST_DIFF_BASE_SHA": "def5678",
            "KUBECONFIG": str(kubeconfig),
            "SLURM_URL": "http://127.0.0.1:9",
            "SLURM_JWT": "s3cr3t-jwt",
            "GITLAB_TOKEN": "glpat-token",
            "STUB_PLANS": json.dumps(self.plans),
        }
        # The runner runs the script's lines in one shell, stopping at the first that fails.
        script = "\n".join(line for line in job["script"] if "pip install" not in line)
        done = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        kept: dict[str, bytes] = {}
        artifacts = job.get("artifacts") or {}
        if done.returncode == 0 or artifacts.get("when") == "always":
            for path in artifacts.get("paths", []):
                found = _files(project / os.path.expandvars(path))
                kept |= {
                    f"{path.rstrip('/')}/{k}" if (project / path).is_dir() else path: v
                    for k, v in found.items()
                }
        self.artifacts[name] = kept
        return Done(done.returncode == 0, done.stdout + done.stderr)
