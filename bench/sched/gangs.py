"""Gangs: the report of phases 7 to 10 and every Pod's times as JSON."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness.loadgen import PodTimes
from bench.harness.report import HEADER, fmt_row, percentile, ratio_text, spread
from bench.sched.common import POD_NAMESPACE, RAW_CPUS, RAW_MEMORY_MB, SETTLE_TIMEOUT
from bench.sched.instrument import Instrument
from bench.sched.phases import BacklogResult, SchedResult
from bench.sched.raw import RawResult
from bench.sched.rows import (
    between_marks_rows,
    cleanup_rows,
    cpu_rows,
    gang_check_rows,
    latency_rows,
)
from reconciler import wellknown as wk
from reconciler.scheduler.decide.gang_decide import gang_key


@dataclass
class GangRun:
    """The gang phases: raw multi-node jobs, then a burst and a backlog of gangs."""

    size: int
    raw: RawResult | None = None
    burst: SchedResult | None = None
    backlog: BacklogResult | None = None


def _groups(pods: list[PodTimes]) -> dict[str, list[PodTimes]]:
    groups: dict[str, list[PodTimes]] = {}
    for pod in pods:
        groups.setdefault(pod.group, []).append(pod)
    return groups


def gang_latencies(pods: list[PodTimes], start: float = 0.0) -> list[float]:
    """Per fully bound gang: its last member's create returned (or START, if later) -> its
    last member seen bound."""
    return [
        max(p.bound for p in members if p.bound) - max(start, max(p.created for p in members))
        for members in _groups(pods).values()
        if all(p.bound for p in members)
    ]


@dataclass
class SideBySide:
    """One row of the side-by-side table."""

    label: str
    pods: list[PodTimes]
    start: float  # epoch: first create sent (burst), or the scheduler's start (backlog)
    gang: int

    @property
    def bound(self) -> list[PodTimes]:
        return [p for p in self.pods if p.bound is not None]

    @property
    def seconds(self) -> float:
        return max(p.bound for p in self.bound if p.bound) - self.start if self.bound else 0.0

    @property
    def pod_latency(self) -> list[float]:
        return [p.bound - max(self.start, p.created) for p in self.bound if p.bound]

    @property
    def gang_latency(self) -> list[float]:
        return gang_latencies(self.pods, self.start) if self.gang else []

    def text(self) -> str:
        seconds = self.seconds or math.inf
        pods = f"{len(self.bound) / seconds:>8.1f}"
        gangs = f"{len(self.gang_latency) / seconds:>8.2f}" if self.gang else f"{'-':>8}"

        def three(values: list[float]) -> str:
            if not values:
                return "".join(f"{'-':>7}" for _ in range(3))
            return "".join(f"{percentile(values, q):>7.2f}" for q in (50, 90, 99))

        latencies = f"{three(self.pod_latency)}  {three(self.gang_latency)}"
        return f"  {self.label:<30}{pods}{gangs}  {latencies}"


def side_by_side_rows(
    sched: SchedResult, backlog: BacklogResult | None, gangs: GangRun
) -> list[SideBySide]:
    rows = [SideBySide(f"burst, {sched.count} single Pods", sched.pods,
                       min(p.sent for p in sched.pods), 0)]  # fmt: skip
    if gangs.burst is not None:
        g = gangs.burst
        rows.append(SideBySide(f"burst, {g.count // gangs.size} gangs of {gangs.size}", g.pods,
                               min(p.sent for p in g.pods), gangs.size))  # fmt: skip
    if backlog is not None:
        rows.append(SideBySide(f"backlog, {backlog.count} single Pods", backlog.pods,
                               backlog.started_at, 0))  # fmt: skip
    if gangs.backlog is not None:
        g2 = gangs.backlog
        rows.append(SideBySide(f"backlog, {g2.count // gangs.size} gangs of {gangs.size}",
                               g2.pods, g2.started_at, gangs.size))  # fmt: skip
    return rows


def gang_stage_rows(
    out: Callable[..., None], pods: list[PodTimes], inst: Instrument,
    first: tuple[str, Callable[[list[PodTimes]], float | None]],
) -> None:  # fmt: skip
    """Where a gang's time goes, per fully bound gang (the job's times are keyed by the gang)."""

    def each(values: list[float | None], pick: Callable[[list[float]], float]) -> float | None:
        return pick([v for v in values if v]) if values and all(values) else None

    def key(members: list[PodTimes]) -> str:
        return gang_key(POD_NAMESPACE, members[0].group)

    marks: list[tuple[str, Callable[[list[PodTimes]], float | None]]] = [
        first,
        ("all seen by the scheduler", lambda m: each([inst.seen.get(p.uid) for p in m], max)),
        ("submit sent", lambda m: inst.submit_sent.get(key(m))),
        ("job submitted", lambda m: inst.submitted.get(key(m))),
        ("allocation known", lambda m: inst.allocation_known(key(m))),
        ("first bind sent", lambda m: each([inst.bind_sent.get(p.uid) for p in m], min)),
        ("last bind returned", lambda m: each([inst.bind_returned.get(p.uid) for p in m], max)),
        ("all seen bound", lambda m: each([p.bound for p in m], max)),
    ]
    complete = [m for m in _groups(pods).values() if all(p.bound for p in m)]
    out("  where a gang's time goes, per fully bound gang (its job's submit and when the "
        "scheduler first held it RUNNING, its members' watch events and binds):")  # fmt: skip
    between_marks_rows(out, marks, complete, 50)


def gang_report(
    out: Callable[..., None], args: argparse.Namespace, raw: RawResult, sched: SchedResult,
    backlog: BacklogResult | None, gangs: GangRun,
) -> None:  # fmt: skip
    """7. raw multi-node jobs, 8. the gang burst, 9. the gang backlog, 10. side by side."""
    size = gangs.size
    g_raw = gangs.raw
    if g_raw is not None:
        out(f"7. raw slurmrestd, gangs: {g_raw.count} batch jobs of {size} nodes (one task, "
            f"{RAW_CPUS} CPU, {RAW_MEMORY_MB} MB per node), {args.workers} submitters")  # fmt: skip
        out(f"  submitted in {g_raw.submit_seconds:.2f} s: {g_raw.rate:.1f} submits/s")
        if g_raw.running_rate is not None and g_raw.all_running_after is not None:
            out(f"  all {g_raw.count} RUNNING {g_raw.all_running_after:.1f} s after the first "
                f"submit: {g_raw.running_rate:.2f} jobs RUNNING/s "
                f"({g_raw.running_rate * size:.1f} nodes' worth/s)")  # fmt: skip
        else:
            out(f"  NOT all {g_raw.count} RUNNING within {SETTLE_TIMEOUT:.0f} s")
        settled = f"{g_raw.settled_after:.1f} s" if g_raw.settled_after is not None else "never"
        out(f"  cancelled; no job left and every CPU free after {settled}")
        out()
    b = gangs.burst
    if b is not None:
        bound = b.bound
        full = gang_latencies(b.pods)
        n = b.count // size
        out(
            f"8. gang burst: PodScheduler {b.scheduler_name}, {b.count} Pods in {n} gangs of "
            f"{size} (annotations {wk.ANNOTATION_POD_GROUP}, ...-min-member {size}: one Slurm "
            f"job of {size} nodes each), created with {b.creators} threads in "
            f"{b.create_seconds:.2f} s: {b.count / b.create_seconds:.0f}/s"
        )
        out(f"  bound {len(bound)}/{b.count} Pods; {len(full)}/{n} gangs fully bound")
        if bound:
            out()
            latency_rows(out, bound)
            if full:
                out(fmt_row("gang: last created -> all bound", spread(full)))
            gang_stage_rows(out, b.pods, b.instrument, ("last member created",
                            lambda m: max(p.created for p in m)))  # fmt: skip
            out(
                f"  throughput: {b.throughput:.1f} Pods bound/s, {len(full) / b.batch_seconds:.2f} "
                f"gangs bound/s (first create sent -> last bind {b.batch_seconds:.2f} s)"
            )
            out()
            cpu_rows(out, b.cpu, b.batch_seconds, "from the first create to the last bind",
                     b.watch_events, b.watch_bytes)  # fmt: skip
        gang_check_rows(out, b.counters_bound, b.checks, f"one job per gang ({b.jobs_in_slurm} "
                        f"jobs), each RUNNING on {size} nodes, every member bound for it on a "
                        "node of its own, on that node's Kubernetes Node")  # fmt: skip
        cleanup_rows(out, "  cleanup: ", b.cleanup, b.instrument)
        out()
    g = gangs.backlog
    if g is not None:
        bound = g.bound
        full = gang_latencies(g.pods, g.started_at)
        n = g.count // size
        out(
            f"9. gang backlog: {g.count} Pods in {n} gangs of {size} for {g.scheduler_name}, "
            f"created (in {g.create_seconds:.2f} s) while nothing watched that name; then a "
            f"PodScheduler of that name started (start() {g.start_seconds:.2f} s)"
        )
        out(f"  bound {len(bound)}/{g.count} Pods, {g.bound_before_start} before it started; "
            f"{len(full)}/{n} gangs fully bound")  # fmt: skip
        if bound:
            t0 = g.started_at
            pod_lat = [p.bound - t0 for p in bound if p.bound]
            out(f"  {'latency from its start (s)':<34}{HEADER}")
            out(fmt_row("Pod: scheduler start -> bound", spread(pod_lat)))
            if full:
                out(fmt_row("gang: start -> all bound", spread(full)))
            gang_stage_rows(out, g.pods, g.instrument, ("scheduler started", lambda m: t0))
            out(f"  throughput: {g.throughput:.1f} Pods bound/s, {len(full) / g.seconds:.2f} "
                f"gangs bound/s (scheduler start -> last bind {g.seconds:.2f} s)")  # fmt: skip
            if g_raw is not None and g_raw.running_rate:
                text, _ = ratio_text(len(full) / g.seconds, g_raw.running_rate)
                out(f"  gangs bound/s / raw {size}-node jobs RUNNING/s: {text}")
            if backlog is not None and backlog.bound:
                text, _ = ratio_text(g.throughput, backlog.throughput)
                out(f"  Pods bound/s, gangs / single Pods (5. backlog): {text}")
            out()
            cpu_rows(out, g.cpu, g.seconds, "from its start to the last bind")
        gang_check_rows(out, g.counters, g.checks, f"one job per gang ({g.jobs_in_slurm} jobs), "
                        f"each RUNNING on {size} nodes, every member bound for it on a node of "
                        "its own; none bound before the scheduler started")  # fmt: skip
        cleanup_rows(out, "  cleanup: ", g.cleanup, g.instrument)
        out()

    out(f"10. side by side: single Pods and gangs of {size} (burst: latency from each Pod's / the "
        "last member's create; backlog: from the scheduler's start)")  # fmt: skip
    pct = "".join(f"{h:>7}" for h in ("p50", "p90", "p99"))
    out(f"  {'':<30}{'Pods/s':>8}{'gangs/s':>8}  {'Pod -> bound (s)':>21}  "
        f"{'gang -> all bound (s)':>21}")  # fmt: skip
    out(f"  {'':<30}{'bound':>8}{'bound':>8}  {pct}  {pct}")
    rows = side_by_side_rows(sched, backlog, gangs)
    for row in rows:
        out(row.text())
    out()


def dump_times(
    path: Path, sched: SchedResult, backlog: BacklogResult | None, gangs: GangRun | None = None
) -> None:
    """Every Pod's times (epoch seconds), per phase, for a closer look than the percentiles."""

    def _key(pod: PodTimes) -> str:  # a gang's job's times are kept under the gang's key
        return gang_key(POD_NAMESPACE, pod.group) if pod.group else ""

    def rows(pods: list[PodTimes], inst: Instrument) -> list[dict[str, Any]]:
        stages = ("seen", "submit_sent", "submitted", "start_seen", "started_hook",
                  "bind_sent", "bind_returned")  # fmt: skip
        return [
            {"name": p.name, "uid": p.uid, "group": p.group, "sent": p.sent,
             "created": p.created,
             **{k: getattr(inst, k).get(p.uid, getattr(inst, k).get(_key(p))) for k in stages},
             "bound": p.bound,
             "stale_pending": inst.stale_pending.get(p.uid),
             "after_stale_poll": inst.stale_after.get(p.uid)}
            for p in pods
        ]  # fmt: skip

    phases: dict[str, Any] = {"burst": rows(sched.pods, sched.instrument)}
    if sched.paced is not None:
        phases["paced"] = rows(sched.paced.pods, sched.instrument)
    if backlog is not None:
        phases["backlog"] = {"started_at": backlog.started_at,
                             "pods": rows(backlog.pods, backlog.instrument)}  # fmt: skip
    if gangs is not None and gangs.burst is not None:
        phases["gang_burst"] = rows(gangs.burst.pods, gangs.burst.instrument)
    if gangs is not None and gangs.backlog is not None:
        g = gangs.backlog
        phases["gang_backlog"] = {"started_at": g.started_at, "pods": rows(g.pods, g.instrument)}
    path.write_text(json.dumps(phases, indent=1))
