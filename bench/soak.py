"""Soak: `reconciler run` under steady churn, weeks compressed into minutes. Memory, threads,
fds, its git checkout, its status ConfigMap, its Events and its log rate must stay flat.

Not a test: run it by hand from the repo root and read the figures.

    python -m bench.soak                   # the full run: 5,000 Pods, 30 revisions (31 min)
    python -m bench.soak --pods 300 --wave 100 --revisions 3 --revision-interval 40 \\
        --restart-every 1                  # the quick check (2 min 30 s; say so when quoted)

On a local stack of its own (`reconciler local up` in a fresh runtime dir, stopped by its PIDs
in a finally), from bench/fixtures/scheduler-repo committed to a git repository of its own
(<runtime>/soak-origin.git), the daemon runs as users run it:

    reconciler run --git-url file://<runtime>/soak-origin.git --local --runtime-dir <dir>
                   --interval 10 --resync 120 ...

Meanwhile, all at once:

- waves of --wave Pods (schedulerName the daemon's), created, bound as Slurm allows, checked
  against Slurm, deleted (bench/daemon/waves.py, as bench.daemon_scale runs them), until --pods
  were bound; the waves are spread over the revisions' time (a wave waits for its turn);
- every --revision-interval seconds, a commit pushed that flips the partition line (MaxTime
  INFINITE <-> 30 days, so slurm.conf changes), waiting until the daemon's /metrics says that
  commit is applied; --revisions of them;
- before every --restart-every-th wave, slurmctld (SIGTERM by its PID: the stack's node agent
  starts it again, as kubelet restarts a container) or kube-apiserver (the stack does not
  restart it: stopped by its PID, started again 5 s later with the same arguments), in turn.

After each wave, once the daemon idled until the next wave's turn (at least 10 s), a row is
printed: Pods bound so far, VmRSS and threads (medians of the 1/s samples while idle), Python's
allocated blocks (the daemon's /metrics, reconciler_python_allocated_blocks), open fds
(/proc/PID/fd), the daemon's git checkout (du, .git included) beside the bare repo it fetches,
the status ConfigMap's data in bytes, the daemon's Events the API server holds, and the
daemon's stdout + stderr lines per minute since the row before.

At the end: the first wave beside the last (the baseline of the same run), then each figure's
least-squares slope over the second half of the waves and its verdict:

- VmRSS: < 0.2 MiB per 1,000 Pods bound;
- threads (2), open fds (4), checkout size minus the fetched repo's (64 KiB: the checkout may
  grow only as the history it mirrors does), status ConfigMap (256 B): "flat" means the fitted
  change across the second half and its largest value above the half's first are both within
  that band;
- Python's allocated blocks and log lines per minute: the fitted change within 25,000 blocks
  and a quarter of its mean (they swing with the work in flight; restarts and revisions land on
  some waves, so single waves may peak);
- Events: held until the API server's --event-ttl (1 h, kube-apiserver's default, which the
  local stack keeps), so their count grows in a shorter run; the bound is on the daemon: Events
  written per Pod in the second half no more than 10 % above the first half's.

Flags: --pods N (5000), --wave N (200, at most 512), --revisions N (30), --revision-interval S
(60), --restart-every N waves (5; 0: none), --creators N (8), --timeout S (600: a wave to bind).
The exit status is 1 when a check fails or a bound is missed. Logs stay in <runtime>/logs
(bench-daemon.log is the daemon's stderr, bench-soak-samples.json one sample a second).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

if __package__ in (None, ""):  # `python bench/soak.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.daemon.memory import Recorder
from bench.daemon.process import Daemon, OwnStack, own_stack, running_daemon
from bench.daemon.soak_churn import GitRemote, Revisions, make_remote, restart
from bench.daemon.soak_report import Row, Sampler, print_baseline, print_rows, reporters, verdicts
from bench.daemon.waves import CLUSTER_CPUS, NAMESPACE, daemon_restarts, progress, run_wave
from bench.harness.report import machine_line, say
from bench.harness.stack import stop_on_sigterm
from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.errors import ReconcilerError
from reconciler.local.stack import LocalStack
from reconciler.local.target_parts import scheduler_endpoints

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEDULER_REPO = os.path.join(ROOT, "bench", "fixtures", "scheduler-repo")
FIELD_MANAGER = "soak-bench"
RELEASE, STATUS_NAMESPACE = "bench", "slurm"  # the scheduler repo's reconciler.yaml
DAEMON_FLAGS = ("--interval", "10", "--resync", "120")
EVENT_TTL = "1 h (kube-apiserver's default --event-ttl)"
RESTARTS = ("slurmctld", "kube-apiserver")
SETTLE = 10.0  # seconds of 1/s samples, at least, after a wave: its row's VmRSS is their median


@dataclass
class Soak:
    args: argparse.Namespace
    stack: OwnStack
    local: LocalStack
    api: SlurmRestApi
    daemon: Daemon
    remote: GitRemote
    recorder: Recorder
    load: float
    rows: list[Row] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    restarts: int = 0


def soak(args: argparse.Namespace, load: float) -> bool:
    with own_stack(
        "sunk-reconciler-bench-soak-",
        lambda repo: shutil.copytree(SCHEDULER_REPO, repo),
        FIELD_MANAGER,
    ) as stack:
        stack.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        remote = make_remote(stack.repo, stack.runtime)
        local = LocalStack.open(stack.runtime)
        _, url, key, user = scheduler_endpoints(local)
        api = connect(url, MintedTokens(key, user))
        try:
            with running_daemon(
                stack.repo, stack.runtime, DAEMON_FLAGS, source=("--git-url", remote.url)
            ) as daemon:
                recorder = Recorder(daemon.pid, stack.runtime / "logs" / "bench-soak-samples.json")
                run = Soak(args, stack, local, api, daemon, remote, recorder, load)
                try:
                    revisions = churn(run)
                finally:
                    recorder.stop()
                return report(run, revisions)
        finally:
            api.close()


def churn(run: Soak) -> Revisions:
    """The waves, each in its turn, with a restart before every --restart-every-th; the
    revisions meanwhile in a thread of their own."""
    args, daemon, stack = run.args, run.daemon, run.stack
    lock = threading.Lock()
    revisions = Revisions(run.remote, daemon, args.revisions, args.revision_interval, lock)
    sampler = Sampler(
        daemon.pid, daemon.metrics, (daemon.out, daemon.log), stack.runtime / "daemon-work" / "git",
        run.remote.origin, stack.kube, STATUS_NAMESPACE, RELEASE,
        reporters(daemon.scheduler_name),
    )  # fmt: skip
    count = -(-args.pods // args.wave)
    planned = args.revisions * args.revision_interval
    started = time.monotonic()
    bound = 0
    revisions.start()
    try:
        for index in range(1, count + 1):
            if args.restart_every and index > 1 and (index - 1) % args.restart_every == 0:
                restart(RESTARTS[run.restarts % 2], run.local, run.api, lock)
                run.restarts += 1
            size = min(args.wave, args.pods - (index - 1) * args.wave)
            wave = run_wave(daemon, stack.kube, run.api, index, size, args.creators,
                            args.timeout)  # fmt: skip
            cleaned = time.monotonic()
            bound += wave.counted.get("bound", 0)
            say(progress(wave, count, bound))
            run.problems += [f"wave {index}: {p}" for p in wave.problems]
            # The daemon idles until the next wave's turn (the waves are spread over the
            # revisions' time), at least SETTLE s; the last wave waits for the revisions.
            turn = started + index * planned / count
            last = index == count
            idle(daemon, max(turn, cleaned + SETTLE), revisions.finished if last else None)
            quiet = [s for s in run.recorder.samples if s.at >= cleaned]
            minutes = (time.monotonic() - started) / 60
            row = sampler.row(index, bound, minutes, len(revisions.applied), run.restarts, quiet)
            run.rows.append(row)
            say(
                f"wave {index}: VmRSS {row.rss:.1f} MiB (median of {len(quiet)} samples while "
                f"idle), {row.threads} threads, {row.fds} fds, checkout "
                f"{row.checkout / 1024:.0f} KiB, status {row.status} B, {row.events} Events, "
                f"{row.log_rate:.1f} log lines/min, {row.revisions} revisions applied"
            )
            if wave.bound_seconds is None or wave.cleanup_seconds is None:
                say(f"stopping after wave {index}: it did not finish")
                break
        idle(daemon, 0.0, revisions.finished)
    finally:
        revisions.stop()
    daemon.alive()
    run.problems += [f"revision {sha} not applied in time" for sha in revisions.missed]
    return revisions


def idle(daemon: Daemon, until: float, done: Callable[[], bool] | None = None) -> None:
    """Until time.monotonic() reaches UNTIL and DONE() (when given) says so."""
    while time.monotonic() < until or (done is not None and not done()):
        daemon.alive()
        time.sleep(0.5)


def report(run: Soak, revisions: Revisions) -> bool:
    args, rows = run.args, run.rows
    agent = daemon_restarts(run.stack.runtime / "logs" / "bench-local-up.log")
    print(f"\n{machine_line(load=run.load)}; the machine was shared with other work")
    print(
        f"{args.pods} Pods in waves of {args.wave}, {args.revisions} revisions every "
        f"{args.revision_interval:g} s, a restart every {args.restart_every} waves "
        f"({run.restarts} done: slurmctld and kube-apiserver in turn); daemon flags "
        f"{' '.join(DAEMON_FLAGS)}\n"
    )
    if not rows:
        print("no wave finished")
        return False
    print_rows(rows)
    applied = revisions.applied
    if applied:
        print(
            f"\nrevisions: {len(applied)} applied of {args.revisions}, push to applied "
            f"median {sorted(applied)[len(applied) // 2]:.1f} s, max {max(applied):.1f} s"
        )
    peak = max((s.hwm for s in run.recorder.samples), default=0) / 2**20
    print(f"VmHWM (peak RSS): {peak:.1f} MiB; the node agent's restarts of exited Slurm "
          f"daemons: {len(agent)}")  # fmt: skip
    print_baseline(rows)
    ok = verdicts(rows, EVENT_TTL)
    for problem in run.problems:
        print(f"PROBLEM: {problem}")
    return ok and not run.problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak",
        description="`reconciler run` under steady churn on a local stack of its own: waves of "
        "Pods, config revisions, slurmctld and kube-apiserver restarts; its figures must stay "
        "flat.",
    )
    parser.add_argument("--pods", type=int, default=5000, help="Pods to bind in all (5000)")
    parser.add_argument("--wave", type=int, default=200, help="Pods at once (200)")
    parser.add_argument("--revisions", type=int, default=30, help="revisions pushed (30)")
    parser.add_argument("--revision-interval", type=float, default=60.0,
                        help="seconds between revisions (60)")  # fmt: skip
    parser.add_argument(
        "--restart-every",
        type=int,
        default=5,
        help="restart slurmctld or kube-apiserver every N waves (5; 0: none)",
    )
    parser.add_argument("--creators", type=int, default=8, help="threads creating Pods (8)")
    parser.add_argument("--timeout", type=float, default=600.0, help="for a wave to bind (600)")
    args = parser.parse_args(argv)
    if min(args.pods, args.wave, args.creators) < 1 or args.revisions < 0:
        parser.error("--pods, --wave and --creators must be at least 1, --revisions at least 0")
    if args.wave > CLUSTER_CPUS:
        parser.error(f"--wave: the cluster has {CLUSTER_CPUS} CPUs, one per Pod")
    if -(-args.pods // args.wave) < 4:
        parser.error("at least 4 waves are needed for a second half to fit a slope to")

    stop_on_sigterm()  # run the finally blocks: the daemon and the stack must stop
    wall = time.monotonic()
    try:
        ok = soak(args, os.getloadavg()[0])
    except ReconcilerError as exc:
        say(f"failed: {exc}")
        return 1
    print(f"\nwall time of the run: {time.monotonic() - wall:.0f} s (stack up and down included)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
