"""bench.daemon_scale's figures: the bound Pods' waves, and the resyncs."""

from __future__ import annotations

import argparse
import statistics

from bench.daemon.common import WARNING
from bench.daemon.memory import Point, Recorder
from bench.daemon.process import Daemon
from bench.daemon.report import memory_table
from bench.daemon.resync import ResyncRun
from bench.daemon.waves import CLUSTER_CPUS, COUNTERS, WHOLE_LIST_READS, ListCost, SlurmEnd, Wave
from bench.harness.procs import MIB, Sample
from bench.harness.report import machine_line


def warnings_line(daemon: Daemon) -> str:
    lines = [
        line for line in daemon.log.read_text(errors="replace").splitlines() if WARNING.search(line)
    ]
    return f"warnings logged by the daemon: {len(lines)}" + (
        f", e.g. {lines[0][:160]}" if lines else ""
    )


def requests_line(waves: list[Wave], bound: int) -> str:
    """The scheduler's slurmrestd requests per bound Pod by operation, over the waves (the
    start's own reads are before the first wave), and its whole job-list reads in them."""
    kinds: dict[str, int] = {}
    for wave in waves:
        for name, count in wave.counted.items():
            if name.startswith("slurm:"):
                kinds[name[6:]] = kinds.get(name[6:], 0) + count
    whole = sum(kinds.get(kind, 0) for kind in WHOLE_LIST_READS)
    by_kind = ", ".join(f"{k} {n / bound:.2f}" for k, n in sorted(kinds.items()) if n)
    return (
        f"the scheduler's slurmrestd requests per bound Pod: {sum(kinds.values()) / bound:.2f}"
        f" ({by_kind}); whole job-list reads during the waves: {whole}"
    )


def reader_line(waves: list[Wave]) -> str:
    """How the daemon's Slurm metrics reader stood after each wave: in which waves its last
    read took the whole job list and in which it counted jobs per state only (above
    --slurm-metrics-job-detail-limit), the snapshot's age and read time, its failures."""
    seen = [w for w in waves if "job_detail" in w.reader]
    if not seen:
        return "the daemon's Slurm metrics reader: no series (not reading Slurm)"
    listed = [w.index for w in seen if w.reader["job_detail"]]
    counted = [w.index for w in seen if not w.reader["job_detail"]]
    ages = [w.reader.get("age", 0.0) for w in seen]
    reads = [w.reader.get("read", 0.0) for w in seen]
    return (
        f"the daemon's Slurm metrics reader, its last read after each wave: the whole job "
        f"list after {_waves(listed)}, jobs per state only after {_waves(counted)}; snapshot "
        f"age max {max(ages):.1f} s, read time max {max(reads):.2f} s, failed reads "
        f"{seen[-1].reader.get('failures', 0):.0f}"
    )


def _waves(indexes: list[int]) -> str:
    if not indexes:
        return "no wave"
    return f"{len(indexes)} waves ({indexes[0]}..{indexes[-1]})"


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x; None with fewer than 2 points."""
    if len(points) < 2:
        return None
    mx = statistics.mean(x for x, _ in points)
    my = statistics.mean(y for _, y in points)
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else None


def report_waves(
    daemon: Daemon,
    waves: list[Wave],
    args: argparse.Namespace,
    points: tuple[Point, Point],
    slurm: SlurmEnd,
    cost: ListCost,
    recorder: Recorder,
    load: float,
    restarts: list[str],
) -> bool:
    """The bound Pods' figures; False when a check failed."""
    pods, size = args.pods, args.wave
    baseline, end = points
    print()
    print(
        f"1. Pods bound through `reconciler run` (pid {daemon.pid}, scheduling as "
        f"{daemon.scheduler_name}): {pods} Pods in waves of at most {size}"
    )
    print(
        f"  {machine_line(load=load)}; bench/fixtures/scheduler-repo: 4 Slurm nodes x 128 CPUs "
        f"({CLUSTER_CPUS}), each Pod 1 CPU"
    )
    print(
        f"  {'wave':>5}{'Pods':>6}{'created/s':>10}{'bound s':>9}{'binds/s':>9}{'cleanup s':>10}"
        f"{'CPU ms/Pod':>11}{'VmRSS MiB':>10}{'RssAnon':>9}{'threads':>8}{'jobs listed':>12}"
    )
    for w in waves:
        bound = f"{w.bound_seconds:.1f}" if w.bound_seconds else "-"
        rate = f"{w.binds_per_second:.1f}" if w.binds_per_second else "-"
        cleanup = f"{w.cleanup_seconds:.1f}" if w.cleanup_seconds is not None else "-"
        after = w.after
        assert after is not None
        print(
            f"  {w.index:>5}{w.pods:>6}{w.pods / w.create_seconds:>10.0f}{bound:>9}{rate:>9}"
            f"{cleanup:>10}{w.cpu * 1000 / w.pods:>11.1f}{after.rss / MIB:>10.1f}"
            f"{after.anon / MIB:>9.1f}{after.threads:>8}{w.jobs_listed:>12}"
        )
    total = {c: sum(w.counted.get(c, 0) for w in waves) for c in COUNTERS}
    problems = [p for w in waves for p in w.problems]
    rates = [w.binds_per_second for w in waves if w.binds_per_second]
    cpu_bind, cpu_cleanup = sum(w.cpu_bind for w in waves), sum(w.cpu_cleanup for w in waves)
    bound = total["bound"]
    print()
    print(
        f"  bound {bound} of {pods} (the daemon's counter); refused {total['refused']}; "
        f"placeholder jobs submitted {total['submitted']} (one per Pod: {total['submitted']} "
        f"for {bound}); jobs cancelled {total['jobs_cancelled']}; Pods the scheduler deleted "
        f"{total['pods_deleted']}"
    )
    if rates:
        print(
            "  binds/s per wave (first create -> all bound): median "
            f"{statistics.median(rates):.1f}, min {min(rates):.1f}, max {max(rates):.1f}; Pods "
            "created at "
            f"{statistics.median(w.pods / w.create_seconds for w in waves):.0f}/s (median)"
        )
    if bound:
        cpu = cpu_bind + cpu_cleanup
        print(
            f"  daemon CPU: {cpu:.1f} s for {bound} bound Pods = {cpu * 1000 / bound:.1f} ms per "
            f"bound Pod ({cpu_bind * 1000 / bound:.1f} ms create -> bound, "
            f"{cpu_cleanup * 1000 / bound:.1f} ms delete -> clean)"
        )
    if bound:
        print("  " + requests_line(waves, bound))
    print("  " + reader_line(waves))
    memory_table(
        print,
        [("baseline: ready, no Pods", baseline), ("end: all waves deleted", end)],
        recorder,
        34,
    )
    after = [(sum(w.pods for w in waves[: i + 1]), w.after.rss) for i, w in enumerate(waves)
             if w.after is not None]  # fmt: skip
    later = slope(after[len(after) // 2 :])
    overall = slope(after)
    if overall is not None:
        print(
            f"  VmRSS after each wave's cleanup: {after[0][1] / MIB:.1f} MiB after wave 1, "
            f"{after[-1][1] / MIB:.1f} MiB after wave {len(after)}; slope "
            f"{overall * 1000 / MIB:+.2f} MiB per 1,000 Pods bound"
            + (f" ({later * 1000 / MIB:+.2f} over the second half)" if later is not None else "")
        )
    per_job = 1024 * max(cost.jobs, 1)
    print(
        f"  Slurm's job list after the last wave: {cost.jobs} jobs, {cost.json_bytes / MIB:.1f} MiB"
        f" of JSON ({cost.json_bytes / per_job:.1f} KiB per job; a placeholder job's largest "
        "fields: " + ", ".join(f"{k} {n / 1024:.1f} KiB" for k, n in cost.largest) + ")"
    )
    print(
        f"    one GET /jobs as the scheduler's poll reads it (client and decoding): a peak of "
        f"{cost.peak / MIB:.1f} MiB of Python objects ({cost.peak / per_job:.0f} KiB per job; "
        f"json.loads alone {cost.loads_peak / per_job:.0f} KiB), {cost.kept / MIB:.1f} MiB kept "
        f"decoded, {cost.seconds:.2f} s under tracemalloc"
    )
    print(
        f"  Slurm at the end: {slurm.holding} placeholder jobs holding resources, "
        f"{slurm.allocated_cpus} of {slurm.cpus} CPUs allocated, {slurm.jobs_listed} jobs in its "
        "list (ended ones stay until MinJobAge)"
    )
    print(f"  {warnings_line(daemon)}")
    print(f"  Slurm daemons restarted during the waves: {len(restarts)}"
          + (f", e.g. {restarts[0][:160]}" if restarts else ""))  # fmt: skip
    if restarts:
        problems.append(f"{len(restarts)} Slurm daemon restarts")
    if bound != pods:
        problems.append(f"{bound} bound, {pods} wanted")
    if total["refused"]:
        problems.append(f"{total['refused']} refused")
    if total["submitted"] != bound:
        problems.append(f"{total['submitted']} placeholder jobs submitted for {bound} bound Pods")
    if slurm.holding or slurm.allocated_cpus:
        problems.append("placeholder jobs still hold resources at the end")
    print("  checks: " + ("all passed" if not problems else "FAILED: " + " | ".join(problems)))
    return not problems


def report_resyncs(
    daemon: Daemon, run: ResyncRun, interval: float, recorder: Recorder, load: float
) -> bool:
    """The resyncs' figures; False when a check failed."""
    print()
    print(
        f"2. resync of `reconciler run` (pid {daemon.pid}) with {run.definitions} node "
        f"definitions at 0 replicas (+1 real node), --resync {interval:g}"
    )
    print(f"  {machine_line(load=load)}")
    print(
        f"  first convergence (applies them): {run.first_seconds:.1f} s, {run.first_cpu:.1f} s "
        f"CPU; ready {run.ready_seconds:.1f} s after the start; {run.first_summary}"
    )
    print(
        f"  StatefulSets {run.statefulsets} of the generated definitions listed, {run.at_zero} "
        "at replicas 0"
    )
    if run.resyncs:
        print(f"  {'resync':>8}{'state':>11}{'seconds':>9}{'CPU s':>8}{'daemon CPU s':>13}")
        for i, r in enumerate(run.resyncs, 1):
            print(f"  {i:>8}{r.state:>11}{r.seconds:>9.2f}{r.cpu:>8.2f}{r.process_cpu:>13.2f}")
        seconds = statistics.median(r.seconds for r in run.resyncs)
        cpu = statistics.median(r.cpu for r in run.resyncs)
        print(
            f"  median resync: {seconds:.2f} s, {cpu:.2f} s CPU of its thread "
            f"({cpu * 1000 / max(run.definitions, 1):.1f} ms per definition); at --resync "
            f"{interval:g} that is {cpu / interval * 100:.1f}% of a CPU"
        )
    if run.stages:
        print(
            f"  where a resync's time goes (cProfile in the benchmark's process, "
            f"{run.profiled_seconds:.1f} s with the profiler; shares of the convergence):"
        )
        for label, seconds, share in run.stages:
            print(f"    {label:<58}{share * 100:>6.1f}%{seconds:>8.2f} s")
        rest = 1 - sum(share for _, _, share in run.stages)
        print(f"    {'the rest (connecting, the status read, ...)':<58}{rest * 100:>6.1f}%")
    rows: list[tuple[str, Sample | Point]] = []
    if run.ready is not None:
        rows.append(("ready: first convergence done", run.ready))
    if run.resyncs:
        rows.append((f"after resync {len(run.resyncs)}", run.resyncs[-1].after))
    memory_table(print, rows, recorder, 34)
    print(f"  {warnings_line(daemon)}")
    print(
        "  checks: " + ("all passed" if not run.problems else "FAILED: " + " | ".join(run.problems))
    )
    return not run.problems
