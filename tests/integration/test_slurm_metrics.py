"""The Slurm series of /metrics on the real local stack, with `reconciler run` as users run it:
scraped over HTTP and checked against what sinfo, squeue, scontrol and sdiag say of the same
Slurm (nodes by base state and flag, jobs by state and partition, held jobs, GPUs of a
partition, the scheduler's counters), then slurmctld stopped and started again.

The source follows the release, as users get it: slurmctld's OpenMetrics on 25.11+ (the render
turns them on), slurmrestd before. What only the REST read derives per object (the sinfo-like
node state with its reason, pending reasons) is checked where that is the source."""

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
from reconciler.local.slurm.cluster import SlurmCluster
from tests.integration.helpers import http_get, reconciler_run, wait_for
from tests.integration.local_up import local_up

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = ROOT / "fixtures" / "config-repo"
INTERVAL = 1.0  # --slurm-metrics-interval for these tests (the default is 30 s)
Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]
METRICS_ONLY = ("--no-scheduler", "--node-sync-interval", "0", "--slurm-metrics-interval",
                str(INTERVAL))  # fmt: skip


@dataclass
class Env:
    slurm: SlurmCluster
    admin: Kube
    port: int
    log: Path
    daemon_args: tuple[Path, Path, Path]  # repo, runtime, work: for a daemon of other flags

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
                repo, running.runtime, work, *METRICS_ONLY,
            ) as (port, log):  # fmt: skip
                yield Env(running.slurm, admin, port, log, (repo, running.runtime, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def by(series: Series, name: str, *labels: str) -> Counter[tuple[str, ...]]:
    """NAME's samples summed by LABELS, zeros left out (as sinfo and squeue list nothing)."""
    found: Counter[tuple[str, ...]] = Counter()
    for (sample, pairs), value in series.items():
        if sample == name and value:
            found[tuple(dict(pairs)[label] for label in labels)] += int(value)
    return found


def source(series: Series) -> str:
    """Where the daemon's last read went (reconciler_slurm_metrics_source)."""
    named = [dict(pairs)["source"] for (name, pairs), value in series.items()
             if name == "reconciler_slurm_metrics_source" and value]  # fmt: skip
    assert len(named) == 1, f"not one source is served: {named}"
    return named[0]


def scontrol_states(env: Env) -> tuple[Counter[tuple[str, ...]], Counter[tuple[str, ...]]]:
    """Nodes by base state and by flag, as `scontrol show node` says (State=IDLE+DRAIN)."""
    base: Counter[tuple[str, ...]] = Counter()
    flags: Counter[tuple[str, ...]] = Counter()
    for state in re.findall(r"\bState=(\S+)", env.run("scontrol", "show", "node", "-o")):
        first, *rest = state.split("+")
        if first == "FUTURE":  # listed by neither source
            continue
        base[(first.lower(),)] += 1
        flags.update((flag.lower(),) for flag in rest)
    return base, flags


def expected_source(env: Env) -> str:
    """slurmctld's OpenMetrics from 25.11 (the render turns them on), else slurmrestd."""
    said = re.search(r"(\d+)\.(\d+)", env.run("scontrol", "--version"))
    assert said, "scontrol --version names no release"
    return "openmetrics" if (int(said[1]), int(said[2])) >= (25, 11) else "rest"


def counts_gpus(env: Env) -> bool:
    """slurmctld's OpenMetrics count GPUs only as a TRES (docs/metrics.md)."""
    found = re.search(r"^AccountingStorageTRES\s*=\s*(\S*)", env.run("scontrol", "show", "config"),
                      re.M)  # fmt: skip
    return bool(found) and "gres/gpu" in found[1]


def held(env: Env) -> Counter[tuple[str, ...]]:
    """Held pending jobs by partition (squeue's reason JobHeldUser or JobHeldAdmin)."""
    found: Counter[tuple[str, ...]] = Counter()
    for (reason, partition), count in squeue(env, "%r|%P", "-t", "PD").items():
        if reason.startswith("JobHeld"):
            found[(partition,)] += count
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
            base, flags = scontrol_states(env)
            check: dict[str, tuple[object, object]] = {
                "nodes by base state": (by(got, "slurm_node_base_states", "state"), base),
                "nodes by flag": (by(got, "slurm_node_flags", "flag"), flags),
                "jobs": (by(got, "slurm_jobs", "state", "partition"),
                         Counter({(s.lower(), p): n for (s, p), n in
                                  squeue(env, "%T|%P", "-t", "all").items()})),
                "held": (by(got, "slurm_jobs_held", "partition"), held(env)),
                "jobs submitted": (got.get(("slurm_scheduler_jobs_submitted_total", ())),
                                   sdiag_number(env, "Jobs submitted")),
                "jobs started": (got.get(("slurm_scheduler_jobs_started_total", ())),
                                 sdiag_number(env, "Jobs started")),
                # The main scheduler's, sdiag's first "Total cycles": 0 until its first cycle
                # (a job started at submit needs none; backfill counts its own).
                "scheduler cycles": (got.get(("slurm_scheduler_cycles_total", ())),
                                     sdiag_number(env, "Total cycles")),
            }  # fmt: skip
            if source(got) == "rest":
                check["nodes by state"] = (by(got, "slurm_nodes", "state"), sinfo_states(env))
                check["pending reasons"] = (by(got, "slurm_jobs_pending", "reason", "partition"),
                                            squeue(env, "%r|%P", "-t", "PD"))  # fmt: skip
            differs = matches(env, check)
            return not differs

        wait_for(agree, 20, "the scraped series to agree with sinfo, squeue and sdiag")
        got = env.scrape()
        assert source(got) == expected_source(env)
        assert by(got, "slurm_node_flags", "flag")[("drain",)] == 1
        assert sum(by(got, "slurm_jobs_held", "partition").values()) == 1
        if source(got) == "rest":
            assert by(got, "slurm_nodes", "state", "reason")[("drained", "health")] == 1
            assert by(got, "slurm_jobs_pending", "reason")[("JobHeldUser",)] == 1
        gpu = ("slurm_partition_gpus", (("partition", "gpu"),))
        if source(got) == "openmetrics" and not counts_gpus(env):
            assert gpu not in got, "slurmctld counts no GPU without gres/gpu as a TRES"
        else:
            gres = env.run("sinfo", "-h", "-p", "gpu", "-N", "-o", "%N %G").split()
            configured = sum(int(g.split(":")[-1].split("(")[0]) for g in gres[1::2])
            assert got[gpu] == configured
            assert got[("slurm_partition_gpus_allocated", (("partition", "gpu"),))] == 2
        assert got[("slurm_controller_up", ())] == 1
        assert got[("reconciler_slurm_snapshot_age_seconds", ())] < 5 * INTERVAL
    finally:
        for job_id in submitted:
            env.run("scancel", job_id.strip().split(";")[0])
        env.run("scontrol", "update", "NodeName=slurm-cpu-0", "State=RESUME")


def test_above_the_job_detail_limit_jobs_are_counted_per_state_as_squeue_counts(
    env: Env,
) -> None:
    """A daemon of `--slurm-metrics-job-detail-limit 0` through slurmrestd (its OpenMetrics
    off, on any release): jobs by state from the state list, in partition "*", as squeue
    counts them; no pending reasons or held jobs; said by the gauge and the log."""
    sbatch = ("sbatch", "--parsable", "-o", "/dev/null")
    submitted = [env.run(*sbatch, "-H", "-p", "all", "--wrap", "true"),
                 env.run(*sbatch, "-p", "all", "--wrap", "sleep 300")]  # fmt: skip
    repo, runtime, work = env.daemon_args
    flags = ("--slurm-metrics-job-detail-limit", "0", "--slurmctld-metrics-url", "off")
    (work / "limited").mkdir(exist_ok=True)
    try:
        with reconciler_run(repo, runtime, work / "limited", *METRICS_ONLY, *flags) as (port, log):
            limited = Env(env.slurm, env.admin, port, log, env.daemon_args)
            differs = ""

            def agree() -> bool:
                nonlocal differs
                got = limited.scrape()
                counted = Counter({(s.lower(), "*"): n for (s,), n in
                                   squeue(env, "%T", "-t", "all").items()})  # fmt: skip
                differs = matches(env, {
                    "jobs": (by(got, "slurm_jobs", "state", "partition"), counted),
                    "detail": (got.get(("reconciler_slurm_metrics_job_detail", ())), 0),
                })  # fmt: skip
                return not differs

            try:
                wait_for(agree, 20, "jobs counted per state to agree with squeue")
            except AssertionError as error:
                raise AssertionError(f"{error}: {differs}") from None
            got = limited.scrape()
            assert source(got) == "rest"
            assert not [key for key in got if key[0] in ("slurm_jobs_pending", "slurm_jobs_held")]
            assert "counted per state only" in log.read_text()
    finally:
        for job_id in submitted:
            env.run("scancel", job_id.strip().split(";")[0])


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
        assert by(env.scrape(), "slurm_node_base_states", "state"), "the last read is gone"
    finally:
        replicas(1)
    wait_for(lambda: env.scrape().get(("slurm_controller_up", ())) == 1, 120,
             "slurm_controller_up to say 1 again")  # fmt: skip
    wait_for(lambda: env.scrape()[("reconciler_slurm_snapshot_age_seconds", ())]
             < 3 * INTERVAL, 30, "a fresh read")  # fmt: skip
    assert "reading Slurm failed" in env.log.read_text()
