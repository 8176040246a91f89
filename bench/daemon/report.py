"""The daemon memory benchmark's table and the figures of each round of Pods."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from bench.daemon.common import NAMESPACE, WARNING, Ours
from bench.daemon.memory import Point, Recorder
from bench.daemon.process import Daemon
from bench.harness.procs import MIB, Sample


def report(
    args: argparse.Namespace,
    daemon: Daemon,
    points: list[Point],
    rounds: list[Ours],
    other_seconds: float | None,
    recorder: Recorder,
    load: float,
) -> None:
    out = print
    by = {p.key: p for p in points}
    out()
    out(
        f"daemon RSS with Pods watched: `reconciler run` (pid {daemon.pid}, scheduler "
        f"{daemon.scheduler_name}, watching namespaces slurm and {NAMESPACE})"
    )
    out(
        f"machine: {os.cpu_count()} CPUs, load average {load:.2f} at the start; Python "
        f"{sys.version.split()[0]}; daemon ready {daemon.seconds_to_ready:.1f} s after its start"
    )
    out(f"each point: median of {args.settle:g} s of samples (1/s) once the daemon was quiet")
    out()
    memory_table(out, [(p.label, p) for p in points], recorder)
    out()
    base = by["baseline"]
    if "other" in by:
        other = by["other"]
        out(
            f"{args.other_pods} Pods of another schedulerName (created in {other_seconds:.1f} s,"
            f" {args.other_pods / max(other_seconds or 1e-9, 1e-9):.0f}/s): VmRSS "
            f"{(other.rss - base.rss) / MIB:+.1f} MiB, CPU {other.cpu - base.cpu:.1f} s "
            "(filtered by the API server)"
        )
    previous = by.get("other", base)
    for index, ours in enumerate(rounds, 1):
        suffix = "" if index == 1 else str(index)
        point, deleted = by[f"ours{suffix}"], by.get(f"deleted{suffix}")
        rounds_text = f" (round {index})" if len(rounds) > 1 else ""
        round_rows(out, ours, point, previous, args.creators, rounds_text, again=index > 1)
        if deleted is not None and ours.delete_seconds is not None:
            out(
                f"  deleted in {ours.delete_seconds:.1f} s; then VmRSS {deleted.rss / MIB:.1f} "
                f"MiB: {(deleted.rss - point.rss) / MIB:+.1f} MiB from the point with them, "
                f"{(deleted.rss - base.rss) / MIB:+.1f} MiB from the baseline"
            )
        previous = deleted or point
    warnings = [
        line for line in daemon.log.read_text(errors="replace").splitlines() if WARNING.search(line)
    ]
    out(
        f"warnings logged by the daemon: {len(warnings)}"
        + (f", e.g. {warnings[0][:160]}" if warnings else "")
    )


def round_rows(
    out: Callable[..., None],
    ours: Ours,
    point: Point,
    before: Point,
    creators: int,
    what: str,
    *,
    again: bool,
) -> None:
    grown, anon = point.rss - before.rss, point.anon - before.anon
    w = ours.written
    if again:
        out(
            f"{ours.count} Pods of ours, refused{what}: VmRSS {grown / MIB:+.1f} MiB over the "
            "point after the last round's delete (near 0: the memory those Pods freed is reused)"
        )
    else:
        out(
            f"{ours.count} Pods of ours, refused{what}: VmRSS {grown / MIB:+.1f} MiB, "
            f"{grown / ours.count / 1024:.1f} KiB per Pod ({anon / ours.count / 1024:.1f} KiB "
            "RssAnon)"
        )
    if w is not None and w.pods and not again:
        out(
            f"  one such Pod as the API server lists it: {w.json_bytes:.0f} bytes of JSON "
            f"(metadata with managedFields, spec, status); RSS per Pod is "
            f"{grown / ours.count / max(w.json_bytes, 1):.1f} x that"
        )
    out(
        f"  created in {ours.create_seconds:.1f} s ({ours.count / ours.create_seconds:.0f}/s) "
        f"by {creators} threads"
    )
    if ours.refused_at is not None and ours.lag is not None:
        out(
            f"  all refused (metrics counter) {ours.refused_at:.1f} s after the first create, "
            f"{ours.lag:.1f} s after the last"
        )
    else:
        out(f"  NOT all refused: the counter says {ours.refused_total}")
    if ours.written_at is not None:
        out(
            f"  every annotation, PodScheduled=False and Event seen written {ours.written_at:.1f} "
            "s after the first create (checked by a list every 5 s)"
        )
    elif w is not None:
        out(
            f"  NOT all written: {w.annotated} annotations, {w.condition} conditions, "
            f"{w.events} Events"
        )
    if w is not None and (w.events != ours.count or ours.refused_total != ours.count):
        out(
            f"  refusals counted {ours.refused_total}, FailedScheduling Events {w.events} "
            f"for {ours.count} Pods"
        )
    out(
        f"  daemon CPU for them: {ours.cpu_seconds:.1f} s "
        f"({ours.cpu_seconds / ours.count * 1000:.1f} ms per Pod)"
    )


def memory_table(
    out: Callable[..., None],
    rows: Sequence[tuple[str, Sample | Point]],
    recorder: Recorder,
    width: int = 46,
) -> None:
    """The daemon's memory at each point, and the highest VmRSS the recorder sampled."""
    out(f"  {'point':<{width}}{'VmRSS':>10}{'RssAnon':>10}{'VmHWM':>10}{'threads':>9}{'CPU s':>8}")
    for label, s in rows:
        out(
            f"  {label:<{width}}{s.rss / MIB:>6.1f} MiB{s.anon / MIB:>6.1f} MiB"
            f"{s.hwm / MIB:>6.1f} MiB{s.threads:>9}{s.cpu:>8.1f}"
        )
    peak = max(recorder.samples, key=lambda s: s.rss, default=None)
    if peak is not None:
        threads = max(s.threads for s in recorder.samples)
        out(
            f"  highest VmRSS sampled during the run (1/s): {peak.rss / MIB:.1f} MiB, RssAnon "
            f"{peak.anon / MIB:.1f} MiB (the peak to quote: the kernel updates VmHWM lazily, it "
            f"can read below an earlier VmRSS); {threads} threads at the most"
        )
