"""Power saving on the local stack: how long a job waits for a powered-down node.

    python -m bench.power_resume [--rounds 5] [--suspend-time 5]

Starts its own stack from a copy of fixtures/config-repo, switches power saving on in the copy
(`suspendTime`, `minReplicas: 1` on gpu-small) and runs `reconciler run` on it. Each round waits
until slurm-cpu-0 is powered down, submits `sbatch -w slurm-cpu-0 hostname` and times: Pod
bound, slurmd registered, job running. Beside it, in the same round, the same job on a node that
is up (slurm-gpu-small-0, the floor): the ratio is what sleeping costs a job on this machine.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from bench.harness.report import (
    HEADER,
    fmt_row,
    machine_line,
    print_head,
    ratio_text,
    say,
    spread,
)
from bench.harness.stack import ROOT, Stack, start_stack, stop_local_up, stop_on_sigterm
from reconciler.adapters.kube import Kube
from reconciler.local.ports import free_port
from reconciler.local.stack import LocalStack

NAMESPACE = "slurm"
SLEEPER, AWAKE = "slurm-cpu-0", "slurm-gpu-small-0"
PHASES = ("Pod bound", "slurmd registered", "job running")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--suspend-time", type=int, default=5)
    args = parser.parse_args()
    stop_on_sigterm()
    work = Path(tempfile.mkdtemp(prefix="bench-power-"))
    repo = work / "repo"
    shutil.copytree(ROOT / "fixtures" / "config-repo", repo)
    say("starting the local stack")
    stack = start_stack("bench-power", repo)
    daemon = None
    try:
        _power_on(repo, args.suspend_time)
        daemon = _start_daemon(repo, stack, work)
        slurm = LocalStack.open(stack.runtime).slurm
        assert slurm is not None
        kube = Kube.from_kubeconfig(stack.kubeconfig)
        rows: dict[str, list[float]] = {p: [] for p in PHASES}
        awake: list[float] = []
        print(machine_line())
        for round_ in range(args.rounds):
            _wait(lambda: _asleep(slurm.run, SLEEPER), 120, f"{SLEEPER} to power down")
            say(f"round {round_ + 1}: {SLEEPER} is powered down; submitting")
            for phase, seconds in _resume(slurm.run, kube).items():
                rows[phase].append(seconds)
            awake.append(_job_start(slurm.run, AWAKE))
        print(f"\nsbatch on a node, seconds ({args.rounds} rounds, suspendTime "
              f"{args.suspend_time} s):")  # fmt: skip
        print_head(f"  {'':<34}{HEADER}")
        for phase in PHASES:
            print(fmt_row(f"powered down -> {phase}", spread(rows[phase])))
        print(fmt_row("powered up -> job running", spread(awake)))
        text, _ = ratio_text(_median(rows["job running"]), _median(awake))
        print(f"\nmedian job start, powered down / up: {text}")
        return 0
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.wait(timeout=30)
        stop_local_up(stack.runtime, stack.process, timeout=90)
        shutil.rmtree(work, ignore_errors=True)


def _power_on(repo: Path, suspend_time: int) -> None:
    values = yaml.safe_load((repo / "values.yaml").read_text())
    values["slurmConfig"]["slurmd"].update(suspendTime=suspend_time, suspendTimeout=5)
    values["compute"]["nodes"]["gpu-small"]["minReplicas"] = 1
    (repo / "values.yaml").write_text(yaml.safe_dump(values, sort_keys=False))


def _start_daemon(repo: Path, stack: Stack, work: Path) -> subprocess.Popen[bytes]:
    log = (work / "run.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "reconciler", "run", "--source-dir", str(repo),
         "--runtime-dir", str(stack.runtime), "--listen", f"127.0.0.1:{free_port()}",
         "--hooks-api-bind-address", "127.0.0.1:0", "--workdir", str(work / "w")],
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
    )  # fmt: skip


Run = Callable[..., str]


def _state(run: Run, node: str) -> set[str]:
    out = run("scontrol", "show", "node", node, "-o", check=False)
    token = next((t for t in out.split() if t.startswith("State=")), "State=")
    return set(token.removeprefix("State=").split("+"))


def _asleep(run: Run, node: str) -> bool:
    state = _state(run, node)
    return "POWERED_DOWN" in state and "POWERING_UP" not in state


def _resume(run: Run, kube: Kube) -> dict[str, float]:
    started = time.monotonic()
    job = run("sbatch", "--parsable", "-o", "/dev/null", "-w", SLEEPER, "--wrap", "hostname")
    job = job.strip().split(";")[0]
    probes: dict[str, Callable[[], bool]] = {
        "Pod bound": lambda: bool(
            ((kube.get("v1", "Pod", SLEEPER, NAMESPACE) or {}).get("spec") or {}).get("nodeName")
        ),
        "slurmd registered": lambda: (
            not (_state(run, SLEEPER) & {"POWERING_UP", "POWERED_DOWN", "NOT_RESPONDING"})
        ),
        "job running": lambda: _job_state(run, job) in ("RUNNING", "COMPLETING", ""),
    }
    seen: dict[str, float] = {}
    while len(seen) < len(probes):
        if time.monotonic() - started > 120:
            raise SystemExit(f"job {job} not running after 120 s: only {seen}")
        for phase, probe in probes.items():
            if phase not in seen and probe():
                seen[phase] = time.monotonic() - started
        time.sleep(0.05)
    return seen


def _job_start(run: Run, node: str) -> float:
    started = time.monotonic()
    job = run("sbatch", "--parsable", "-o", "/dev/null", "-w", node, "--wrap", "hostname")
    job = job.strip().split(";")[0]
    _wait(lambda: _job_state(run, job) in ("RUNNING", "COMPLETING", ""), 60, f"job {job}")
    return time.monotonic() - started


def _job_state(run: Run, job: str) -> str:
    return run("squeue", "-h", "-j", job, "-o", "%T", check=False).strip()


def _wait(probe: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.2)


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


if __name__ == "__main__":
    sys.exit(main())
