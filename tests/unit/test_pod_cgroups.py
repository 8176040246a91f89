"""A Pod's cgroup on the local stack (reconciler/local/agent/pod_cgroups.py): what joins it
ends with it, and without cgroup access nothing is placed and that is said once. The kernel's
freezer hierarchy is used where this runs as root (it is on the project's machines and in CI);
elsewhere those tests skip. tests/integration/test_local_pod_jobs.py runs it under Slurm."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.local.agent import pod_cgroups
from reconciler.local.agent.pod_cgroups import FREEZER, PodCgroups
from reconciler.local.processes import Supervisor

IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
    "print('ready', flush=True); time.sleep(60)"  # fmt: skip


@pytest.fixture
def cgroups() -> Iterator[PodCgroups]:
    if not os.access(FREEZER, os.W_OK):
        pytest.skip(f"no write access to {FREEZER}")
    made = PodCgroups(f"unit-{uuid.uuid4().hex[:8]}")
    yield made
    made.remove_run()


def start_in(cgroups: PodCgroups, pod: str, *argv: str) -> subprocess.Popen[str]:
    child = subprocess.Popen([*cgroups.join_prefix(pod), *argv], stdout=subprocess.PIPE,
                             text=True)  # fmt: skip
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    return child


def test_ending_a_pod_ends_every_process_in_its_cgroup_then_removes_it(
    cgroups: PodCgroups,
) -> None:
    polite = start_in(cgroups, "uid-1", "sh", "-c", "echo ready; exec sleep 60")
    stubborn = start_in(cgroups, "uid-1", sys.executable, "-c", IGNORES_SIGTERM)
    other = start_in(cgroups, "uid-2", "sh", "-c", "echo ready; exec sleep 60")
    assert sorted(cgroups.pids("uid-1")) == sorted([polite.pid, stubborn.pid])

    assert cgroups.end("uid-1", grace=0.5) == 2
    assert polite.wait(timeout=5) == -signal.SIGTERM
    assert stubborn.wait(timeout=5) == -signal.SIGKILL  # after the grace period
    assert not (cgroups.directory / "poduid-1").exists()
    assert other.poll() is None  # another Pod's cgroup is not touched

    assert cgroups.remove_run() == 1  # `local down`: what is left, SIGKILLed
    assert other.wait(timeout=5) == -signal.SIGKILL
    assert not cgroups.directory.exists()


def test_a_pod_without_processes_ends_at_once(cgroups: PodCgroups) -> None:
    assert cgroups.end("never-started", grace=30) == 0
    assert cgroups.join_prefix("started") and cgroups.end("started", grace=30) == 0


def test_without_cgroup_access_nothing_is_placed_and_it_is_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(PodCgroups, "_warned", False)
    not_a_hierarchy = tmp_path / "file"
    not_a_hierarchy.write_text("")  # mkdir below it fails, as without write access
    with caplog.at_level(logging.WARNING, logger=pod_cgroups.__name__):
        for run in ("a", "b"):
            cgroups = PodCgroups(run, hierarchy=not_a_hierarchy)
            assert cgroups.join_prefix("uid-1") == []
            assert cgroups.end("uid-1", grace=1) == 0
            assert cgroups.remove_run() == 0
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "run `local up` as root" in warnings[0]


def test_the_run_directory_is_the_same_for_up_and_a_later_down(tmp_path: Path) -> None:
    root = tmp_path / "stack" / "slurm"
    run = PodCgroups.of_run(root).directory
    assert run == PodCgroups.of_run(root).directory and run.name.startswith("stack-")
    assert run != PodCgroups.of_run(tmp_path / "other" / "slurm").directory


def test_daemons_started_while_placed_run_behind_the_prefix(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path / "pids", tmp_path / "logs")
    say = ["/bin/sh", "-c", 'echo "placed=${PLACED:-no}"']
    with supervisor.placed(["/usr/bin/env", "PLACED=yes"]):
        supervisor.start("inside", say)
    supervisor.start("outside", say)
    deadline = time.monotonic() + 10
    while supervisor.reap_exited() != [] or supervisor.children():
        assert time.monotonic() < deadline, "the daemons did not exit"
        time.sleep(0.02)
    assert supervisor.logfile("inside").read_text() == "placed=yes\n"
    assert supervisor.logfile("outside").read_text() == "placed=no\n"
