"""Jobs end with their slurmd Pod on the local stack, as kubelet's cgroups end them: a job
running `sleep` on a slurmd Pod's node, then the Pod deleted, or its slurmd killed and
restarted by the node agent, or the stack brought down; each time the job's slurmstepd and its
`sleep` end, and Slurm sees the job end (docs/local-stack.md, "Jobs end with their slurmd
Pod"). slurmstepd daemonizes away from slurmd, so stopping slurmd's process tree misses it."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.adapters.kube import Kube
from reconciler.local.processes import is_running, process_start_ticks
from tests.integration.helpers import wait_for
from tests.integration.local_up import RepoStack, fixture_stack, reconciler_cli

NAMESPACE = "slurm"
# Slurm's terminal states for a job whose node died under it (no requeue asked for).
ENDED = {"NODE_FAIL", "FAILED"}
# slurmctld ends a batch job that its node's slurmd does not report when that slurmd
# registers, if the job started (and was last reported) long enough before: BatchStartTimeout
# plus MessageTimeout, 20 s by default. A younger one ends at the node's next periodic
# registration, minutes later.
JOB_AGE_SECONDS = 25.0

Process = tuple[int, int]  # pid, start ticks: a pid reused later is not the same process


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[RepoStack]:
    with fixture_stack("podjobs", stack_timings) as stack:
        yield stack


def job_processes(job: str) -> list[Process]:
    """The job's slurmstepd and every process that carries its SLURM_JOB_ID."""
    found = []
    marker = f"SLURM_JOB_ID={job}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline.startswith(f"slurmstepd: [{job}.".encode()) or marker in environ:
            ticks = process_start_ticks(int(entry.name))
            if ticks is not None and is_running(int(entry.name)):
                found.append((int(entry.name), ticks))
    return found


def alive(processes: list[Process]) -> list[str]:
    """Those still running, with their command lines."""
    return [f"{pid} {_cmdline(pid)}" for pid, ticks in processes
            if is_running(pid) and process_start_ticks(pid) == ticks]  # fmt: skip


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "(gone)"


def start_job(env: RepoStack, node: str, script: str) -> tuple[str, list[Process]]:
    """sbatch `script` on `node` (no requeue: its end is final); the job id and its
    processes once its slurmstepd and `sleep` run, and it is JOB_AGE_SECONDS old."""
    job = env.slurm.run("sbatch", "--parsable", "--no-requeue", "-w", node, "-o", "/dev/null",
                        "--wrap", script).strip()  # fmt: skip
    wait_for(lambda: env.slurm.run("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING",
             30, f"job {job} RUNNING")  # fmt: skip
    running_since = time.monotonic()

    def started() -> list[Process] | None:
        found = job_processes(job)
        argv0s = {_cmdline(pid).split(" ")[0] for pid, _ in found}
        steps = {f"slurmstepd: [{job}.batch]", f"slurmstepd: [{job}.0]"}
        sleeping = any(Path(argv0).name == "sleep" for argv0 in argv0s)
        return found if sleeping and {_cmdline(pid) for pid, _ in found} >= steps else None

    found = wait_for(started, 30, f"job {job}'s slurmstepd (batch, step 0) and sleep")
    time.sleep(max(0.0, running_since + JOB_AGE_SECONDS - time.monotonic()))
    return job, found


def job_state(env: RepoStack, job: str) -> str:
    return " ".join(env.slurm.run("sacct", "-n", "-X", "-j", job, "-o", "State").split())


def pod_uid(kube: Kube, name: str) -> str | None:
    pod = kube.get("v1", "Pod", name, NAMESPACE)
    running = pod is not None and (pod.get("status") or {}).get("phase") == "Running"
    return pod["metadata"]["uid"] if running and pod is not None else None


def test_deleting_a_slurmd_pod_ends_its_jobs(env: RepoStack, figures: dict[str, str]) -> None:
    node = "slurm-cpu-0"
    job, processes = start_job(env, node, "srun sleep 1000")
    kube = Kube.from_kubeconfig(env.running.stack.kube_paths.kubeconfig)
    old = pod_uid(kube, node)
    assert old is not None
    kube.delete("v1", "Pod", node, NAMESPACE)  # as `kubectl delete pod`, with its grace
    wait_for(lambda: pod_uid(kube, node) not in (None, old), 60, f"pod {node} made again")
    try:
        wait_for(lambda: not alive(processes), 30, f"job {job}'s processes to end with the Pod")
    finally:
        figures["job processes left 30 s after deleting their slurmd Pod"] = (
            f"{len(alive(processes))} of {len(processes)}"
        )
    wait_for(lambda: job_state(env, job) in ENDED, 60, f"Slurm to end job {job}")
    figures["state of a job whose slurmd Pod was deleted"] = job_state(env, job)
    wait_for(lambda: "IDLE" in env.slurm.node_state(node), 60, f"{node} IDLE again")


def test_a_slurmd_restarted_by_liveness_ends_its_jobs(
    env: RepoStack, figures: dict[str, str]
) -> None:
    node = "slurm-gpu-small-0"
    job, processes = start_job(env, node, "srun sleep 1000")
    slurmd = env.running.stack.supervisor.running(f"slurmd-{node}")
    assert slurmd is not None
    os.kill(slurmd.pid, signal.SIGKILL)  # the agent's liveness check restarts the Pod's daemons
    wait_for(lambda: not alive(processes), 30,
             f"job {job}'s processes to end with the restarted slurmd")  # fmt: skip
    restarted = env.running.stack.supervisor.running(f"slurmd-{node}")
    assert restarted is None or restarted.pid != slurmd.pid
    wait_for(lambda: job_state(env, job) in ENDED, 60, f"Slurm to end job {job}")
    figures["state of a job whose slurmd was restarted"] = job_state(env, job)
    wait_for(lambda: "IDLE" in env.slurm.node_state(node), 60, f"{node} IDLE again")


def test_down_ends_every_job_process_even_one_that_left_its_job(
    env: RepoStack, figures: dict[str, str]
) -> None:
    """A process that leaves its job's process group and environment (setsid, env -i) escapes
    Slurm's proctrack/pgid and any search by environment; it does not escape its Pod's cgroup."""
    job, processes = start_job(env, "slurm-gpu-small-1",
                               "setsid -f env -i sleep 1003; srun sleep 1000")  # fmt: skip
    escaped = wait_for(lambda: [(pid, ticks) for pid, ticks in _all_processes()
                                if _cmdline(pid) == "sleep 1003"],
                       30, "the escaped sleep")  # fmt: skip
    down = reconciler_cli("local", "down", "--runtime-dir", str(env.runtime), timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    left = alive([*processes, *escaped])
    figures["job processes left after `local down`"] = f"{len(left)} of {len(processes) + 1}"
    assert not left, f"left after `local down` of job {job}: {left}"


def _all_processes() -> list[Process]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            ticks = process_start_ticks(int(entry.name))
            if ticks is not None:
                found.append((int(entry.name), ticks))
    return found
