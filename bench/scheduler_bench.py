"""Scheduler benchmark: Pods bound through Slurm by the Pod scheduler, against raw slurmrestd.

Not a test: run it by hand from the repo root and read the figures.

    python -m bench.scheduler_bench              # or: python bench/scheduler_bench.py
    python -m bench.scheduler_bench --pods 100   # a smaller batch (say so when you quote it)

One run, side by side, on a local stack of its own (`reconciler local up`, name bench-sched,
from bench/fixtures/scheduler-repo: 4 Slurm nodes of 128 CPUs and 512Gi):

1. raw slurmrestd: --pods plain batch jobs (`sleep 600`, 1 CPU, 100 MB) submitted through
   reconciler.adapters.slurm by --workers concurrent submitters: submits/s, and jobs
   RUNNING/s (count / first submit -> all RUNNING). Then they are cancelled, and the run waits
   until Slurm has none left and every CPU is free again.
2. burst: PodScheduler runs in this process (--workers workers, hooks on 127.0.0.1 port 0); a
   spawned load generator process creates --pods Pods (cpu 100m, memory 100Mi, grace 5 s) as
   fast as --creators threads can, and its watch records when each one gets spec.nodeName.
   Latency per Pod (p50/p90/p99/max), where it goes (wrappers around the scheduler's watch
   handler, submit, poll, hook handler and bind record the times), Pods bound per second over
   the batch (never more than the Pods' create rate), CPU seconds per process and thread.
3. cleanup of the burst: the Pods are deleted; the scheduler cancels their jobs.
4. paced: with the same scheduler, --paced-pods Pods created at --paced-rate Pods/s: the
   latency a Pod sees when the machine is not saturated by a burst. Cleaned up the same way.
5. backlog: the first scheduler is stopped; --pods Pods are created for another scheduler name
   (the scheduler's + "-backlog") that nothing watches yet; then a second PodScheduler with
   that name is started: Pods bound/s from its start to the last bind is the scheduler's own
   throughput, independent of the API server's create rate. Cleaned up the same way.
6. the stack is stopped through its own stop (the `up` process, by its recorded PID) and down.

With --gang-size N (default 8; 0 for single Pods only, on the 4-node stack) the stack comes from
bench/fixtures/scheduler-gang-repo (16 nodes of 32 CPUs: a gang of 8 needs 8 distinct nodes),
and after 5. come: raw slurmrestd jobs of N nodes; a gang burst and a gang backlog (the Pods
created in gangs of N, annotations pod-group and pod-group-min-member: one Slurm job of N nodes
per gang); then single Pods and gangs side by side: Pods bound/s, gangs bound/s, Pod -> bound
and last member created -> gang fully bound, p50/p90/p99.

Targets: p50 < 1 s, and throughput (the backlog's) / raw slurmrestd >= 0.8, against both the
raw submit rate and the raw submit -> all RUNNING rate.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

if __package__ in (None, ""):  # `python bench/scheduler_bench.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness.report import Target, say
from bench.harness.stack import STACK_STOP_TIMEOUT, start_stack, stop_local_up, stop_on_sigterm
from bench.sched.common import (
    GANG_REPO,
    GANG_SIZE,
    P50_TARGET,
    RATIO_TARGET,
    REPO,
    ROOT,
    STACK_NAME,
    LogCapture,
)
from bench.sched.gangs import GangRun, dump_times, gang_report
from bench.sched.phases import run_backlog, run_scheduler
from bench.sched.raw import run_raw
from bench.sched.report import report
from reconciler.errors import ReconcilerError
from reconciler.scheduler.settings import DEFAULT_WORKERS

# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scheduler_bench",
        description="Pod scheduler latency and throughput against raw slurmrestd submits, on a "
        "local stack of its own.",
    )
    parser.add_argument("--pods", type=int, default=500,
                        help="Pods, and raw jobs, in the burst and in the backlog "
                        "(default 500)")  # fmt: skip
    parser.add_argument("--paced-pods", type=int, default=100,
                        help="Pods in the paced phase (default 100; 0 skips it)")  # fmt: skip
    parser.add_argument("--paced-rate", type=float, default=10.0,
                        help="Pods created per second in the paced phase (default 10)")  # fmt: skip
    parser.add_argument("--no-backlog", action="store_true", help="skip the backlog phase")
    parser.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKERS,
        help=f"scheduler workers, and raw concurrent submitters (default {DEFAULT_WORKERS})",
    )
    parser.add_argument(
        "--creators", type=int, default=4, help="threads creating (and deleting) Pods (default 4)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds to wait for every Pod to be bound (default 300)",
    )
    parser.add_argument(
        "--steady",
        type=float,
        default=15.0,
        help="seconds to watch the poll after the last bind (default 15)",
    )
    parser.add_argument(
        "--name", default=STACK_NAME, help=f"local stack name (default {STACK_NAME})"
    )
    parser.add_argument(
        "--gang-size",
        type=int,
        default=GANG_SIZE,
        help=f"after the single-Pod phases, the same burst and backlog with the Pods in gangs "
        f"of this many (one Slurm job of that many nodes each; --pods rounded down to a "
        f"multiple), on a stack of 16 nodes; 0: single Pods only, on 4 nodes (default "
        f"{GANG_SIZE})",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a target is missed (checks always do)"
    )
    args = parser.parse_args(argv)
    if args.pods < 1 or args.workers < 1 or args.creators < 1:
        parser.error("--pods, --workers and --creators must be at least 1")
    if args.paced_pods < 0 or args.paced_rate <= 0:
        parser.error("--paced-pods must be at least 0 and --paced-rate above 0")
    if max(args.pods, args.paced_pods) > 512:
        parser.error("the bench cluster has 512 CPUs: at most 512 one-CPU jobs at once")
    if args.gang_size < 0 or args.gang_size > 16:
        parser.error("--gang-size must be 0 (no gangs) to 16 (the gang stack's nodes)")
    if args.gang_size and args.pods < args.gang_size:
        parser.error("--pods must be at least --gang-size")
    args.repo = GANG_REPO if args.gang_size else REPO
    gang_pods = args.pods // args.gang_size * args.gang_size if args.gang_size else 0

    stop_on_sigterm()  # run the finally blocks: the stack must stop
    wall = time.perf_counter()
    load = os.getloadavg()[0]
    say(f"starting local stack {args.name!r} from {args.repo.relative_to(ROOT)}")
    stack = start_stack(args.name, args.repo)
    say(f"stack ready in {stack.seconds_to_ready:.1f} s ({stack.runtime})")
    captured = LogCapture(stack.runtime / "logs" / "bench-scheduler.log")
    logging.getLogger().addHandler(captured)
    logging.getLogger("reconciler.scheduler").setLevel(logging.INFO)
    targets: list[Target] = []
    checks: list[str] = []
    try:
        raw = run_raw(stack, args.pods, args.workers)
        raw_like = run_raw(stack, args.pods, args.workers, like_placeholders=True)
        sched = run_scheduler(stack, args.pods, args.workers, args.creators, args.timeout,
                              args.steady, args.paced_pods, args.paced_rate,
                              captured, repo=args.repo)  # fmt: skip
        checks = list(sched.checks)
        backlog = None
        if not args.no_backlog:  # the first scheduler is stopped by now
            backlog = run_backlog(stack, args.pods, args.workers, args.creators, args.timeout,
                                  captured, repo=args.repo)  # fmt: skip
            checks += [f"backlog: {c}" for c in backlog.checks]
        gangs = None
        if gang_pods:
            size = args.gang_size
            gangs = GangRun(size)
            say(f"gangs of {size}: {gang_pods} Pods, {gang_pods // size} gangs")
            gangs.raw = run_raw(stack, gang_pods // size, args.workers, nodes=size)
            gangs.burst = run_scheduler(
                stack, gang_pods, args.workers, args.creators, args.timeout, 0.0, 0, 1.0,
                captured, repo=args.repo, gang=size, prefix="gang", name_suffix="-gang",
            )  # fmt: skip
            checks += [f"gang burst: {c}" for c in gangs.burst.checks]
            if not args.no_backlog:
                gangs.backlog = run_backlog(
                    stack, gang_pods, args.workers, args.creators, args.timeout, captured,
                    repo=args.repo, gang=size, prefix="gbacklog", name_suffix="-gang-backlog",
                )  # fmt: skip
                checks += [f"gang backlog: {c}" for c in gangs.backlog.checks]
        targets = report(args, stack, raw, sched, backlog, captured, load, gangs, raw_like)
        if gangs is not None:
            print()
            gang_report(print, args, raw, sched, backlog, gangs)
        dump_times(stack.runtime / "logs" / "bench-pod-times.json", sched, backlog, gangs)
    except ReconcilerError as exc:
        say(f"failed: {exc}")
        return 1
    finally:
        say("stopping the local stack")
        stopped = stop_local_up(stack.runtime, stack.process, timeout=STACK_STOP_TIMEOUT)
        logging.getLogger().removeHandler(captured)
        captured.close()
        say(f"stopped {len(stopped)} components; logs stay in {stack.runtime}/logs")
    print()
    print(f"targets (p50 < {P50_TARGET:g} s; throughput >= {RATIO_TARGET:g} x raw slurmrestd):")
    for target in targets:
        print(f"  {target.label:<48}{target.value:>9}  {'MET' if target.met else 'MISSED'}")
    if checks:
        print("CHECKS FAILED: " + "; ".join(checks))
    missed = [t for t in targets if not t.met]
    print(f"wall time of the run: {time.perf_counter() - wall:.0f} s (stack up and down included)")
    if checks:
        return 1
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
