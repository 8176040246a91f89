"""Part 2 of bench.daemon_scale: the daemon's resync with many node definitions.

The config repo is the compile benchmark's generator (bench/compile/workload.py: 6 layers per
definition, 100 generated layers) at --definitions definitions of 0 replicas, so each is one
StatefulSet and a NodeSet line and no Pod, plus one real node so that Slurm has a node. The
local stack comes up from the same repo without the generated definitions; the daemon's first
convergence applies them (--definitions StatefulSets), and every --resync after that it
re-plans the applied revision. Duration and CPU of each come from the daemon's /metrics
(reconciler_converge_duration_seconds and reconciler_converge_cpu_seconds_total, by kind).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.compile.workload import VALUES_HEADER, Workload, generated_layers, values_yaml
from bench.daemon.process import Daemon
from bench.harness.procs import MIB, Sample, sample
from bench.harness.report import say
from bench.harness.timing import wait_until
from reconciler.adapters.kube import Kube
from reconciler.apply.live_reader import owned_selector
from reconciler.cli.where import connect
from reconciler.daemon.converge import Converger
from reconciler.local.stack import LocalStack
from reconciler.sources.directory import DirectorySource

RELEASE = "slurm"  # the generated repo has no reconciler.yaml: release and namespace "slurm"
NAMESPACE = "slurm"
PREFIX = f"{RELEASE}-ns-"  # the generated definitions' StatefulSets: slurm-ns-NNNN
# The one node with a replica: Slurm needs a node, the stack a slurmd Pod to be ready.
REAL_NODE = """\
    cpu:
      definitions: [cpu-epyc, las1]
      replicas: 1
"""
# Where a resync's time goes (cProfile, in the benchmark's process): these functions' cumulative
# time, as a share of the whole convergence.
STAGES = (
    ("read_repo", "read the repo's files"),
    ("load_config", "load: parse, merge, layers"),
    ("revision_policies", "compile the revision's policies (once per revision)"),
    ("compile_desired_state", "compile (twice: the declared nodes, then the profile's)"),
    ("read_live", "read the live state (lists, Slurm)"),
    ("plan_against", "plan: dry-runs and the diff"),
    ("evaluate_state", "policies on the node definitions"),
    ("write_status", "write the status ConfigMap"),
)


def values_text(definitions: int) -> str:
    if not definitions:
        return VALUES_HEADER + "  nodes:\n" + REAL_NODE
    return values_yaml(Workload("daemon-scale", definitions, 0)) + REAL_NODE


def write_repo(path: Path, definitions: int) -> None:
    (path / "compute-defs").mkdir(parents=True, exist_ok=True)
    (path / "values.yaml").write_text(values_text(definitions))
    (path / "compute-defs" / "generated.yaml").write_text(generated_layers())


def converge_figures(daemon: Daemon) -> dict[str, float]:
    """count, seconds and cpu of each kind of convergence; outcomes by state; drift."""
    values = daemon.metrics()
    out: dict[str, float] = {}
    for kind in ("revision", "resync"):
        label = f'{{kind="{kind}"}}'
        out[f"{kind}.count"] = values.get(f"reconciler_converge_duration_seconds_count{label}", 0)
        out[f"{kind}.seconds"] = values.get(f"reconciler_converge_duration_seconds_sum{label}", 0)
        out[f"{kind}.cpu"] = values.get(f"reconciler_converge_cpu_seconds_total{label}", 0)
    for state in ("applied", "unchanged", "failed"):
        out[state] = values.get(f'reconciler_reconciles_total{{state="{state}"}}', 0)
    out["drift"] = values.get("reconciler_drift_corrections_total", 0)
    return out


@dataclass
class Resync:
    seconds: float  # the daemon's histogram: this convergence's wall time
    cpu: float  # its thread's CPU
    process_cpu: float  # the whole daemon's CPU since the resync before (or the first apply)
    state: str  # its outcome
    after: Sample


@dataclass
class ResyncRun:
    definitions: int
    first_seconds: float = 0.0  # the first convergence: applying the definitions
    first_cpu: float = 0.0
    first_summary: str = ""
    ready_seconds: float = 0.0  # daemon start -> /readyz (includes the first convergence)
    statefulsets: int = 0  # the generated definitions' StatefulSets listed after it
    at_zero: int = 0  # ... of them at replicas 0
    resyncs: list[Resync] = field(default_factory=list)
    ready: Sample | None = None
    stages: list[tuple[str, float, float]] = field(default_factory=list)  # (label, s, share)
    profiled_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


def first_convergence(daemon: Daemon, kube: Kube, run: ResyncRun) -> None:
    figures = converge_figures(daemon)
    run.first_seconds, run.first_cpu = figures["revision.seconds"], figures["revision.cpu"]
    run.ready_seconds = daemon.seconds_to_ready
    said = re.findall(r"converge: \S+(?: \(.*?\))?: (applied|unchanged|failed) (.*)",
                      daemon.log.read_text(errors="replace"))  # fmt: skip
    run.first_summary = " ".join(said[0]) if said else "(not in the log)"
    if figures["applied"] != 1 or figures["revision.count"] != 1:
        run.problems.append(f"the first convergence was not one apply: {figures}")
    sets = [
        s
        for s in kube.list("apps/v1", "StatefulSet", NAMESPACE,
                           label_selector=owned_selector(RELEASE)).items
        if s["metadata"]["name"].startswith(PREFIX)
    ]  # fmt: skip
    run.statefulsets = len(sets)
    run.at_zero = sum(1 for s in sets if (s.get("spec") or {}).get("replicas") == 0)
    if run.statefulsets != run.definitions or run.at_zero != run.definitions:
        run.problems.append(
            f"{run.statefulsets} StatefulSets {PREFIX}* listed ({run.at_zero} at replicas 0), "
            f"{run.definitions} expected"
        )
    run.ready = sample(daemon.pid)


def wait_for_resync(
    daemon: Daemon, last: dict[str, float], timeout: float
) -> dict[str, float] | None:
    """The figures once one more resync is done (None: not within TIMEOUT)."""
    seen = last

    def done() -> bool:
        nonlocal seen
        daemon.alive()
        seen = converge_figures(daemon)
        return seen["resync.count"] > last["resync.count"]

    return seen if wait_until(done, timeout, poll=0.5) else None


def measure_resyncs(daemon: Daemon, run: ResyncRun, count: int, interval: float) -> None:
    """Wait for COUNT resyncs, each read from the daemon's metrics once it is done."""
    last = converge_figures(daemon)
    cpu_before = daemon.cpu_seconds()
    for index in range(1, count + 1):
        longest = max((r.seconds for r in run.resyncs), default=run.first_seconds)
        seen = wait_for_resync(daemon, last, interval + max(120.0, 3 * longest))
        if seen is None:
            run.problems.append(f"resync {index} did not come within {interval:.0f} s and more")
            return
        cpu_now = daemon.cpu_seconds()
        state = next(
            (s for s in ("unchanged", "applied", "failed") if seen[s] > last[s]), "unknown"
        )
        resync = Resync(
            seen["resync.seconds"] - last["resync.seconds"],
            seen["resync.cpu"] - last["resync.cpu"],
            cpu_now - cpu_before,
            state,
            sample(daemon.pid),
        )
        run.resyncs.append(resync)
        if state != "unchanged" or seen["drift"] != last["drift"]:
            run.problems.append(f"resync {index} was {state}, not unchanged (drift: {seen})")
        say(
            f"resync {index}/{count}: {state} in {resync.seconds:.2f} s, {resync.cpu:.2f} s CPU "
            f"(the daemon: {resync.process_cpu:.2f} s since the last); VmRSS "
            f"{resync.after.rss / MIB:.1f} MiB"
        )
        last, cpu_before = seen, cpu_now


def profile_resync(runtime: Path, repo: Path, run: ResyncRun) -> None:
    """Where a resync's time goes: the daemon's Converger, in this process under cProfile, on
    the same revision against the same stack (shares, not times: cProfile slows it down)."""
    args = argparse.Namespace(local=True, runtime_dir=runtime, name="unused", kubeconfig=None,
                              slurm_url=None)  # fmt: skip
    kubeconfig = LocalStack.open(runtime).kube_paths.kubeconfig
    kube = Kube.from_kubeconfig(kubeconfig, field_manager="daemon-scale-bench")
    try:
        converger = Converger(lambda: connect(args), kube)
        revision = DirectorySource(repo).fetch()
        converger.converge(revision)  # the first: policies compiled, the status read
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        outcome = converger.converge(revision, resync=True)
        profile.disable()
        run.profiled_seconds = time.perf_counter() - started
    finally:
        kube.close()
    if outcome.state != "unchanged":
        run.problems.append(f"the profiled resync was {outcome.state}: {outcome.error}")
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = max(
        (ct for (_, _, name), (_, _, _, ct, _) in stats.items() if name == "converge"),
        default=0.0,
    )
    for name, label in STAGES:
        seconds = sum(ct for (_, _, fn), (_, _, _, ct, _) in stats.items() if fn == name)
        run.stages.append((label, seconds, seconds / total if total else 0.0))
