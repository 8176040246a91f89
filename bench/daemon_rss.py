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
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/daemon_rss.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness.stack import start_local_up, stop_local_up, tail
from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.errors import ReconcilerError
from reconciler.local.ports import free_port
from reconciler.local.stack import LocalStack, new_temp_runtime_dir

ROOT = Path(__file__).resolve().parent.parent
REPO = ROOT / "fixtures" / "config-repo"
NAMESPACE = "inference"  # in the repo's scheduler.scope.namespaces, apart from the slurmd Pods
OTHER_SCHEDULER = "daemon-rss-bench-elsewhere"
LABEL = {"app.kubernetes.io/name": "daemon-rss-bench"}
STACK_UP_TIMEOUT = 240.0
STACK_STOP_TIMEOUT = 90.0
DAEMON_READY_TIMEOUT = 120.0
DAEMON_STOP_TIMEOUT = 60.0
WRITTEN_TIMEOUT = 600.0
QUIET_CPU = 0.03  # of one CPU: the daemon counts as quiescent below this
QUIET_WINDOW = 3.0
QUIET_TIMEOUT = 120.0
PROGRESS_EVERY = 1000
MIB = 1024 * 1024
# A warning or worse in the daemon's log, in its text or its JSON format.
WARNING = re.compile(
    r"\b(WARNING|ERROR|CRITICAL)\b|Traceback|\"level\": ?\"(warning|error|critical)"
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def say(text: str) -> None:
    """Progress on stderr; the figures go to stdout."""
    print(f"bench: {text}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- /proc


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic()
    rss: int  # bytes
    anon: int
    hwm: int
    threads: int
    cpu: float  # user + system seconds since the process started


def sample(pid: int) -> Sample:
    fields: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()

    def kib(key: str) -> int:
        return int(fields.get(key, "0 kB").split()[0]) * 1024

    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / CLOCK_TICKS  # utime, stime (fields 14, 15)
    return Sample(
        time.monotonic(),
        kib("VmRSS"),
        kib("RssAnon"),
        kib("VmHWM"),
        int(fields.get("Threads", "0")),
        cpu,
    )


@dataclass(frozen=True)
class Point:
    key: str  # baseline, other, ours, deleted
    label: str
    samples: tuple[Sample, ...]

    @property
    def rss(self) -> float:
        return statistics.median(s.rss for s in self.samples)

    @property
    def anon(self) -> float:
        return statistics.median(s.anon for s in self.samples)

    @property
    def hwm(self) -> int:
        return self.samples[-1].hwm

    @property
    def threads(self) -> int:
        return self.samples[-1].threads

    @property
    def cpu(self) -> float:
        return self.samples[-1].cpu


class Recorder:
    """One sample of the daemon a second, all run long, for the peak and the trajectory."""

    def __init__(self, pid: int, path: Path) -> None:
        self.pid = pid
        self.samples: list[Sample] = []
        self._path = path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-rss", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            with contextlib.suppress(OSError, ValueError):
                self.samples.append(sample(self.pid))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        t0 = self.samples[0].at if self.samples else 0.0
        rows = [
            {
                "t": round(s.at - t0, 1),
                "rss": s.rss,
                "anon": s.anon,
                "hwm": s.hwm,
                "threads": s.threads,
                "cpu": s.cpu,
            }
            for s in self.samples
        ]
        self._path.write_text(json.dumps(rows))


def quiesce(pid: int) -> float | None:
    """Wait until the daemon uses under QUIET_CPU of a CPU over QUIET_WINDOW; seconds waited
    (None: it never got quiet within QUIET_TIMEOUT, the samples are taken anyway)."""
    started = time.monotonic()
    while time.monotonic() - started < QUIET_TIMEOUT:
        before = sample(pid)
        time.sleep(QUIET_WINDOW)
        after = sample(pid)
        if (after.cpu - before.cpu) / (after.at - before.at) < QUIET_CPU:
            return time.monotonic() - started
    return None


def measure(pid: int, key: str, label: str, seconds: float) -> Point:
    waited = quiesce(pid)
    note = f"quiet after {waited:.0f} s" if waited is not None else "NEVER QUIET"
    samples = [sample(pid)]
    while samples[-1].at - samples[0].at < seconds - 0.5:
        time.sleep(1.0)
        samples.append(sample(pid))
    point = Point(key, label, tuple(samples))
    say(
        f"{label}: VmRSS {point.rss / MIB:.1f} MiB, VmHWM {point.hwm / MIB:.1f} MiB ({note}, "
        f"{len(samples)} samples)"
    )
    return point


# --------------------------------------------------------------------------- the local stack


def start_stack(repo: Path, runtime: Path) -> subprocess.Popen[str]:
    """`reconciler local up REPO --runtime-dir RUNTIME` in the background, until ready."""
    return start_local_up(
        repo,
        runtime,
        ["--runtime-dir", str(runtime)],
        runtime / "logs" / "bench-local-up.log",
        timeout=STACK_UP_TIMEOUT,
        stop_timeout=STACK_STOP_TIMEOUT,
    )


# --------------------------------------------------------------------------- the daemon


@dataclass
class Daemon:
    process: subprocess.Popen[bytes]
    port: int
    out: Path
    log: Path
    scheduler_name: str = ""
    seconds_to_ready: float = 0.0

    @property
    def pid(self) -> int:
        return self.process.pid

    def get(self, path: str) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as error:
            return 0, str(error)

    def metrics(self) -> dict[str, float]:
        """name{labels} -> value, from the Prometheus text of /metrics."""
        status, text = self.get("/metrics")
        if status != 200:
            raise SystemExit(f"the daemon's /metrics answered {status}: {text[:200]}")
        values: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values

    def refused(self) -> int:
        return int(self.metrics().get("reconciler_scheduler_refused_total", 0))

    def alive(self) -> None:
        if self.process.poll() is not None:
            raise SystemExit(f"the daemon exited ({self.process.returncode}):\n{tail(self.log)}")


def start_daemon(repo: Path, runtime: Path) -> Daemon:
    port = free_port()
    logs = runtime / "logs"
    out, log = logs / "bench-daemon.out", logs / "bench-daemon.log"
    started = time.monotonic()
    with out.open("wb") as stdout, log.open("wb") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reconciler",
                "run",
                "--source-dir",
                str(repo),
                "--local",
                "--runtime-dir",
                str(runtime),
                "--workdir",
                str(runtime / "daemon-work"),
                "--hooks-api-bind-address",
                "127.0.0.1:0",
                "--listen",
                f"127.0.0.1:{port}",
            ],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # Ctrl-C reaches the benchmark, which stops the daemon
        )
    daemon = Daemon(process, port, out, log)
    try:
        deadline = started + DAEMON_READY_TIMEOUT
        while True:
            daemon.alive()
            said = out.read_text(errors="replace") + log.read_text(errors="replace")
            found = re.search(r"scheduling Pods as ([\w.-]+)", said)
            if found and daemon.get("/readyz")[0] == 200:
                daemon.scheduler_name = found.group(1)
                break
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"the daemon was not ready after {DAEMON_READY_TIMEOUT:.0f} s:\n{tail(log)}"
                )
            time.sleep(0.2)
        daemon.seconds_to_ready = time.monotonic() - started
        converged = {
            k: v for k, v in daemon.metrics().items() if k.startswith("reconciler_reconciles_total")
        }
        if not any(('"applied"' in k or '"unchanged"' in k) and v for k, v in converged.items()):
            raise SystemExit(
                f"the daemon's first revision did not converge: {converged}\n" + tail(log)
            )
    except BaseException:
        stop_daemon(daemon)
        raise
    return daemon


def stop_daemon(daemon: Daemon) -> int | None:
    """SIGTERM by its PID (it finishes what it does, then exits); SIGKILL after a while."""
    if daemon.process.poll() is None:
        daemon.process.terminate()
        try:
            daemon.process.wait(timeout=DAEMON_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            say(f"the daemon did not stop within {DAEMON_STOP_TIMEOUT:.0f} s of SIGTERM; killing")
            daemon.process.kill()
    return daemon.process.wait()


# --------------------------------------------------------------------------- Pods


def pod_body(name: str, scheduler_name: str) -> dict[str, Any]:
    """No CPU or memory request: admission refuses it before any Slurm call."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(LABEL)},
        "spec": {
            "schedulerName": scheduler_name,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "infinity"]}],
        },
    }


def create_pods(
    kube: Kube,
    prefix: str,
    count: int,
    scheduler_name: str,
    creators: int,
    progress: Callable[[int, float], str],
) -> tuple[list[str], float, float]:
    """Create PREFIX-NNNNN with `creators` threads; (names, first send, seconds)."""
    names = [f"{prefix}-{i:05d}" for i in range(count)]
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"

    def create(name: str) -> None:
        kube.request_json(
            "POST", path, body=pod_body(name, scheduler_name), target=f"Pod {NAMESPACE}/{name}"
        )

    started = time.monotonic()
    with ThreadPoolExecutor(creators, thread_name_prefix="bench-create") as pool:
        for done, _ in enumerate(pool.map(create, names), 1):
            if done % PROGRESS_EVERY == 0 or done == count:
                say(progress(done, time.monotonic() - started))
    return names, started, time.monotonic() - started


def delete_pods(kube: Kube, names: list[str], creators: int) -> float:
    started = time.monotonic()
    with ThreadPoolExecutor(creators, thread_name_prefix="bench-delete") as pool:
        for done, _ in enumerate(
            pool.map(lambda n: kube.delete("v1", "Pod", n, NAMESPACE), names), 1
        ):
            if done % PROGRESS_EVERY == 0 or done == len(names):
                say(f"deleted {done}/{len(names)} in {time.monotonic() - started:.1f} s")
    return time.monotonic() - started


@dataclass(frozen=True)
class Written:
    pods: int
    annotated: int
    condition: int
    events: int
    json_bytes: float  # mean size of one such Pod as the API server lists it (compact JSON)


def written(kube: Kube, scheduler_name: str) -> Written:
    pods = kube.list(
        "v1", "Pod", NAMESPACE, field_selector=f"spec.schedulerName={scheduler_name}"
    ).items
    annotated = sum(
        1
        for p in pods
        if wk.ANNOTATION_REJECTED in ((p.get("metadata") or {}).get("annotations") or {})
    )
    condition = sum(
        1
        for p in pods
        if any(
            c.get("type") == "PodScheduled" and c.get("status") == "False"
            for c in (p.get("status") or {}).get("conditions") or ()
        )
    )
    uids = {p["metadata"]["uid"] for p in pods}
    listed = kube.list("v1", "Event", NAMESPACE, field_selector=f"reason={wk.EVENT_REJECTED}")
    events = [e for e in listed.items if (e.get("involvedObject") or {}).get("uid") in uids]
    size = statistics.mean(len(json.dumps(p, separators=(",", ":"))) for p in pods) if pods else 0
    return Written(len(pods), annotated, condition, len(events), size)


# --------------------------------------------------------------------------- the run


@dataclass
class Ours:
    count: int
    create_seconds: float
    refused_at: float | None  # from the first create: the counter counts them all
    lag: float | None  # from the last create returned to the same
    written_at: float | None  # from the first create: annotations, conditions, Events all there
    written: Written | None
    cpu_seconds: float  # the daemon's, first create -> everything written
    refused_total: int
    delete_seconds: float | None = None


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
    out(f"  {'point':<46}{'VmRSS':>10}{'RssAnon':>10}{'VmHWM':>10}{'threads':>9}{'CPU s':>8}")
    for p in points:
        out(
            f"  {p.label:<46}{p.rss / MIB:>6.1f} MiB{p.anon / MIB:>6.1f} MiB"
            f"{p.hwm / MIB:>6.1f} MiB{p.threads:>9}{p.cpu:>8.1f}"
        )
    peak = max(recorder.samples, key=lambda s: s.rss, default=None)
    if peak is not None:
        out(
            f"  highest VmRSS sampled during the run (1/s): {peak.rss / MIB:.1f} MiB (the peak to "
            "quote: the kernel updates VmHWM lazily, it can read below an earlier VmRSS)"
        )
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

    def terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # run the finally blocks: the daemon and stack must stop

    signal.signal(signal.SIGTERM, terminate)
    wall = time.monotonic()
    load = os.getloadavg()[0]
    runtime = new_temp_runtime_dir("sunk-reconciler-bench-rss-")
    repo = runtime / "config-repo"
    shutil.copytree(REPO, repo)
    say(f"starting a local stack in {runtime} from a copy of {REPO.relative_to(ROOT)}")
    stack = start_stack(repo, runtime)
    daemon: Daemon | None = None
    kube: Kube | None = None
    recorder: Recorder | None = None
    try:
        kube = Kube.from_kubeconfig(
            LocalStack.open(runtime).kube_paths.kubeconfig, field_manager="daemon-rss-bench"
        )
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        say("stack ready; starting `reconciler run`")
        daemon = start_daemon(repo, runtime)
        say(
            f"daemon ready in {daemon.seconds_to_ready:.1f} s (pid {daemon.pid}, port "
            f"{daemon.port}, scheduling as {daemon.scheduler_name})"
        )
        recorder = Recorder(daemon.pid, runtime / "logs" / "bench-rss-samples.json")
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
    except ReconcilerError as exc:
        say(f"failed: {exc}")
        return 1
    finally:
        if recorder is not None:
            with contextlib.suppress(Exception):
                recorder.stop()
        if daemon is not None:
            say("stopping the daemon")
            code = stop_daemon(daemon)
            say(f"the daemon exited {code}")
        if kube is not None:
            kube.close()
        say("stopping the local stack")
        stopped = stop_local_up(runtime, stack, timeout=STACK_STOP_TIMEOUT)
        say(f"stopped {len(stopped)} components; logs stay in {runtime}/logs")
    print(f"wall time of the run: {time.monotonic() - wall:.0f} s (stack up and down included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
