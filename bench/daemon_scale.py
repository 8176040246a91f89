"""The daemon at scale: `reconciler run` binding 10,000 Pods, and resyncing 1,000
StatefulSets.

Not a test: run it by hand from the repo root and read the figures.

    python -m bench.daemon_scale           # the full run (not yet timed: 30 to 45 min, estimated)
    python -m bench.daemon_scale --pods 300 --wave 100 --definitions 50 --resyncs 2 \\
        --resync-interval 20               # a quick check (about 2 min 15 s; say so when quoted)

Two parts, each on a local stack of its own (`reconciler local up --runtime-dir` a fresh temp
dir, stopped by its PIDs in a finally), with the daemon as users run it:

    reconciler run --source-dir <repo> --local --runtime-dir <dir>
                   --hooks-api-bind-address 127.0.0.1:0 --listen 127.0.0.1:<free port> ...

1. Bound Pods (bench/daemon/waves.py), from a copy of bench/fixtures/scheduler-repo (4 Slurm
   nodes x 128 CPUs): --pods Pods of the daemon's schedulerName with cpu and memory requests,
   so each becomes a placeholder Slurm job and is bound, in waves of at most --wave (each
   running job is a slurmstepd, a sh and a sleep on this machine, so 10,000 at once would not
   fit). A wave: create, wait until the daemon's counters say all bound, check each Pod against
   Slurm (one job each, RUNNING where its annotation says), delete, wait until the Pods are gone
   and no placeholder job holds resources. Printed: per wave binds/s, cleanup time, the daemon's
   CPU per Pod, its VmRSS, RssAnon and threads after the cleanup, and the jobs in Slurm's list;
   then totals (bound, refused, jobs submitted, cancelled), CPU per bound Pod, memory at the
   baseline, the peak and the end, VmRSS growth per 1,000 Pods, and Slurm's state at the end.
2. Resync (bench/daemon/resync.py): a repo of --definitions node definitions at 0 replicas
   made by the compile benchmark's generator. The daemon's first convergence applies them
   (that many StatefulSets, no Pods); then, with --resync --resync-interval, --resyncs re-plans
   of the applied revision are timed from its /metrics (duration and CPU of each), and one more
   is profiled in this process to show where the time goes.

Flags:
    --pods N             Pods to bind in all (default 10000)
    --wave N             Pods at once, at most 512: the cluster's CPUs (default 500)
    --creators N         threads creating and deleting Pods (default 8)
    --timeout S          for a wave to be bound (default 600)
    --definitions N      node definitions of part 2 (default 1000)
    --resyncs N          resyncs timed (default 3)
    --resync-interval S  the daemon's --resync in part 2 (default 60)
    --settle S           seconds of samples at part 1's baseline and end (default 10)
    --no-profile         skip part 2's profiled resync
    --only pods|resync   one part only

The exit status is 1 when a check fails (a Pod not bound, one refused, a Pod with two jobs, a
job left holding resources, a resync that changed something), otherwise 0. Logs stay in each
stack's <runtime>/logs (bench-daemon.log is the daemon's stderr).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

if __package__ in (None, ""):  # `python bench/daemon_scale.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.daemon.common import DAEMON_READY_TIMEOUT, ROOT
from bench.daemon.memory import Recorder, measure
from bench.daemon.process import own_stack, running_daemon
from bench.daemon.resync import (
    ResyncRun,
    first_convergence,
    measure_resyncs,
    profile_resync,
    write_repo,
)
from bench.daemon.scale_report import report_resyncs, report_waves
from bench.daemon.waves import (
    CLUSTER_CPUS,
    NAMESPACE,
    daemon_restarts,
    job_list_cost,
    run_waves,
    slurm_at_end,
)
from bench.harness.report import say
from bench.harness.stack import stop_on_sigterm
from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.errors import ReconcilerError
from reconciler.local.stack import LocalStack
from reconciler.local.target_parts import scheduler_endpoints

SCHEDULER_REPO = ROOT / "bench" / "fixtures" / "scheduler-repo"
FIELD_MANAGER = "daemon-scale-bench"
APPLY_SECONDS_PER_DEFINITION = 0.5  # the first convergence's allowance, on top of the usual


def bound_pods(args: argparse.Namespace, load: float) -> bool:
    with own_stack(
        "sunk-reconciler-bench-scale-",
        lambda repo: shutil.copytree(SCHEDULER_REPO, repo),
        FIELD_MANAGER,
    ) as stack:
        kube = stack.kube
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        _, url, key, user = scheduler_endpoints(LocalStack.open(stack.runtime))
        tokens = MintedTokens(key, user)
        api = connect(url, tokens)
        try:
            with running_daemon(stack.repo, stack.runtime) as daemon:
                recorder = Recorder(daemon.pid, stack.runtime / "logs" / "bench-scale-samples.json")
                try:
                    baseline = measure(daemon.pid, "baseline", "baseline", args.settle)
                    waves = run_waves(
                        daemon, kube, api, args.pods, args.wave, args.creators, args.timeout,
                        keep_going=lambda wave: wave.bound_seconds is not None
                        and wave.cleanup_seconds is not None,
                    )  # fmt: skip
                    restarts = daemon_restarts(stack.runtime / "logs" / "bench-local-up.log")
                    end = measure(daemon.pid, "end", "end: all waves deleted", args.settle)
                    slurm = slurm_at_end(api)
                    # Last: one whole list, to say what it costs (the waves read none).
                    cost = job_list_cost(api, url, tokens)
                    daemon.alive()
                finally:
                    recorder.stop()
                return report_waves(
                    daemon, waves, args, (baseline, end), slurm, cost, recorder, load, restarts
                )
        finally:
            api.close()


def resyncs(args: argparse.Namespace, load: float) -> bool:
    run = ResyncRun(args.definitions)
    with own_stack(
        "sunk-reconciler-bench-resync-", lambda repo: write_repo(repo, 0), FIELD_MANAGER
    ) as stack:
        repo = stack.runtime / "daemon-repo"
        write_repo(repo, args.definitions)
        say(f"the daemon applies {args.definitions} node definitions first")
        ready = DAEMON_READY_TIMEOUT + APPLY_SECONDS_PER_DEFINITION * args.definitions
        extra = ["--resync", f"{args.resync_interval:g}"]
        with running_daemon(repo, stack.runtime, extra, ready_timeout=ready) as daemon:
            recorder = Recorder(daemon.pid, stack.runtime / "logs" / "bench-resync-samples.json")
            try:
                first_convergence(daemon, stack.kube, run)
                measure_resyncs(daemon, run, args.resyncs, args.resync_interval)
                if args.profile:
                    say("one more resync, profiled in this process")
                    profile_resync(stack.runtime, repo, run)
                daemon.alive()
            finally:
                recorder.stop()
            return report_resyncs(daemon, run, args.resync_interval, recorder, load)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.daemon_scale",
        description="`reconciler run` at scale: Pods bound in waves, and resyncs of many "
        "StatefulSets, each on a local stack of its own.",
    )
    parser.add_argument("--pods", type=int, default=10000, help="Pods to bind (default 10000)")
    parser.add_argument(
        "--wave", type=int, default=500, help=f"Pods at once, at most {CLUSTER_CPUS} (500)"
    )
    parser.add_argument("--creators", type=int, default=8, help="threads creating Pods (8)")
    parser.add_argument("--timeout", type=float, default=600.0, help="for a wave to bind (600)")
    parser.add_argument("--definitions", type=int, default=1000, help="node definitions (1000)")
    parser.add_argument("--resyncs", type=int, default=3, help="resyncs timed (default 3)")
    parser.add_argument(
        "--resync-interval", type=float, default=60.0, help="the daemon's --resync (60)"
    )
    parser.add_argument("--settle", type=float, default=10.0, help="samples at each point (10)")
    parser.add_argument("--no-profile", dest="profile", action="store_false",
                        help="skip the profiled resync")  # fmt: skip
    parser.add_argument("--only", choices=("pods", "resync"), help="one part only")
    args = parser.parse_args(argv)
    if min(args.pods, args.wave, args.creators, args.definitions, args.resyncs) < 1:
        parser.error("--pods, --wave, --creators, --definitions and --resyncs must be at least 1")
    if args.wave > CLUSTER_CPUS:
        parser.error(f"--wave: the cluster has {CLUSTER_CPUS} CPUs, one per Pod")

    stop_on_sigterm()  # run the finally blocks: the daemons and stacks must stop
    wall = time.monotonic()
    ok = True
    try:
        if args.only in (None, "pods"):
            ok = bound_pods(args, os.getloadavg()[0]) and ok
        if args.only in (None, "resync"):
            ok = resyncs(args, os.getloadavg()[0]) and ok
    except ReconcilerError as exc:
        say(f"failed: {exc}")
        return 1
    print(f"\nwall time of the run: {time.monotonic() - wall:.0f} s (stacks up and down included)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
