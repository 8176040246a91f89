"""The report of phases 1 to 6 (single Pods) and the targets."""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
from collections import Counter

from bench.harness.procs import mem_available
from bench.harness.report import Target, percentile, ratio_text
from bench.harness.stack import Stack
from bench.sched.common import (
    CLUSTERS,
    CPU,
    GRACE_SECONDS,
    MEMORY,
    P50_TARGET,
    P99_TARGET,
    RATIO_TARGET,
    WRITES_TARGET,
    LogCapture,
    requests_text,
    writes_text,
)
from bench.sched.gangs import GangRun
from bench.sched.phases import BacklogResult, SchedResult
from bench.sched.raw import RawResult
from bench.sched.rows import (
    checks_row,
    cleanup_rows,
    cpu_rows,
    hook_race_rows,
    kinds,
    latency_rows,
    per_pod_cpu,
    raw_rows,
    scheduler_stage_rows,
    stage_rows,
    worker_rows,
)
from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens


def report(
    args: argparse.Namespace, stack: Stack, raw: RawResult, sched: SchedResult,
    backlog: BacklogResult | None, captured: LogCapture, load_at_start: float,
    gangs: GangRun | None = None, raw_like: RawResult | None = None,
) -> list[Target]:  # fmt: skip
    """Print everything; returns the targets, met or not."""
    out = print
    cpus = os.cpu_count() or 1
    requeued = sum(1 for r in captured.records if "requeued" in r.getMessage())
    out(f"Pod scheduler benchmark: {args.pods} Pods against {args.pods} raw slurmrestd jobs")
    out(
        f"  python {platform.python_version()}, {cpus} CPUs, "
        f"{mem_available() / 2**30:.1f} GiB available now, load average {load_at_start:.2f} "
        "at start"
    )
    probe = connect(stack.rest_url, MintedTokens(stack.jwt_key, stack.user))
    slurm = f"{probe.slurm_version} (slurmrestd {probe.api_version})"
    probe.close()
    out(
        f"  stack {stack.name} ({stack.runtime}), {CLUSTERS[args.repo]}, Slurm {slurm} "
        f"+ kube-apiserver 1.20.2 on loopback, ready in {stack.seconds_to_ready:.1f} s"
    )
    out()
    raw_rows(out, "1. raw slurmrestd", raw, args.workers)
    if raw_like is not None:
        raw_rows(out, "1b. raw slurmrestd, like for like", raw_like, args.workers)

    # ---- 2. burst
    bound = sched.bound
    inst = sched.instrument
    out(
        f"2. burst: PodScheduler {sched.scheduler_name} in this process, {sched.workers} "
        f"workers, poll every {sched.poll_seconds:g} s, hooks on 127.0.0.1:{sched.hooks_port} "
        f"(started in {sched.start_seconds:.2f} s)"
    )
    create_ms = [(p.created - p.sent) * 1000 for p in sched.pods]
    create_rate = sched.count / sched.create_seconds
    out(
        f"  created {sched.count} Pods (cpu {CPU}, memory {MEMORY}, grace {GRACE_SECONDS} s) "
        f"with {sched.creators} threads in {sched.create_seconds:.2f} s: {create_rate:.0f}/s "
        f"(per create: median {statistics.median(create_ms):.0f} ms)"
    )
    out(f"  bound {len(bound)}/{sched.count}")
    burst_p50: float | None = None
    burst_p99: float | None = None
    burst_cpu: float | None = None
    if bound:
        out()
        own = latency_rows(out, bound)
        burst_p50, burst_p99 = percentile(own, 50), percentile(own, 99)
        stage_rows(out, bound, inst, ("create returned", lambda p: p.created))
        scheduler_stage_rows(out, bound, inst, sched.counters_bound)
        worker_rows(out, bound, inst, sched.workers, sched.batch_seconds)
        hook_race_rows(out, bound, inst, sched.counters_bound.pods_deleted, requeued)
        first = min(p.sent for p in sched.pods)
        out()
        out(
            f"  throughput: {sched.throughput:.1f} Pods bound/s over the batch ({len(bound)} "
            f"Pods, first create sent -> last bind {sched.batch_seconds:.2f} s; first bind at "
            f"{min(p.bound for p in bound if p.bound) - first:.2f} s)"
        )
        text, _ = ratio_text(sched.throughput, raw.rate)
        out(
            f"  throughput / raw submit rate: {text}: bounded by the create rate "
            f"({create_rate:.0f} Pods/s), not the scheduler's own rate (see 5. backlog)"
        )
    c = sched.counters_bound
    out()
    cpu_rows(out, sched.cpu, sched.batch_seconds if bound else 0.0,
             "from the first create to the last bind", sched.watch_events,
             sched.watch_bytes)  # fmt: skip
    burst_cpu = per_pod_cpu(sched.cpu, len(bound))
    out(f"  the scheduler's CPU per bound Pod: {burst_cpu * 1000:.1f} ms; its API server writes "
        f"per bound Pod: {writes_text(c, len(bound))}; its slurmrestd requests per bound Pod: "
        f"{requests_text(c, len(bound))}")  # fmt: skip
    out(
        f"  counters at the last bind: submitted {c.submitted}, bound {c.bound}, refused "
        f"{c.refused}, pods_deleted {c.pods_deleted}, jobs_cancelled {c.jobs_cancelled}, hooks "
        f"{c.hooks}, polls {c.polls} ({c.polls_unchanged} unchanged)"
    )
    in_batch = captured.records[: sched.log_mark]
    if c.pods_deleted or c.jobs_cancelled or sched.deleted_in_batch:
        out(
            f"  DURING THE BATCH the scheduler deleted {c.pods_deleted} Pods and cancelled "
            f"{c.jobs_cancelled} jobs; {sched.deleted_in_batch} Pods were gone before cleanup:"
        )
        for (name, level, text), n in kinds(r for r in in_batch if "cancelled" in r.msg):
            out(f"    {n:>5} x {level} {name}: {text}")
    out(
        f"  steady state, {sched.steady_seconds:.0f} s after the last bind: {sched.steady_polls} "
        f"polls, {sched.steady_unchanged} found nothing changed (a 304, or none of our jobs "
        "moved in the state list)"
    )
    if sched.memory is not None:
        out(f"  while bound: {sched.memory.text(len(bound))}; MemAvailable "
            f"{sched.mem_drop / 2**30:+.2f} GiB lower")  # fmt: skip
    nodes = ", ".join(f"{n} {k}" for n, k in sorted(sched.spread.items()))
    out(f"  placeholder jobs in Slurm: {sched.jobs_in_slurm}; Pods per Node: {nodes or '-'}")
    burst_checks = [c for c in sched.checks if not c.startswith("paced: ")]
    checks_row(out, burst_checks, "one job per Pod, each RUNNING on the Slurm node the Pod was "
               "bound for, on that node's Kubernetes Node")  # fmt: skip
    out()
    cleanup_rows(out, "3. cleanup of the burst: ", sched.cleanup, inst)
    out()

    # ---- 4. paced
    paced_p50: float | None = None
    paced = sched.paced
    if paced is not None:
        pb = paced.bound
        out(
            f"4. paced: {paced.count} Pods created at {paced.rate:g}/s by the same scheduler "
            f"(created in {paced.create_seconds:.2f} s: {paced.count / paced.create_seconds:.1f}"
            f"/s); bound {len(pb)}/{paced.count}"
        )
        if pb:
            own = latency_rows(out, pb)
            paced_p50 = percentile(own, 50)
            stage_rows(out, pb, inst, ("create returned", lambda p: p.created))
            hook_race_rows(out, pb, inst, paced.counters.pods_deleted, requeued)
            seconds = paced.seconds
            machine = paced.cpu["machine"]
            out(
                f"  machine CPU from the first create to the last bind: {machine:.1f} of "
                f"{seconds * cpus:.1f} CPU s ({machine / max(seconds * cpus, 1e-9):.0%}; "
                f"benchmark process {paced.cpu['benchmark process: PodScheduler']:.1f}, "
                f"kube-apiserver {paced.cpu.get('kube-apiserver', 0.0):.1f})"
            )
        pc = paced.counters
        out(f"  counters for the phase: submitted {pc.submitted}, bound {pc.bound}, pods_deleted "
            f"{pc.pods_deleted}, jobs_cancelled {pc.jobs_cancelled}, polls {pc.polls} "
            f"({pc.polls_unchanged} unchanged)")  # fmt: skip
        checks_row(out, paced.checks, f"one job per Pod ({paced.jobs_in_slurm} jobs), each "
                   "RUNNING where its Pod was bound")  # fmt: skip
        cleanup_rows(out, "  cleanup: ", paced.cleanup, inst)
        out()

    # ---- 5. backlog
    ratio_submits: float | None = None
    ratio_running: float | None = None
    ratio_like: float | None = None
    if backlog is not None:
        bb = backlog.bound
        binst = backlog.instrument
        out(
            f"5. backlog: {backlog.count} Pods for {backlog.scheduler_name}, created (in "
            f"{backlog.create_seconds:.2f} s) while nothing watched that name and the first "
            "scheduler was stopped; then a second PodScheduler of that name started"
        )
        out(
            f"  start() took {backlog.start_seconds:.2f} s (lists the jobs, the Pods, the Nodes); "
            f"bound {len(bb)}/{backlog.count}, {backlog.bound_before_start} before it started"
        )
        if bb:
            t0 = backlog.started_at
            binds = sorted(p.bound - t0 for p in bb if p.bound)
            sent = sorted(v - t0 for u, v in binst.submit_sent.items() if u in {p.uid for p in bb})
            out(
                f"  from its start: first submit sent at {sent[0]:.2f} s, last at {sent[-1]:.2f} "
                f"s; first bind seen at {binds[0]:.2f} s, last at {binds[-1]:.2f} s"
                if sent
                else f"  from its start: first bind seen at {binds[0]:.2f} s, last at "
                f"{binds[-1]:.2f} s"
            )
            stage_rows(out, bb, binst, ("scheduler started", lambda p: t0))
            scheduler_stage_rows(out, bb, binst, backlog.counters)
            worker_rows(out, bb, binst, args.workers, backlog.seconds)
            hook_race_rows(out, bb, binst, backlog.counters.pods_deleted, requeued)
            out()
            out(
                f"  throughput: {backlog.throughput:.1f} Pods bound/s ({len(bb)} Pods, scheduler "
                f"start -> last bind {backlog.seconds:.2f} s)"
            )
            text, ratio_submits = ratio_text(backlog.throughput, raw.rate)
            out(f"  throughput / raw submit rate:               {text}")
            text, ratio_running = ratio_text(backlog.throughput, raw.running_rate)
            out(f"  throughput / raw submit -> all RUNNING rate: {text}")
            if raw_like is not None:
                text, ratio_like = ratio_text(backlog.throughput, raw_like.running_rate)
                out(f"  throughput / like-for-like raw RUNNING rate: {text} (raw jobs running the "
                    "placeholder script)")  # fmt: skip
            if raw.processes_after:
                text, _ = ratio_text(backlog.throughput, raw.count / raw.processes_after)
                out(
                    f"  throughput / raw submit -> all processes up: {text} (not a target: a Pod "
                    "is bound on its job's allocation, before the job's processes are up)"
                )
            out()
            cpu_rows(out, backlog.cpu, backlog.seconds, "from its start to the last bind")
        bc = backlog.counters
        out(f"  the scheduler's CPU per bound Pod: {per_pod_cpu(backlog.cpu, len(bb)) * 1000:.1f} "
            f"ms; its API server writes per bound Pod: {writes_text(bc, len(bb))}; its slurmrestd "
            f"requests per bound Pod: {requests_text(bc, len(bb))}")  # fmt: skip
        out(
            f"  counters at the last bind: submitted {bc.submitted}, bound {bc.bound}, refused "
            f"{bc.refused}, pods_deleted {bc.pods_deleted}, jobs_cancelled {bc.jobs_cancelled}, "
            f"hooks {bc.hooks}, polls {bc.polls} ({bc.polls_unchanged} unchanged)"
        )
        checks_row(out, backlog.checks, f"one job per Pod ({backlog.jobs_in_slurm} jobs), each "
                   "RUNNING where its Pod was bound, none bound before the scheduler "
                   "started")  # fmt: skip
        cleanup_rows(out, "  cleanup: ", backlog.cleanup, binst)
        out()

    # ---- 6. the whole run
    out("6. the whole run")
    phases: list[SchedResult | BacklogResult | None] = [sched, backlog]
    if gangs is not None:
        phases += [gangs.burst, gangs.backlog]
    for label, end in ((r.scheduler_name, r.counters_end) for r in phases if r is not None):
        if end is not None:
            out(f"  {label} at its stop: submitted {end.submitted}, bound {end.bound}, "
                f"pods_deleted {end.pods_deleted}, jobs_cancelled {end.jobs_cancelled}, hooks "
                f"{end.hooks}")  # fmt: skip
    cancels = [r for r in captured.records if "cancelled placeholder job" in r.msg]
    out(f"  the schedulers' cancels by reason ({len(cancels)} log lines):")
    for (_name, _level, text), n in kinds(cancels):
        out(f"    {n:>5} x {text}")
    answers: Counter[str] = Counter(inst.hook_answers)
    errors: Counter[str] = Counter(inst.hook_errors)
    for phase in phases[1:]:
        if phase is not None:
            answers.update(phase.instrument.hook_answers)
            errors.update(phase.instrument.hook_errors)
    listed = ", ".join(f"{k} {n}" for k, n in sorted(answers.items()))
    out(f"  hook calls by kind and answer: {listed or 'none'}")
    if errors:
        text = ", ".join(f"{n} x {k}" for k, n in errors.most_common())
        out(f"  hook requests that failed in the hooks server (caller gone): {text}")
    warnings = [r for r in captured.records if r.levelno >= logging.WARNING]
    out(
        f"  warnings logged in this process (schedulers, clients, hooks servers): {len(warnings)} "
        f"({sum(1 for r in in_batch if r.levelno >= logging.WARNING)} before the burst's last "
        "bind)"
    )
    for (name, level, text), n in kinds(warnings)[:6]:
        out(f"    {n:>5} x {level} {name}: {text}")
    up_warnings = [
        line for line in stack.log.read_text(errors="replace").splitlines()
        if " WARNING " in line or " ERROR " in line or "Traceback" in line
    ]  # fmt: skip
    out(f"  warnings logged by `local up` (node agent): {len(up_warnings)}"
        + (f", e.g. {up_warnings[0][:160]}" if up_warnings else ""))  # fmt: skip

    def seconds_target(label: str, value: float | None, limit: float = P50_TARGET) -> Target:
        if value is None:
            return Target(label, "n/a", False)
        return Target(label, f"{value:.2f} s", value < limit)

    def ratio_target(label: str, value: float | None) -> Target:
        if value is None:
            return Target(label, "n/a", False)
        return Target(label, f"{value:.2f}", value >= RATIO_TARGET)

    paced_label = f"paced, {paced.rate:g}/s" if paced is not None else "paced (not run)"
    writes = sum(c.api_writes.values()) / len(bound) if bound else None
    return [
        seconds_target(f"p50 create -> bound, burst of {sched.count}", burst_p50),
        seconds_target(f"p99 create -> bound, burst of {sched.count}", burst_p99, P99_TARGET),
        seconds_target(f"p50 create -> bound, {paced_label}", paced_p50),
        ratio_target("backlog Pods bound/s / raw submits/s", ratio_submits),
        ratio_target("backlog Pods bound/s / raw jobs RUNNING/s", ratio_running),
        ratio_target("backlog / like-for-like raw RUNNING/s", ratio_like),
        Target(
            "API writes per bound Pod, burst",
            "n/a" if writes is None else f"{writes:.2f}",
            writes is not None and writes <= WRITES_TARGET,
        ),
        Target(
            "scheduler CPU per bound Pod, burst (no target)",
            "n/a" if burst_cpu is None else f"{burst_cpu * 1000:.1f} ms",
            True,
        ),
    ]
