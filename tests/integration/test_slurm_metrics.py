"""The Slurm series of /metrics on the real local stack, with `reconciler run` as users run it:
scraped over HTTP and checked against what sinfo, squeue and sdiag say of the same Slurm
(nodes by state, a drain by its reason, jobs by state and partition, pending reasons, GPUs of
a partition, the scheduler's counters), then slurmctld stopped and started again."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.adapters.kube import Kube
from reconciler.local.slurm import SlurmCluster
from tests.integration.helpers import http_get, reconciler_run, wait_for
from tests.integration.local_up import local_up

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = ROOT / "fixtures" / "config-repo"
INTERVAL = 1.0  # --slurm-metrics-interval for these tests (the default is 30 s)
Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass
class Env:
    slurm: SlurmCluster
    admin: Kube
    port: int
    log: Path

    def scrape(self) -> Series:
        text = http_get(self.port, "/metrics")
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def run(self, *argv: str) -> str:
        return self.slurm.run(*argv)


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-slurm-metrics-"))
    try:
        repo = work / "repo"
        shutil.copytree(FIXTURE_REPO, repo)
        with local_up(
            repo, work / "up.log", prefix="sunk-reconciler-slurm-metrics-",
            timings=stack_timings, label="slurm metrics tests",
        ) as running:  # fmt: skip
            admin = Kube.from_kubeconfig(running.stack.kube_paths.kubeconfig, field_manager="test")
            with reconciler_run(
                repo, running.runtime, work, "--no-scheduler", "--node-sync-interval", "0",
                "--slurm-metrics-interval", str(INTERVAL),
            ) as (port, log):  # fmt: skip
                yield Env(running.slurm, admin, port, log)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def by(series: Series, name: str, *labels: str) -> Counter[tuple[str, ...]]:
    """NAME's samples summed by LABELS, zeros left out (as sinfo and squeue list nothing)."""
    found: Counter[tuple[str, ...]] = Counter()
    for (sample, pairs), value in series.items():
        if sample == name and value:
            found[tuple(dict(pairs)[label] for label in labels)] += int(value)
    return found


def sinfo_states(env: Env) -> Counter[tuple[str, ...]]:
    """Nodes by sinfo's long state, once each (sinfo -N lists a node once per partition)."""
    lines = env.run("sinfo", "-N", "-h", "-o", "%N %T").split()
    states = dict(zip(lines[::2], lines[1::2], strict=True))
    return Counter((state.rstrip("*~#!%$@^-").lower(),) for state in states.values())


def squeue(env: Env, fields: str, *args: str) -> Counter[tuple[str, ...]]:
    lines = env.run("squeue", "-h", "-o", fields, *args).splitlines()
    return Counter(tuple(line.split("|")) for line in lines if line)


def sdiag_number(env: Env, label: str) -> int:
    found = re.search(rf"^\s*{re.escape(label)}:\s*(\d+)", env.run("sdiag"), re.M)
    assert found, f"sdiag says no {label!r}"
    return int(found.group(1))


def matches(env: Env, check: dict[str, tuple[object, object]]) -> str:
    """'' when every (scraped, from the Slurm commands) pair agrees, else what differs."""
    return "; ".join(f"{what}: {a} != {b}" for what, (a, b) in check.items() if a != b)


def test_the_series_agree_with_sinfo_squeue_and_sdiag(env: Env) -> None:
    submitted: list[str] = []
    sbatch = ("sbatch", "--parsable", "-o", "/dev/null")
    try:
        submitted.append(env.run(*sbatch, "-p", "gpu", "--gres=gpu:2", "--wrap", "sleep 300"))
        submitted.append(env.run(*sbatch, "-H", "-p", "all", "--wrap", "true"))
        submitted.append(env.run(*sbatch, "-p", "gpu", "-N", "2", "--gres=gpu:7", "--wrap",
                                 "sleep 300"))  # fmt: skip
        env.run("scontrol", "update", "NodeName=slurm-cpu-0", "State=DRAIN",
                "Reason=health: metrics test")  # fmt: skip
        wait_for(lambda: squeue(env, "%T", "-t", "R"), 30, "the GPU job to run")
        differs = ""

        def agree() -> bool:
            nonlocal differs
            got = env.scrape()
            differs = matches(env, {
                "nodes by state": (by(got, "slurm_nodes", "state"), sinfo_states(env)),
                "jobs": (by(got, "slurm_jobs", "state", "partition"),
                         Counter({(s.lower(), p): n for (s, p), n in
                                  squeue(env, "%T|%P", "-t", "all").items()})),
                "pending reasons": (by(got, "slurm_jobs_pending", "reason", "partition"),
                                    squeue(env, "%r|%P", "-t", "PD")),
                "jobs submitted": (got.get(("slurm_scheduler_jobs_submitted_total", ())),
                                   sdiag_number(env, "Jobs submitted")),
                "jobs started": (got.get(("slurm_scheduler_jobs_started_total", ())),
                                 sdiag_number(env, "Jobs started")),
                # The main scheduler's, sdiag's first "Total cycles": 0 until its first cycle
                # (a job started at submit needs none; backfill counts its own).
                "scheduler cycles": (got.get(("slurm_scheduler_cycles_total", ())),
                                     sdiag_number(env, "Total cycles")),
            })  # fmt: skip
            return not differs

        wait_for(agree, 20, "the scraped series to agree with sinfo, squeue and sdiag")
        got = env.scrape()
        assert by(got, "slurm_nodes", "state", "reason")[("drained", "health")] == 1
        assert by(got, "slurm_jobs_pending", "reason")[("JobHeldUser",)] == 1
        gres = env.run("sinfo", "-h", "-p", "gpu", "-N", "-o", "%N %G").split()
        configured = sum(int(g.split(":")[-1].split("(")[0]) for g in gres[1::2])
        assert got[("slurm_partition_gpus", (("partition", "gpu"),))] == configured
        assert got[("slurm_partition_gpus_allocated", (("partition", "gpu"),))] == 2
        assert got[("slurm_controller_up", ())] == 1
        assert got[("reconciler_slurm_snapshot_age_seconds", ())] < 5 * INTERVAL
    finally:
        for job_id in submitted:
            env.run("scancel", job_id.strip().split(";")[0])
        env.run("scontrol", "update", "NodeName=slurm-cpu-0", "State=RESUME")


def test_a_stopped_slurmctld_is_controller_down_and_ages_the_snapshot(env: Env) -> None:
    scale = "/apis/apps/v1/namespaces/slurm/deployments/slurm-controller/scale"

    def replicas(count: int) -> None:
        env.admin.request_json("PATCH", scale, body={"spec": {"replicas": count}},
                               content_type="application/merge-patch+json")  # fmt: skip

    replicas(0)
    try:
        wait_for(lambda: env.scrape().get(("slurm_controller_up", ())) == 0, 60,
                 "slurm_controller_up to say 0")  # fmt: skip
        failures = env.scrape()[("reconciler_slurm_snapshot_failures_total", ())]
        # A failing read may wait for slurmrestd's own timeouts (22.05's take seconds).
        wait_for(lambda: env.scrape()[("reconciler_slurm_snapshot_failures_total", ())]
                 > failures, 60, "another failed read to be counted")  # fmt: skip
        wait_for(lambda: env.scrape()[("reconciler_slurm_snapshot_age_seconds", ())]
                 > 3 * INTERVAL, 15, "the snapshot to age")  # fmt: skip
        assert by(env.scrape(), "slurm_nodes", "state"), "the last read is no longer served"
    finally:
        replicas(1)
    wait_for(lambda: env.scrape().get(("slurm_controller_up", ())) == 1, 120,
             "slurm_controller_up to say 1 again")  # fmt: skip
    wait_for(lambda: env.scrape()[("reconciler_slurm_snapshot_age_seconds", ())]
             < 3 * INTERVAL, 30, "a fresh read")  # fmt: skip
    assert "reading Slurm failed" in env.log.read_text()
