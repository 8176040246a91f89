"""Power saving on the real local stack, with `reconciler run` as users run it: power saving is
switched on by a change to the config repo; Slurm powers idle nodes down through our
SuspendProgram and their slurmd Pods go; a job brings one back through our ResumeProgram.

The fixture's `gpu-small` (2 replicas) keeps `minReplicas: 1` warm; `cpu` (1 replica) may
sleep. Slurm counts a busy node in the floor: while a job runs on slurm-gpu-small-1,
slurm-gpu-small-0 sleeps, the gap a StatefulSet scale-down could never make.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.adapters.slurm.model import SlurmNode, SlurmRestApi
from reconciler.local.slurm.cluster import SlurmCluster, current_user
from tests.integration.helpers import reconciler_run, wait_for
from tests.integration.local_up import local_up

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = ROOT / "fixtures" / "config-repo"
NAMESPACE = "slurm"
SUSPEND_TIME = 8  # seconds idle before Slurm powers a node down
ASLEEP = {"POWERED_DOWN"}


@dataclass
class Env:
    admin: Kube
    slurm: SlurmCluster
    rest: SlurmRestApi
    log: Path
    timings: dict[str, float]
    first_uids: dict[str, str]  # each slurmd Pod's UID before power saving
    first_nodes: dict[str, str]  # and its Node

    def node(self, name: str) -> SlurmNode:
        found = self.rest.node(name)
        assert found is not None, f"Slurm does not know {name}"
        return found

    def asleep(self, name: str) -> bool:
        node = self.node(name)
        return bool(ASLEEP & (node.flags | {node.state})) and "POWERING_UP" not in node.flags

    def pod(self, name: str) -> dict[str, Any]:
        return self.admin.get("v1", "Pod", name, NAMESPACE) or {}

    def sbatch(self, *args: str) -> int:
        out = self.slurm.run("sbatch", "--parsable", "-o", "/dev/null", *args)
        return int(out.strip().split(";")[0])

    def job_state(self, job: int) -> str:
        return self.slurm.run("squeue", "-h", "-j", str(job), "-o", "%T", check=False).strip()

    def said(self) -> str:
        return self.log.read_text(errors="replace")

    def why(self, job: int, node: str) -> str:
        """What a failure shows: the job, the node, slurmctld's power lines, the daemon's log."""
        ctld = self.slurm.supervisor.logfile("slurmctld").read_text(errors="replace")
        power = [line for line in ctld.splitlines() if "power" in line.lower()][-20:]
        queue = self.slurm.run("squeue", "-h", "-j", str(job), "-o", "%T %r", check=False)
        return "\n".join([queue, str(self.node(node)), *power, self.said()])


def _switch_power_saving_on(repo: Path) -> None:
    values = yaml.safe_load((repo / "values.yaml").read_text())
    slurmd = values["slurmConfig"]["slurmd"]
    slurmd.update(suspendTime=SUSPEND_TIME, suspendTimeout=5, resumeTimeout=60)
    values["compute"]["nodes"]["gpu-small"]["minReplicas"] = 1
    (repo / "values.yaml").write_text(yaml.safe_dump(values, sort_keys=False))


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-power-"))
    try:
        repo = work / "repo"
        shutil.copytree(FIXTURE_REPO, repo)
        with local_up(
            repo, work / "up.log", prefix="sunk-reconciler-power-", timings=stack_timings,
            label="power saving tests",
        ) as running:  # fmt: skip
            slurm = running.stack.slurm
            assert slurm is not None
            admin = Kube.from_kubeconfig(running.stack.kube_paths.kubeconfig, field_manager="test")
            slurmd = admin.list("v1", "Pod", NAMESPACE, label_selector=f"{wk.LABEL_NAME}=slurmd")
            uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in slurmd.items}
            hosts = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in slurmd.items}
            _switch_power_saving_on(repo)
            rest = connect(slurm.rest_url(), MintedTokens(slurm.paths.jwt_key, current_user()))
            try:
                with reconciler_run(repo, running.runtime, work) as (_, log):
                    yield Env(admin, slurm, rest, log, stack_timings, uids, hosts)
            finally:
                rest.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_idle_nodes_sleep_any_ordinal_and_the_floor_stays_warm(env: Env) -> None:
    # The daemon restarts slurmctld to apply the power settings: a refused read is "not yet".
    show = ("scontrol", "show", "config")
    config = wait_for(
        lambda: "/power/suspend" in (c := env.slurm.run(*show, check=False)) and c,
        90, f"slurmctld to read the power settings: {env.said()}",
    )  # fmt: skip
    assert "SuspendExcNodes         = slurm-gpu-small-[0-1]:1" in config
    # A job on slurm-gpu-small-1 meets gpu-small's floor (Slurm counts busy nodes in it).
    held = env.sbatch("-p", "gpu", "-w", "slurm-gpu-small-1", "--wrap", "sleep 600")
    for name in ("slurm-cpu-0", "slurm-gpu-small-0"):
        wait_for(lambda n=name: env.asleep(n), SUSPEND_TIME + 60,
                 f"{name} to power down: {env.node(name)}\n{env.said()}")  # fmt: skip
        # Its Pod is gone; the one the StatefulSet made again waits on no Node.
        pod = wait_for(lambda n=name: _held(env.pod(n), env.first_uids[n]), 30,
                       f"{name}'s Pod to be held: {env.pod(name).get('status')}")  # fmt: skip
        assert pod["spec"]["schedulerName"] == "slurm-slurm-slurm-scheduler"
        # It remembers the Node it left (topology.conf keeps the node's place meanwhile): the
        # daemon marks the StatefulSet's new Pod on its next pass, so within seconds (30 s:
        # on a loaded 2-CPU CI machine 10 s was missed once in three runs).
        try:
            left = wait_for(lambda n=name: _annotation(env.pod(n), wk.ANNOTATION_LAST_NODE), 30,
                            f"{name}'s held Pod to be marked with the Node it left")  # fmt: skip
        except AssertionError as missed:  # what the daemon did meanwhile, to tell why
            raise AssertionError(f"{missed}: {env.pod(name).get('metadata')}\n"
                                 f"{env.said()[-6000:]}") from None  # fmt: skip
        assert left == env.first_nodes[name]
    # Ordinal 0 sleeps under a running ordinal 1: no StatefulSet scale-down could do that.
    assert env.job_state(held) == "RUNNING"
    assert env.pod("slurm-gpu-small-1")["metadata"]["uid"] == env.first_uids["slurm-gpu-small-1"]
    statefulset = env.admin.get("apps/v1", "StatefulSet", "slurm-gpu-small", NAMESPACE)
    assert statefulset is not None and statefulset["spec"]["replicas"] == 2
    # The job ends: slurm-gpu-small-1 idles past suspendTime, and stays up (the floor).
    env.slurm.run("scancel", str(held))
    wait_for(lambda: env.job_state(held) == "", 30, f"job {held} to end")
    time.sleep(SUSPEND_TIME + 5)
    assert not env.asleep("slurm-gpu-small-1"), env.node("slurm-gpu-small-1")
    assert env.pod("slurm-gpu-small-1")["metadata"]["uid"] == env.first_uids["slurm-gpu-small-1"]


def test_a_job_resumes_exactly_the_node_it_needs(env: Env) -> None:
    wait_for(lambda: env.asleep("slurm-gpu-small-0") and env.asleep("slurm-cpu-0"),
             SUSPEND_TIME + 60, "both nodes asleep")  # fmt: skip
    submitted = time.monotonic()
    job = env.sbatch("-p", "gpu", "-w", "slurm-gpu-small-0", "--wrap", "hostname")
    # Each step of the resume, timed: Slurm asks, the Pod is bound, slurmd registers, job runs.
    steps = {
        "Pod bound": lambda: bool(env.pod("slurm-gpu-small-0").get("spec", {}).get("nodeName")),
        "slurmd registered": lambda: not (env.node("slurm-gpu-small-0").flags
                                          & {"POWERING_UP", "POWERED_DOWN", "NOT_RESPONDING"}),
        "job running": lambda: env.job_state(job) in ("RUNNING", "COMPLETING", ""),
    }  # fmt: skip
    seen: dict[str, float] = {}
    deadline = submitted + 60
    while len(seen) < len(steps) and time.monotonic() < deadline:
        for what, probe in steps.items():
            if what not in seen and probe():
                seen[what] = time.monotonic() - submitted
        time.sleep(0.1)
    assert len(seen) == len(steps), f"job {job}: only {seen}: {env.why(job, 'slurm-gpu-small-0')}"
    for what, after in seen.items():
        env.timings[f"power saving: sbatch on a powered-down node -> {what}"] = after
    resumed = seen["job running"]
    pod = env.pod("slurm-gpu-small-0")
    assert pod["spec"].get("nodeName") == env.first_nodes["slurm-gpu-small-0"], pod
    assert "slurm-gpu-small-0 is up in Slurm: binding" in env.said()
    assert env.asleep("slurm-cpu-0"), "a node no job asked for stayed asleep"
    assert resumed < 30, f"resume took {resumed:.1f} s"


def _annotation(pod: dict[str, Any], key: str) -> str | None:
    return (pod.get("metadata", {}).get("annotations") or {}).get(key)


def _held(pod: dict[str, Any], first_uid: str) -> dict[str, Any] | None:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if not meta or meta.get("uid") == first_uid or spec.get("nodeName"):
        return None
    return pod if (pod.get("status") or {}).get("phase") == "Pending" else None
