"""Report rows the phases share: latency, stages, workers, hook races, CPU, cleanup."""

from __future__ import annotations

import itertools
import logging
import math
import os
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from bench.harness.loadgen import PodTimes
from bench.harness.report import HEADER, fmt_row, percentile, spread
from bench.sched.common import RAW_CPUS, RAW_MEMORY_MB, SETTLE_TIMEOUT
from bench.sched.instrument import Instrument
from bench.sched.phases import Cleanup
from bench.sched.raw import RawResult
from reconciler.scheduler.counters import WHOLE_LIST_READS, whole_list_reads
from reconciler.scheduler.loop import Counters
from reconciler.scheduler.stages import stage_table
from reconciler.scheduler.starts import READERS


def gang_check_rows(out: Callable[..., None], c: Counters, checks: list[str], checked: str) -> None:
    out(f"  counters at the last bind: submitted {c.submitted}, bound {c.bound}, refused "
        f"{c.refused}, pods_deleted {c.pods_deleted}, jobs_cancelled {c.jobs_cancelled}, "
        f"hooks {c.hooks}, polls {c.polls}")  # fmt: skip
    checks_row(out, checks, checked)


def checks_row(out: Callable[..., None], checks: list[str], checked: str) -> None:
    """The phase's failed checks, or what was checked."""
    out("  CHECKS FAILED: " + "; ".join(checks) if checks else f"  checked: {checked}")


def latency_rows(out: Callable[..., None], pods: list[PodTimes]) -> list[float]:
    """create -> bound per Pod, three clocks; returns the own-clock latencies."""
    own = [p.bound - p.created for p in pods if p.bound]
    from_sent = [p.bound - p.sent for p in pods if p.bound]
    stamp = [p.bound - p.created_stamp for p in pods if p.bound]
    out(f"  {'latency, create -> bound (s)':<34}{HEADER}")
    out(fmt_row("own clock, create returned", spread(own)))
    out(fmt_row("own clock, create sent", spread(from_sent)))
    out(fmt_row("metadata.creationTimestamp (1 s)", spread(stamp)))
    return own


def stage_rows(
    out: Callable[..., None], pods: list[PodTimes], inst: Instrument,
    first: tuple[str, Callable[[PodTimes], float | None]],
) -> None:  # fmt: skip
    marks = [  # (label, when) per stage end, for every bound Pod
        first,
        ("seen by the scheduler", lambda p: inst.seen.get(p.uid)),
        ("submit sent", lambda p: inst.submit_sent.get(p.uid)),
        ("job submitted", lambda p: inst.submitted.get(p.uid)),
        ("allocation known", lambda p: inst.allocation_known(p.uid)),
        ("bind sent", lambda p: inst.bind_sent.get(p.uid)),
        ("bind returned", lambda p: inst.bind_returned.get(p.uid)),
        ("seen bound", lambda p: p.bound),
    ]
    out("  where the time goes, per Pod (wrappers record when the scheduler's watch handler, "
        "submit, start watch, poll, hook handler and bind ran; allocation known = the first of "
        "the start watch, a poll and the `started` hook to show the job RUNNING):")  # fmt: skip
    between_marks_rows(out, marks, pods, 44)


def scheduler_stage_rows(
    out: Callable[..., None], pods: list[PodTimes], inst: Instrument, counters: Counters
) -> None:
    """The scheduler's own marks (stages.py) of the phase's bound Pods, and its reads of
    Slurm's whole job list since its start (none is the aim: it is what loads slurmctld)."""
    uids = {p.uid for p in pods}
    with inst.lock:
        records = [r for r in inst.stages if r.uid in uids]
    out(
        f"  where the time goes, from the scheduler's own marks ({len(records)} bound Pods; "
        "created and allocated are whole seconds: creationTimestamp, Slurm's start time):"
    )
    out(f"  {'stage (s)':<44}{'p50':>8}{'p99':>8}{'Pods':>8}")
    for row in stage_table(records):
        out(f"  {row.label:<44}{row.p50:>8.3f}{row.p99:>8.3f}{row.count:>8}")
    start_watch_row(out, pods, inst)
    made = {op: n for op, n in counters.slurm_requests.items() if op in WHOLE_LIST_READS}
    after = whole_list_reads(made) - inst.whole_lists_at_start
    kinds = ", ".join(f"{op} {n}" for op, n in sorted(made.items())) or "none"
    out(
        f"  whole job-list reads after the scheduler's start: {after} (all so far, by kind: "
        f"{kinds}; {inst.whole_lists_at_start} at its start)"
    )


def start_watch_row(out: Callable[..., None], pods: list[PodTimes], inst: Instrument) -> None:
    """The start watch's looks from the phase's first create to its last bind: what a look
    took (its state list, then the GETs of the jobs it found started) and the wait between
    looks (FAST_SECONDS, or DUTY x the last state list), which together make the stage
    'allocated -> seen allocated'."""
    bound = [p.bound for p in pods if p.bound]
    if not pods or not bound:
        return
    first, last = min(p.sent for p in pods), max(bound)
    with inst.lock:
        looks = [k for k in inst.looks if first <= k.began <= last]
    if len(looks) < 2:
        out(f"  the start watch: {len(looks)} looks in the phase")
        return
    took = [k.ended - k.began for k in looks]
    gaps = [b.began - a.ended for a, b in itertools.pairwise(looks)]
    out(f"  the start watch: {len(looks)} looks in {last - first:.1f} s; a look took p50 "
        f"{statistics.median(took):.3f} s, max {max(took):.3f} s (its state list p50 "
        f"{statistics.median(k.state_list for k in looks):.3f} s, max "
        f"{max(k.state_list for k in looks):.3f} s; jobs found started and read per look p50 "
        f"{statistics.median(k.started for k in looks):.0f}, max "
        f"{max(k.started for k in looks)}); the wait between looks p50 "
        f"{statistics.median(gaps):.3f} s, max {max(gaps):.3f} s")  # fmt: skip
    reading = [(k.started, k.ended - k.began - k.state_list) for k in looks if k.started]
    if reading:  # compare with the raw phase's reads of running jobs
        jobs, seconds = sum(n for n, _ in reading), sum(t for _, t in reading)
        out(f"  the start watch read {jobs} started jobs, one `GET /job/<id>` each, {READERS} "
            f"at a time, in {seconds:.1f} s: {jobs / max(seconds, 1e-9):.1f} jobs/s")  # fmt: skip


def between_marks_rows(
    out: Callable[..., None], marks: list[tuple[str, Callable[[Any], float | None]]],
    items: list[Any], width: int,
) -> None:  # fmt: skip
    """One row per pair of consecutive marks: the time from one to the next, over the items
    (Pods, or gangs) that have both."""
    out(f"  {'stage (s)':<{width}}{HEADER}")
    for (label_a, a), (label_b, b) in itertools.pairwise(marks):
        pairs = [(a(item), b(item)) for item in items]
        values = [y - x for x, y in pairs if x and y]
        if values:
            out(fmt_row(f"{label_a} -> {label_b}", spread(values), width))


def worker_rows(
    out: Callable[..., None], pods: list[PodTimes], inst: Instrument, workers: int,
    seconds: float,
) -> None:  # fmt: skip
    """How busy the workers were in the two calls on a Pod's path, and in what order the Pods
    whose jobs had started got their bind."""
    uids = [p.uid for p in pods if p.uid]
    submit = sum(inst.submitted[u] - inst.submit_sent[u] for u in uids if u in inst.submitted)
    bind = sum(inst.bind_returned[u] - inst.bind_sent[u] for u in uids if u in inst.bind_sent)
    capacity = workers * seconds
    out(
        f"  its workers' time in calls: submit {submit:.1f} s, bind {bind:.1f} s, of {workers} "
        f"workers x {seconds:.1f} s = {capacity:.1f} worker-s ({(submit + bind) / capacity:.0%})"
    )
    # Pairs of Pods waiting for their bind at the same time (the second's allocation was known
    # before the first's bind was sent): how often the later one was bound first.
    hooked = sorted(
        (known, inst.bind_sent[u])
        for u in uids
        if (known := inst.allocation_known(u)) is not None and u in inst.bind_sent
    )
    pairs = later_first = 0
    for i, (_, bind_i) in enumerate(hooked):
        for hook_j, bind_j in hooked[i + 1 :]:
            if hook_j >= bind_i:
                break
            pairs += 1
            later_first += bind_j < bind_i
    if pairs:
        out(
            f"  bind order: of {pairs} pairs of Pods waiting for a bind at once, "
            f"{later_first / pairs:.0%} were bound latest allocation first (FIFO 0%, "
            "random 50%, a stack 100%)"
        )


def hook_race_rows(
    out: Callable[..., None], pods: list[PodTimes], inst: Instrument, pods_deleted: int,
    requeued: int,
) -> None:  # fmt: skip
    """`started` hooks that beat the submit's record, and polls whose answer predates a hook."""
    uids = {p.uid for p in pods if p.uid}
    if not uids & inst.started_hook.keys():  # today's placeholder script sends none
        out("  no `started` hook calls (the placeholder script makes none)")
        return
    early = [p for p in pods if p.uid in inst.early_hooks and p.bound]
    if early:
        lat = [p.bound - p.created for p in early if p.bound]
        out(
            f"  {len(early)} `started` hooks arrived before the scheduler had recorded the "
            f"job's submit (latency of those Pods p50 {percentile(lat, 50):.2f} s, max "
            f"{max(lat):.2f} s)"
        )
    else:
        out("  every `started` hook found its job's submit recorded")
    stale = {u: v for u, v in inst.stale_pending.items() if u in uids}
    if not stale:
        out("  no Slurm poll sent before a job's `started` hook returned that job PENDING")
        return
    after_bind = sum(
        1 for u, (_, back) in stale.items() if inst.bind_returned.get(u, math.inf) < back
    )
    held = Counter(inst.stale_after.get(u, "unknown") for u in stale)
    out(
        f"  {len(stale)} Pods: a Slurm poll sent before their job's `started` hook returned the "
        f"job PENDING ({after_bind} of them already bound when it returned)"
    )
    if held["RUNNING"] == len(stale) and not pods_deleted and not requeued:
        verdict = "the scheduler kept the hook's RUNNING for all of them"
    else:
        states = ", ".join(f"{s} {n}" for s, n in held.most_common())
        verdict = (
            f"the scheduler's job state right after that poll: {states} (PENDING: it stored the "
            "poll's answer over what the hook said)"
        )
    out(f'    {verdict}; pods_deleted {pods_deleted}, "requeued" in its log {requeued} times')


def cpu_rows(
    out: Callable[..., None], cpu: dict[str, float], seconds: float, what: str,
    events: int = 0, event_bytes: int = 0,
) -> None:  # fmt: skip
    cpus = os.cpu_count() or 1
    out(f"  CPU seconds {what} ({seconds:.1f} s wall, {cpus} CPUs = {seconds * cpus:.1f} CPU s):")
    for label, used in sorted(cpu.items(), key=lambda kv: _cpu_order(kv[0])):
        if label == "machine":
            continue
        note = ""
        if label.startswith("  its watch of the Pods") and events:
            note = (
                f"   ({events} Pod events, {event_bytes / 1024:.0f} KiB: "
                f"{used / events * 1000:.1f} ms per event)"
            )
        out(f"    {label:<58}{used:>7.1f}{note}")
    out(f"    {'machine, all processes':<58}{cpu['machine']:>7.1f}")


THREAD_ORDER = ("  its watch of the Pods", "  its watch of the slurmd", "  its watch of the Nodes",
                "  its hooks", "  its Slurm poll", "  its workers", "  its event")  # fmt: skip


def _cpu_order(label: str) -> tuple[int, int]:
    """The process first, its threads under it, the rest as listed, the remainder last."""
    if label.startswith("benchmark process"):
        return 0, 0
    if label.startswith("  "):
        return 1, next((i for i, p in enumerate(THREAD_ORDER) if label.startswith(p)), 99)
    return (3 if label.startswith("rest of the machine") else 2), 0


def cleanup_rows(
    out: Callable[..., None], number: str, cleanup: Cleanup | None, inst: Instrument
) -> None:
    if cleanup is None:
        return
    gone = f"{cleanup.pods_gone:.1f} s" if cleanup.pods_gone is not None else "never"
    ended = f"{cleanup.jobs_gone:.1f} s" if cleanup.jobs_gone is not None else "never"
    out(f"{number}Pods gone after {gone}, their placeholder jobs ended after {ended}")
    deleted = [p for p in cleanup.deleted if p.gone is not None and p.delete_sent]
    if deleted:
        ours = [p.gone - p.delete_sent for p in deleted if p.gone]
        theirs = [inst.gone_seen[p.uid] - p.delete_sent for p in deleted if p.uid in inst.gone_seen]
        out(f"  {'delete sent -> DELETED seen (s)':<34}{HEADER}")
        out(fmt_row("  the load generator's watch", spread(ours)))
        if theirs:
            out(fmt_row(f"  the scheduler's watch ({len(theirs)} Pods)", spread(theirs)))


def kinds(records: Iterable[logging.LogRecord]) -> list[tuple[tuple[str, str, str], int]]:
    return Counter((r.name, r.levelname, shape(r.getMessage())) for r in records).most_common()


def shape(message: str) -> str:
    """A message with its numbers and uids blanked, so like messages count together."""
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<uid>", message)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return text[:150]


def per_pod_cpu(cpu: dict[str, float], bound: int) -> float:
    """The scheduler's process (this one) CPU seconds per bound Pod."""
    return cpu["benchmark process: PodScheduler"] / bound if bound else 0.0


def raw_rows(out: Callable[..., None], title: str, raw: RawResult, workers: int) -> None:
    script = "the placeholder script, stub hooks API" if raw.like_placeholders else "sleep 600"
    out(
        f"{title}: {raw.count} batch jobs of {raw.nodes} node(s) ({script}, {RAW_CPUS} CPU, "
        f"{RAW_MEMORY_MB} MB), {workers} concurrent submitters, one shared client"
    )
    out(
        f"  submitted in {raw.submit_seconds:.2f} s: {raw.rate:.1f} submits/s "
        f"(per submit: median {statistics.median(raw.per_submit) * 1000:.0f} ms, "
        f"p90 {percentile(raw.per_submit, 90) * 1000:.0f} ms)"
    )
    if raw.all_running_after is not None and raw.running_rate is not None:
        out(f"  all {raw.count} RUNNING {raw.all_running_after:.1f} s after the first submit: "
            f"{raw.running_rate:.1f} jobs RUNNING/s, submit -> all RUNNING")  # fmt: skip
    else:
        out(f"  NOT all {raw.count} RUNNING within {SETTLE_TIMEOUT:.0f} s")
    if raw.processes_after is not None:
        out(f"  all {raw.count} jobs' processes (slurmstepd, sh, sleep) up "
            f"{raw.processes_after:.1f} s after the first submit: "
            f"{raw.count / raw.processes_after:.1f} jobs/s")  # fmt: skip
    if raw.memory is not None:
        out(f"  while running: {raw.memory.text(raw.count)}; MemAvailable "
            f"{raw.mem_drop / 2**30:+.2f} GiB lower")  # fmt: skip
    if raw.reads_per_second is not None:
        out(f"  all {raw.count} read back, one `GET /job/<id>` each, {READERS} at a time: "
            f"{raw.reads_per_second:.1f} jobs/s (while slurmctld starts nothing)")  # fmt: skip
    settled = f"{raw.settled_after:.1f} s" if raw.settled_after is not None else "never"
    out(f"  cancelled in {raw.cancel_seconds:.2f} s; no job left and every CPU free after "
        f"{settled}")  # fmt: skip
    out()
