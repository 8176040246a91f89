"""`reconciler local up` as a user runs it (a subprocess), for tests that need the whole stack:
Kubernetes, Slurm and the node agent, from a config repo.

Teardown is `reconciler local down`, then checks that every process and port is gone.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconciler.local.slurm.cluster import SlurmCluster
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import STATE_FILE, new_temp_runtime_dir
from tests.integration.conftest import require_kube_binaries, require_slurm_binaries
from tests.integration.local_stack_ops import (
    leftover_processes,
    listening_ports,
    recorded_pids,
    recorded_ports,
)


@dataclass
class RunningUp:
    runtime: Path
    up: subprocess.Popen[bytes]
    log: Path
    stack: LocalStack
    pids: set[int]

    def output(self) -> str:
        return f"`local up` (exit status {self.up.poll()}) said:\n{self.log.read_text('utf-8')}"

    @property
    def slurm(self) -> SlurmCluster:
        slurm = self.stack.slurm
        assert slurm is not None
        return slurm

    def assert_alive(self) -> None:
        text = self.log.read_text(errors="replace")
        if self.up.poll() is not None or "Traceback" in text or "local stack stopped" in text:
            pytest.fail(self.output())


@dataclass
class RepoStack:
    """A test module's copy of a config repo, its work directory and the stack from it."""

    repo: Path
    work: Path
    running: RunningUp

    @property
    def runtime(self) -> Path:
        return self.running.runtime

    @property
    def slurm(self) -> SlurmCluster:
        return self.running.slurm

    # `plan` and `apply` of the repo against the stack, as a user runs them.

    def cli_output(self, result: subprocess.CompletedProcess[str]) -> str:
        """A command's output for a failure message, with what `local up` said."""
        return f"exit {result.returncode}\n{result.stdout}{result.stderr}\n{self.running.output()}"

    def plan_json(self, *extra: str) -> dict[str, Any]:
        """`plan -o json --detailed-exitcode`: exit 2 exactly when the JSON lists changes."""
        result = self.plan_text("-o", "json", *extra)
        plan: dict[str, Any] = json.loads(result.stdout)
        assert result.returncode == (2 if plan["changes"] else 0), self.cli_output(result)
        return plan

    def plan_text(self, *extra: str) -> subprocess.CompletedProcess[str]:
        self.running.assert_alive()
        result = reconciler_cli(
            "plan", str(self.repo), "--runtime-dir", str(self.runtime), "--detailed-exitcode",
            *extra,
        )  # fmt: skip
        assert result.returncode in (0, 2), self.cli_output(result)
        return result

    def apply(self, *extra: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        """`apply --yes`; it must exit 0 (or, with ok=False, must not)."""
        self.running.assert_alive()
        result = reconciler_cli(
            "apply", str(self.repo), "--runtime-dir", str(self.runtime), "--yes", *extra,
            timeout=180,
        )  # fmt: skip
        assert (result.returncode == 0) == ok, self.cli_output(result)
        return result


FIXTURE_REPO = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"


@contextlib.contextmanager
def fixture_stack(
    name: str, timings: dict[str, float], values: Mapping[str, str] | None = None
) -> Iterator[RepoStack]:
    """`local up` of a copy of the fixture repo plus `values` (values.d file name -> text),
    in a work directory of its own; `name` labels its directories and timings."""
    work = Path(tempfile.mkdtemp(prefix=f"sunk-reconciler-{name}-work-"))
    repo = work / "repo"
    try:
        shutil.copytree(FIXTURE_REPO, repo)
        for file, text in (values or {}).items():
            (repo / "values.d" / file).write_text(text)
        with local_up(repo, work / "up.log", prefix=f"sunk-reconciler-{name}-",
                      timings=timings, label=f"{name} tests") as running:  # fmt: skip
            yield RepoStack(repo, work, running)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def reconciler_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args], capture_output=True, text=True, timeout=timeout
    )


@contextlib.contextmanager
def local_up(
    repo: Path,
    log: Path,
    *,
    prefix: str,
    timings: dict[str, float],
    label: str,
    extra_args: Sequence[str] = (),
) -> Iterator[RunningUp]:
    """`extra_args`: more `local up` flags (`--slurm 22.05`)."""
    require_kube_binaries()
    require_slurm_binaries()
    runtime = new_temp_runtime_dir(prefix)
    started = time.monotonic()
    with log.open("wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "local", "up", str(repo), "--runtime-dir",
             str(runtime), *extra_args],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    running = None
    try:
        _wait_for_log(up, log, "local: ready in", timeout=150)
        timings[f"{label}: `local up` to ready"] = time.monotonic() - started
        stack = LocalStack.open(runtime)
        running = RunningUp(runtime, up, log, stack, set(recorded_pids(stack)))
        yield running
    finally:
        _down(runtime, up, log, running)


def _down(runtime: Path, up: subprocess.Popen[bytes], log: Path, running: RunningUp | None) -> None:
    stack = LocalStack.open(runtime) if (runtime / STATE_FILE).exists() else None
    pids = set(running.pids if running else ()) | set(recorded_pids(stack) if stack else ())
    ports = (recorded_ports(stack) | _slurmd_ports(stack)) if stack else set()
    down = reconciler_cli("local", "down", "--runtime-dir", str(runtime), timeout=90)
    with contextlib.suppress(subprocess.TimeoutExpired):
        up.wait(timeout=60)
    if up.poll() is None:
        up.kill()
        up.wait()
    left = leftover_processes(stack, sorted(pids)) if stack else []
    busy = ports & listening_ports()
    text = log.read_text(errors="replace")
    shutil.rmtree(runtime, ignore_errors=True)
    assert down.returncode == 0, down.stdout + down.stderr
    assert up.returncode == 0, f"`local up` exited {up.returncode}:\n{text}"
    assert not left, "processes left after down: " + "; ".join(left)
    assert not busy, f"ports still listening after down: {sorted(busy)}"


def _wait_for_log(
    process: subprocess.Popen[bytes], log: Path, marker: str, *, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if marker in text:
            return
        if process.poll() is not None:
            pytest.fail(f"`local up` exited {process.returncode}:\n{text}")
        time.sleep(0.2)
    pytest.fail(f"`local up` not ready after {timeout} s:\n{log.read_text(errors='replace')}")


def _slurmd_ports(stack: LocalStack) -> set[int]:
    """Ports of nodes added after `up` (the stack's state records only the first ones)."""
    conf = stack.slurm_paths.slurm_conf
    text = conf.read_text() if conf.exists() else ""
    return {int(port) for port in re.findall(r"^NodeName=\S+ .*\bPort=(\d+)", text, re.M)}
