"""Daemon memory: the resident set of `reconciler run` with 10,000 Pods watched.

Not a test: run it by hand from the repo root and read the figures.

    python -m bench.daemon_rss                    # 10,000 Pods (about 10 min on 2 CPUs)
    python -m bench.daemon_rss --pods 500         # a quick check (say so when you quote it)

Flags:
    --pods N          Pods of the daemon's schedulerName to create (default 10000)
    --other-pods N    Pods of another schedulerName, created first (default: as many as
                      --pods; 0 skips that phase)
    --creators N      threads creating and deleting Pods (default 16)
    --settle S        seconds of RSS samples (one a second) at each point (default 15)
    --timeout S       seconds to wait for the daemon to process the Pods (default 1800)
    --rounds N        create, refuse and delete the Pods of ours N times (default 1): if
                      RSS stays up after a delete, a second round tells memory the
                      allocator keeps for reuse from memory that grows per round (a leak)
    --no-delete       keep the Pods to the end (skip the "after deleting them" point)

One run, on a local stack of its own (`reconciler local up --runtime-dir` a fresh temp dir,
from a copy of fixtures/config-repo, so an edit of the fixture during the run changes
nothing), with the daemon as users run it:

    reconciler run --source-dir <copy> --local --runtime-dir <dir>
                   --hooks-api-bind-address 127.0.0.1:0 --listen 127.0.0.1:<free port>

Its VmRSS, RssAnon, VmHWM (peak), threads and CPU seconds come from /proc/<pid>/status and
/proc/<pid>/stat. Each point is the median of --settle samples taken once the daemon is
quiescent (under 3% of a CPU over 3 s):

1. baseline: /readyz ok, the first revision converged (applied or unchanged).
2. --other-pods Pods whose spec.schedulerName is not ours, in a namespace the scheduler
   watches: its watch selects `spec.schedulerName=<ours>`, so the API server filters them out
   and the daemon should not grow.
3. --pods Pods of our schedulerName, created by --creators threads, that admission refuses
   without a Slurm call (no CPU or memory request): each gets the annotation
   `reconciler.sunk.dev/rejected`, PodScheduled=False and one FailedScheduling Event, and the
   daemon keeps it in its watch cache like any Pod of ours. slurmctld is not loaded with 10k
   jobs. Processed = the daemon's /metrics counter `reconciler_scheduler_refused` counts them
   all; written = every Pod has its annotation and condition, and there is one Event each.
4. the Pods of ours deleted (DELETED events reach the daemon): what the daemon keeps after.
   With --rounds N, 3 and 4 again, with new Pods, N times.

The daemon and the stack are stopped by their PIDs in a finally; the logs stay in
<runtime>/logs (bench-daemon.log is the daemon's stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time

if __package__ in (None, ""):  # `python bench/daemon_rss.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.daemon.common import (
    NAMESPACE,
    OTHER_SCHEDULER,
    REPO,
    WRITTEN_TIMEOUT,
    Ours,
    create_pods,
    delete_pods,
    written,
)
from bench.daemon.memory import Recorder, measure
from bench.daemon.process import Daemon, own_stack, running_daemon
from bench.daemon.report import report
from bench.harness.procs import MIB, sample
from bench.harness.report import say
from bench.harness.stack import stop_on_sigterm
from reconciler.adapters.kube import Kube
from reconciler.errors import ReconcilerError


def run_ours(
    daemon: Daemon, kube: Kube, prefix: str, count: int, creators: int, timeout: float
) -> tuple[Ours, list[str]]:
    before = daemon.refused()
    cpu0 = sample(daemon.pid).cpu

    def progress(done: int, seconds: float) -> str:
        now = sample(daemon.pid)
        return (
            f"created {done}/{count} Pods of ours in {seconds:.1f} s ({done / seconds:.0f}/s);"
            f" daemon VmRSS {now.rss / MIB:.1f} MiB, refused {daemon.refused() - before}"
        )

    names, first, create_seconds = create_pods(
        kube, prefix, count, daemon.scheduler_name, creators, progress
    )
    last = first + create_seconds
    say(f"waiting for the daemon to refuse all {count}")
    refused_at = lag = None
    deadline = first + timeout
    next_note = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        daemon.alive()
        refused = daemon.refused() - before
        now = time.monotonic()
        if refused >= count:
            refused_at, lag = now - first, now - last
            break
        if now > next_note:
            say(f"refused {refused}/{count}; daemon VmRSS {sample(daemon.pid).rss / MIB:.1f} MiB")
            next_note = now + 10.0
        time.sleep(0.5)
    if refused_at is None:
        say(f"the daemon refused {daemon.refused() - before}/{count} within {timeout:.0f} s")
    say("waiting for every annotation, condition and Event")
    written_at = seen = None
    deadline = time.monotonic() + WRITTEN_TIMEOUT
    while time.monotonic() < deadline:
        seen = written(kube, daemon.scheduler_name)
        if min(seen.annotated, seen.condition, seen.events) >= count:
            written_at = time.monotonic() - first
            break
        say(
            f"written: {seen.annotated} annotations, {seen.condition} conditions, "
            f"{seen.events} Events of {count}"
        )
        time.sleep(5.0)
    cpu = sample(daemon.pid).cpu - cpu0
    result = Ours(
        count, create_seconds, refused_at, lag, written_at, seen, cpu, daemon.refused() - before
    )
    return result, names


def run_points(
    args: argparse.Namespace, daemon: Daemon, kube: Kube, recorder: Recorder, load: float
) -> None:
    """The baseline, the other Pods, the rounds of ours, the report."""
    points = [measure(daemon.pid, "baseline", "baseline: ready, 0 Pods", args.settle)]
    other_seconds = None
    if args.other_pods:
        d = daemon

        def other_progress(done: int, seconds: float) -> str:
            return (
                f"created {done}/{args.other_pods} Pods of {OTHER_SCHEDULER} in "
                f"{seconds:.1f} s ({done / seconds:.0f}/s); daemon VmRSS "
                f"{sample(d.pid).rss / MIB:.1f} MiB"
            )

        _, _, other_seconds = create_pods(
            kube, "other", args.other_pods, OTHER_SCHEDULER, args.creators, other_progress
        )
        daemon.alive()
        points.append(
            measure(
                daemon.pid,
                "other",
                f"+{args.other_pods} Pods, another schedulerName",
                args.settle,
            )
        )
    rounds: list[Ours] = []
    for index in range(1, args.rounds + 1):
        suffix = "" if index == 1 else str(index)
        what = "" if args.rounds == 1 else f" (round {index})"
        say(f"round {index} of {args.rounds}" if args.rounds > 1 else "Pods of ours")
        ours, names = run_ours(
            daemon, kube, f"ours{suffix}", args.pods, args.creators, args.timeout
        )
        rounds.append(ours)
        label = f"+{args.pods} Pods of ours, all refused{what}"
        points.append(measure(daemon.pid, f"ours{suffix}", label, args.settle))
        if not args.no_delete:
            ours.delete_seconds = delete_pods(kube, names, args.creators)
            label = f"after deleting them{what}"
            points.append(measure(daemon.pid, f"deleted{suffix}", label, args.settle))
    daemon.alive()
    recorder.stop()
    report(args, daemon, points, rounds, other_seconds, recorder, load)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.daemon_rss",
        description="Resident memory of `reconciler run` with N Pods watched, on a local stack "
        "of its own.",
    )
    parser.add_argument(
        "--pods", type=int, default=10000, help="Pods of the daemon's schedulerName (default 10000)"
    )
    parser.add_argument(
        "--other-pods",
        type=int,
        default=None,
        help="Pods of another schedulerName, first (default: --pods; 0 skips)",
    )
    parser.add_argument(
        "--creators", type=int, default=16, help="threads creating and deleting Pods (default 16)"
    )
    parser.add_argument(
        "--settle", type=float, default=15.0, help="seconds of samples at each point (default 15)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        help="seconds for the daemon to refuse them all (default 1800)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="create, refuse and delete the Pods of ours N times (default 1)",
    )
    parser.add_argument(
        "--no-delete",
        action="store_true",
        help="keep the Pods to the end (no 'after deleting' point)",
    )
    args = parser.parse_args(argv)
    if args.other_pods is None:
        args.other_pods = args.pods
    if min(args.pods, args.creators, args.settle, args.rounds) < 1 or args.other_pods < 0:
        parser.error("--pods, --creators, --settle and --rounds must be at least 1")
    if args.rounds > 1 and args.no_delete:
        parser.error("--rounds above 1 deletes the Pods between rounds: drop --no-delete")

    stop_on_sigterm()  # run the finally blocks: the daemon and stack must stop
    wall = time.monotonic()
    load = os.getloadavg()[0]
    try:
        with own_stack(
            "sunk-reconciler-bench-rss-",
            lambda repo: shutil.copytree(REPO, repo),
            "daemon-rss-bench",
        ) as stack:
            kube = stack.kube
            kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            with running_daemon(stack.repo, stack.runtime) as daemon:
                recorder = Recorder(daemon.pid, stack.runtime / "logs" / "bench-rss-samples.json")
                try:
                    run_points(args, daemon, kube, recorder, load)
                finally:
                    with contextlib.suppress(Exception):
                        recorder.stop()
    except ReconcilerError as exc:
        say(f"failed: {exc}")
        return 1
    print(f"wall time of the run: {time.monotonic() - wall:.0f} s (stack up and down included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
