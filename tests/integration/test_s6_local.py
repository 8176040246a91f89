"""compute.s6 on the real local stack: `local up` of the fixture repo plus a oneshot and a
longrun, and on a slurmd Pod the oneshot ran (Debian's execlineb on the rendered `up`, before
slurmd) and the longrun is supervised by Debian's s6-svscan: killed, it runs again. Deleting
the Pod stops both. Debian has no s6-rc, so the source tree is read as s6-rc-compile would
(docs/compute-services.md)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.adapters.kube import Kube
from reconciler.local.agent.s6_services import pod_s6_dir
from reconciler.local.processes import is_running
from tests.integration.helpers import wait_for
from tests.integration.local_up import RepoStack, fixture_stack

POD = "slurm-cpu-0"
S6_VALUES = """compute:
  s6:
    hello:
      type: oneshot
      script: |
        #!/usr/bin/env bash
        # Field 22 of /proc/PID/stat: when this script started, in clock ticks since boot.
        echo "oneshot $0 ran, started at $(cut -d' ' -f22 /proc/$$/stat)" > /etc/s6-test-oneshot
        # What it leaves running ends with the Pod, as in a container.
        setsid sleep 1004 < /dev/null > /dev/null 2>&1 &
        echo $! > /etc/s6-test-left-running
    ticker:
      type: longrun
      script: |
        #!/usr/bin/env bash
        echo "$$" >> /etc/s6-test-longrun-starts
        exec sleep 1000
"""


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[RepoStack]:
    for program in ("s6-svscan", "s6-svstat", "execlineb"):
        if shutil.which(program) is None:
            pytest.fail(f"{program} is not installed: tools/setup.sh installs s6 "
                        "and execline")  # fmt: skip
    with fixture_stack("s6", stack_timings, {"40-s6.yaml": S6_VALUES}) as stack:
        yield stack


def _svstat(service: Path) -> str:
    done = subprocess.run(["s6-svstat", str(service)], capture_output=True, text=True,
                          timeout=10, check=False)  # fmt: skip
    return done.stdout.strip() if done.returncode == 0 else f"(s6-svstat: {done.stderr.strip()})"


def _up_pid(service: Path) -> int | None:
    """The supervised process's PID while s6-svstat says it is up."""
    words = _svstat(service).split()
    return int(words[2].rstrip(")")) if words[:2] == ["up", "(pid"] else None


def test_the_oneshot_ran_with_execlineb_before_slurmd_in_the_pods_own_etc(env: RepoStack) -> None:
    home = pod_s6_dir(env.slurm.paths.run / "s6", "slurm", POD)
    written = home / "etc" / "upper" / "s6-test-oneshot"
    said, started = written.read_text().rsplit(" ", 1)
    assert said == "oneshot /etc/s6-overlay/scripts/hello ran, started at"
    slurmd = env.running.stack.supervisor.running(f"slurmd-{POD}")
    assert slurmd is not None
    assert int(started) < slurmd.start_ticks  # the user bundle first, then the command
    # The fixture's own oneshot wrote the Pod's /etc/motd, never the host's.
    assert (home / "etc" / "upper" / "motd").read_text() == "managed by reconciler\n"
    assert "managed by reconciler" not in _read(Path("/etc/motd"))
    assert not Path("/etc/s6-test-oneshot").exists()
    log = env.running.stack.supervisor.logfile(f"s6-svscan-{POD}").read_text()
    assert "s6: oneshot hello exited 0" in log and "s6: oneshot motd exited 0" in log


def test_the_longrun_is_supervised_and_runs_again_when_killed(env: RepoStack) -> None:
    home = pod_s6_dir(env.slurm.paths.run / "s6", "slurm", POD)
    service = home / "service" / "ticker"
    supervisor = env.running.stack.supervisor
    assert supervisor.running(f"s6-svscan-{POD}") is not None
    wait_for(lambda: _up_pid(service) is not None, 15, f"ticker up: {_svstat(service)}")
    first = _up_pid(service)
    assert first is not None
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: _up_pid(service) not in (None, first), 15,
             f"s6-supervise to run ticker again: {_svstat(service)}")  # fmt: skip
    second = _up_pid(service)
    starts = (home / "etc" / "upper" / "s6-test-longrun-starts").read_text().split()
    assert starts[-2:] == [str(first), str(second)]


def test_deleting_the_pod_stops_its_supervision_tree(env: RepoStack) -> None:
    service = pod_s6_dir(env.slurm.paths.run / "s6", "slurm", POD) / "service" / "ticker"
    longrun = _up_pid(service)
    svscan = env.running.stack.supervisor.running(f"s6-svscan-{POD}")
    assert longrun is not None and svscan is not None
    home = pod_s6_dir(env.slurm.paths.run / "s6", "slurm", POD)
    left_by_oneshot = int((home / "etc" / "upper" / "s6-test-left-running").read_text())
    assert is_running(left_by_oneshot)
    kube = Kube.from_kubeconfig(env.running.stack.kube_paths.kubeconfig)
    kube.delete("v1", "Pod", POD, "slurm", grace_period_seconds=0)
    wait_for(lambda: not is_running(svscan.pid) and not is_running(longrun), 60,
             "s6-svscan and its longrun to stop with the Pod")  # fmt: skip
    wait_for(lambda: not is_running(left_by_oneshot), 30,
             "what the oneshot left running to stop with the Pod")  # fmt: skip
    # The StatefulSet makes the Pod again: a new supervision tree, the longrun up again.
    wait_for(lambda: _up_pid(service) not in (None, longrun), 120,
             f"the new Pod's ticker: {_svstat(service)}")  # fmt: skip


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
