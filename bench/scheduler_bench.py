"""Scheduler benchmark: Pods bound through Slurm by the Pod scheduler, against raw slurmrestd.

Not a test: run it by hand from the repo root and read the figures.

    python -m bench.scheduler_bench              # or: python bench/scheduler_bench.py
    python -m bench.scheduler_bench --pods 100   # a smaller batch (say so when you quote it)

One run, side by side, on a local stack of its own (`reconciler local up`, name bench-sched,
from bench/fixtures/scheduler-repo: 4 Slurm nodes of 128 CPUs and 512Gi):

1. raw slurmrestd: --pods plain batch jobs (`sleep 600`, 1 CPU, 100 MB) submitted through
   reconciler.adapters.slurm_rest by --workers concurrent submitters: submits/s, and jobs
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
import contextlib
import itertools
import json
import logging
import math
import multiprocessing
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import hostlist
import urllib3

if __package__ in (None, ""):  # `python bench/scheduler_bench.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness.stack import start_local_up, stop_local_up
from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm_client import connect
from reconciler.adapters.slurm_jwt import MintedTokens
from reconciler.adapters.slurm_rest import JobSpec, SlurmRestApi
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import load_config
from reconciler.errors import ReconcilerError
from reconciler.local.stack import STATE_FILE, LocalStack, default_runtime_dir
from reconciler.local.target import scheduler_endpoints
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.decide import ACTIVE_STATES
from reconciler.scheduler.gang import gang_key
from reconciler.scheduler.hooks import HookCall
from reconciler.scheduler.loop import Counters, PodScheduler
from reconciler.scheduler.placeholder import JOB_PATH, pod_uid_of
from reconciler.scheduler.settings import (
    DEFAULT_WORKERS,
    SchedulerSettings,
    settings_from_values,
)

ROOT = Path(__file__).resolve().parent.parent
REPO = ROOT / "bench" / "fixtures" / "scheduler-repo"
# With gangs: as many CPUs on 16 nodes, so a gang of 8 gets 8 distinct nodes (one per member).
GANG_REPO = ROOT / "bench" / "fixtures" / "scheduler-gang-repo"
CLUSTERS = {REPO: "4 Slurm nodes x 128 CPUs / 512Gi", GANG_REPO: "16 Slurm nodes x 32 CPUs / 128Gi"}
GANG_SIZE = 8
STACK_NAME = "bench-sched"
POD_NAMESPACE = "bench"  # the repo's scheduler.scope.namespaces
RAW_SCRIPT = "#!/bin/sh\nsleep 600\n"
CPU, MEMORY = "100m", "100Mi"  # admission rounds these up to 1 CPU and 100 MB
RAW_CPUS, RAW_MEMORY_MB = 1, 100  # ... which is what the raw jobs ask for
GRACE_SECONDS = 5
STACK_UP_TIMEOUT = 240.0
STACK_STOP_TIMEOUT = 90.0
SETTLE_TIMEOUT = 180.0  # cancelled jobs gone, deleted Pods gone
P50_TARGET = 1.0
RATIO_TARGET = 0.8
MIB = 1024 * 1024

# Jobs in these states still hold (or wait for) resources; COMPLETING is Slurm ending one.
HOLDING = ACTIVE_STATES | {"COMPLETING"}


def say(text: str) -> None:
    """Progress on stderr; the figures go to stdout."""
    print(f"bench: {text}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the local stack


@dataclass
class Stack:
    """A `reconciler local up` process of our own, and how to reach what it runs."""

    name: str
    runtime: Path
    process: subprocess.Popen[str]
    log: Path
    seconds_to_ready: float
    kubeconfig: Path
    rest_url: str
    jwt_key: Path
    user: str


def start_stack(name: str, repo: Path) -> Stack:
    """`reconciler local up REPO --name NAME` in the background, until it says it is ready.

    Its own process (as a user runs it): the node agent that plays kubelet and the daemons'
    reaper live there, not in the process whose scheduler is being measured.
    """
    runtime = default_runtime_dir(name)
    if (runtime / STATE_FILE).exists():
        old = LocalStack.open(runtime)
        running = [c.name for c in old.status() if c.running]
        if old.foreground_pid() is not None or running:
            raise SystemExit(
                f"a local stack named {name!r} is already running in {runtime} "
                f"({', '.join(running) or 'its up process'}); stop it with "
                f"`reconciler local down --name {name}`"
            )
    log = runtime / "logs" / "bench-local-up.log"
    started = time.monotonic()
    process = start_local_up(
        repo,
        runtime,
        ["--name", name],
        log,
        timeout=STACK_UP_TIMEOUT,
        stop_timeout=STACK_STOP_TIMEOUT,
    )
    stack = LocalStack.open(runtime)
    kubeconfig, url, key, user = scheduler_endpoints(stack)
    return Stack(
        name, runtime, process, log, time.monotonic() - started, kubeconfig, url, key, user
    )


# --------------------------------------------------------------------------- measuring helpers


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def spread(values: list[float]) -> tuple[float, float, float, float]:
    return percentile(values, 50), percentile(values, 90), percentile(values, 99), max(values)


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass
class JobMemory:
    stepds: int
    processes: int
    pss: int  # bytes, proportional set size of every process of the jobs

    def text(self, jobs: int) -> str:
        if not self.stepds:
            return "job processes not found (no slurmstepd under the stack's reaper)"
        per = self.pss / max(jobs, 1) / MIB
        return (
            f"{self.stepds} slurmstepd, {self.processes} job processes in all, PSS "
            f"{self.pss / 2**30:.2f} GiB ({per:.1f} MiB per job)"
        )


def job_memory(reaper: int, *, pss: bool = True) -> JobMemory:
    """slurmstepd processes whose parent is the stack's `up` process (slurmd double-forks them
    and the `up` process is the subreaper), with everything below them; PSS from smaps_rollup."""
    parent: dict[int, int] = {}
    comm: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        pid = int(entry.name)
        comm[pid] = stat[stat.index("(") + 1 : stat.rindex(")")]
        parent[pid] = int(stat.rsplit(")", 1)[1].split()[1])
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    roots = [p for p, pp in parent.items() if pp == reaper and comm[p] == "slurmstepd"]
    members, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        members.append(pid)
        todo.extend(children.get(pid, ()))
    total = 0
    for pid in members if pss else ():
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
    return JobMemory(len(roots), len(members), total)


def wait_until(probe: Callable[[], bool], timeout: float, poll: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True


class LogCapture(logging.Handler):
    """What is logged in this process: WARNING or worse from anyone (the scheduler, urllib3 ...),
    and the scheduler's INFO lines (what it cancelled and why). All go to a file as well."""

    def __init__(self, path: Path) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []
        self._file = path.open("w")
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self._file.write(self.format(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
        super().close()


# --------------------------------------------------------------------------- 1. raw slurmrestd


@dataclass
class RawResult:
    count: int
    submit_seconds: float
    per_submit: list[float]
    all_running_after: float | None
    processes_after: float | None  # every job's slurmstepd, sh and sleep exist
    memory: JobMemory | None
    mem_drop: int
    cancel_seconds: float
    settled_after: float | None

    @property
    def rate(self) -> float:
        return self.count / self.submit_seconds

    @property
    def running_rate(self) -> float | None:
        """Jobs RUNNING per second: count / (first submit -> all RUNNING). A bound Pod needs
        its job started, so this is the raw figure for a whole Pod."""
        return self.count / self.all_running_after if self.all_running_after else None


def raw_spec(index: int, nodes: int = 1) -> JobSpec:
    return JobSpec(
        script=RAW_SCRIPT,
        environment={"PATH": JOB_PATH},
        name=f"bench-raw-{index:04d}" if nodes == 1 else f"bench-raw{nodes}n-{index:04d}",
        nodes=nodes,
        tasks=nodes,
        cpus_per_task=RAW_CPUS,
        memory_per_node=RAW_MEMORY_MB,
        standard_output="/dev/null",
        current_working_directory="/",
    )


def run_raw(stack: Stack, count: int, submitters: int, nodes: int = 1) -> RawResult:
    """COUNT jobs of NODES nodes (one task, 1 CPU, per node; the script runs on the first)."""
    api = connect(stack.rest_url, MintedTokens(stack.jwt_key, stack.user))
    specs = [raw_spec(i, nodes) for i in range(count)]
    before = mem_available()
    try:
        api.ping()
        per_submit: list[float] = []

        def submit(spec: JobSpec) -> int:
            t0 = time.perf_counter()
            job_id = api.submit(spec).job_id
            per_submit.append(time.perf_counter() - t0)
            return job_id

        say(f"raw: submitting {count} jobs of {nodes} nodes with {submitters} submitters")
        started = time.perf_counter()
        with ThreadPoolExecutor(submitters, thread_name_prefix="bench-raw") as pool:
            ids = list(pool.map(submit, specs))
        submit_seconds = time.perf_counter() - started
        wanted = set(ids)

        def states() -> Counter[str]:
            return Counter(j.state for j in api.jobs().items if j.job_id in wanted)

        running = wait_until(lambda: states()["RUNNING"] == count, timeout=SETTLE_TIMEOUT)
        all_running = time.perf_counter() - started if running else None
        if not running:
            say(f"raw: not all running after {SETTLE_TIMEOUT:.0f} s: {dict(states())}")
        # RUNNING is slurmctld's word; the processes (slurmstepd, sh, sleep) come after it.
        reaper = stack.process.pid
        up = wait_until(
            lambda: job_memory(reaper, pss=False).processes >= 3 * count, SETTLE_TIMEOUT, 0.5
        )
        processes_after = time.perf_counter() - started if up else None
        memory = job_memory(reaper)
        mem_drop = before - mem_available()

        say(f"raw: cancelling {count} jobs")
        started = time.perf_counter()
        with ThreadPoolExecutor(submitters, thread_name_prefix="bench-raw") as pool:
            list(pool.map(api.cancel, ids))
        cancel_seconds = time.perf_counter() - started

        def settled() -> bool:
            holding = sum(n for s, n in states().items() if s in HOLDING)
            return holding == 0 and all(n.alloc_cpus == 0 for n in api.nodes().items)

        done = wait_until(settled, timeout=SETTLE_TIMEOUT)
        settled_after = time.perf_counter() - started if done else None
        if not done:
            raise SystemExit(f"raw jobs still hold resources {SETTLE_TIMEOUT:.0f} s after cancel")
    finally:
        api.close()
    return RawResult(count, submit_seconds, per_submit, all_running, processes_after, memory,
                     mem_drop, cancel_seconds, settled_after)  # fmt: skip


# --------------------------------------------------------------------------- 2. the scheduler


@dataclass
class PodTimes:
    name: str
    sent: float = 0.0  # our clock, create request sent
    created: float = 0.0  # our clock, create request returned (the Pod exists)
    created_stamp: float = 0.0  # metadata.creationTimestamp (whole seconds)
    uid: str = ""
    bound: float | None = None  # our clock, first watch event with spec.nodeName
    node: str = ""
    slurm_node: str = ""
    job_id: str = ""
    delete_sent: float = 0.0  # our clock, cleanup's delete request sent
    gone: float | None = None  # our clock, DELETED seen
    group: str = ""  # its gang's pod group ("" for a single Pod)


class FastPodWatch:
    """The load generator's watch of the benchmark's namespace: when each Pod is first seen
    bound, and deletions, with the number and size of the events.

    Not KubeWatch, so that the measuring does not depend on the code being measured (before
    2b4daa1 KubeWatch read its stream one byte per call, milliseconds of CPU per event) and can
    count the bytes. Chunks are split into lines here (about 0.03 ms an event).
    """

    def __init__(self, kube: Kube, namespace: str, pods: dict[str, PodTimes]) -> None:
        self._kube = kube
        self._namespace = namespace
        self._path = f"/api/v1/namespaces/{namespace}/pods"
        self._pods = pods
        self.bound = 0
        self.deleted = 0
        self.events = 0  # events about the benchmark's Pods
        self.event_bytes = 0
        self.changed = threading.Condition()
        self._stopped = False
        self._version = kube.list("v1", "Pod", namespace).resource_version
        self._thread = threading.Thread(target=self._run, name="bench-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped:
            query = [
                ("watch", "true"),
                ("allowWatchBookmarks", "true"),
                ("resourceVersion", self._version),
                ("timeoutSeconds", "900"),
            ]
            try:
                stream = self._kube.open_stream(self._path, query, 930.0)
            except ReconcilerError as exc:
                say(f"watch failed, retrying: {exc}")
                time.sleep(0.5)
                continue
            buffer = b""
            try:
                for chunk in stream.stream(amt=None, decode_content=False):
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            self._line(line)
                    if self._stopped:
                        return
            except (urllib3.exceptions.ProtocolError, urllib3.exceptions.ReadTimeoutError):
                pass  # reconnect from the last resourceVersion
            finally:
                stream.release_conn()

    def _line(self, line: bytes) -> None:
        event = json.loads(line)
        kind, pod = event.get("type"), event.get("object") or {}
        meta = pod.get("metadata") or {}
        if kind == "ERROR":  # 410: our version is too old; list again and go on from there
            listing = self._kube.list("v1", "Pod", self._namespace)
            self._version = listing.resource_version
            for item in listing.items:
                self._record("MODIFIED", item, time.time(), 0)
            return
        self._version = meta.get("resourceVersion") or self._version
        if kind != "BOOKMARK":
            self._record(kind, pod, time.time(), len(line))

    def _record(self, kind: str, pod: dict[str, Any], now: float, size: int) -> None:
        meta = pod["metadata"]
        times = self._pods.get(meta["name"])
        if times is None:
            return
        with self.changed:
            self.events += 1
            self.event_bytes += size
            times.uid = times.uid or meta["uid"]
            if kind == "DELETED":
                self.deleted += 1
                times.gone = now
            elif times.bound is None and (pod.get("spec") or {}).get("nodeName"):
                annotations = meta.get("annotations") or {}
                times.bound = now
                times.node = pod["spec"]["nodeName"]
                times.slurm_node = annotations.get(wk.ANNOTATION_SLURM_NODE, "")
                times.job_id = annotations.get(wk.ANNOTATION_JOB_ID, "")
                times.uid = meta["uid"]
                times.created_stamp = _epoch(meta["creationTimestamp"])
                self.bound += 1
            self.changed.notify_all()

    def wait_for(self, what: Callable[[], bool], timeout: float, progress: str) -> bool:
        deadline = time.monotonic() + timeout
        next_note = time.monotonic() + 5.0
        with self.changed:
            while not what():
                now = time.monotonic()
                if now > deadline:
                    return False
                if now > next_note:
                    say(progress.format(bound=self.bound, deleted=self.deleted))
                    next_note = now + 5.0
                self.changed.wait(min(1.0, deadline - now))
        return True

    def stop(self) -> None:
        self._stopped = True


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def pod_body(name: str, scheduler_name: str, group: str = "", gang: int = 0) -> dict[str, Any]:
    """A Pod; with GROUP, a member of that gang of GANG Pods (our annotations, no PodGroup)."""
    annotations = (
        {wk.ANNOTATION_POD_GROUP: group, wk.ANNOTATION_POD_GROUP_MIN_MEMBER: str(gang)}
        if group
        else {}
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": POD_NAMESPACE, "annotations": annotations,
                     "labels": {"app.kubernetes.io/name": "scheduler-bench"}},
        "spec": {
            "schedulerName": scheduler_name,
            "terminationGracePeriodSeconds": GRACE_SECONDS,
            "containers": [{
                "name": "main", "image": "busybox", "command": ["sleep", "infinity"],
                "resources": {"requests": {"cpu": CPU, "memory": MEMORY}},
            }],
        },
    }  # fmt: skip


def load_generator(
    conn: Connection, kubeconfig: str, scheduler_name: str, prefix: str, count: int,
    creators: int, rate: float | None, timeout: float, gang: int = 0,
) -> None:  # fmt: skip
    """The child process that creates the Pods (PREFIX-NNNN; as fast as it can, or RATE a
    second), watches them and deletes them, so none of that costs the scheduler's process CPU
    or GIL time. With GANG, Pods N*GANG .. N*GANG+GANG-1 are gang PREFIX-gNNN (created in that
    order). Talks to the parent over `conn`:
    -> ready, <- create, -> created, -> bound, <- delete, -> deleted (or -> error)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    kube = Kube.from_kubeconfig(Path(kubeconfig), field_manager="scheduler-bench")
    pods = {
        f"{prefix}-{i:04d}": PodTimes(f"{prefix}-{i:04d}",
                                      group=f"{prefix}-g{i // gang:03d}" if gang else "")
        for i in range(count)
    }  # fmt: skip
    order = list(pods.values())
    watch: FastPodWatch | None = None
    try:
        watch = FastPodWatch(kube, POD_NAMESPACE, pods)
        conn.send(("ready", None))
        if conn.recv() != "create":
            return

        def create(times: PodTimes) -> None:
            body = pod_body(times.name, scheduler_name, times.group, gang)
            times.sent = time.time()
            kube.request_json("POST", f"/api/v1/namespaces/{POD_NAMESPACE}/pods", body=body,
                              target=f"Pod {POD_NAMESPACE}/{times.name}")  # fmt: skip
            times.created = time.time()

        t0 = time.perf_counter()

        def create_nth(index: int) -> None:
            if rate:  # paced: the Nth create leaves at t0 + N / rate
                delay = t0 + index / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            create(order[index])

        with ThreadPoolExecutor(creators, thread_name_prefix="bench-create") as pool:
            list(pool.map(create_nth, range(count)))
        w = watch
        with w.changed:
            bound_so_far = w.bound
        conn.send(("created", (time.perf_counter() - t0, bound_so_far)))
        w.wait_for(lambda: w.bound == count, timeout, "bound {bound}/" + str(count))
        with w.changed:
            pod_times = [asdict(p) for p in pods.values()]
            conn.send(("bound", (pod_times, w.events, w.event_bytes, w.deleted)))
        if conn.recv() != "delete":
            return
        t0 = time.perf_counter()

        def delete(times: PodTimes) -> None:
            times.delete_sent = time.time()
            kube.delete("v1", "Pod", times.name, POD_NAMESPACE)

        with ThreadPoolExecutor(creators, thread_name_prefix="bench-delete") as pool:
            list(pool.map(delete, pods.values()))
        gone = w.wait_for(lambda: w.deleted == count, SETTLE_TIMEOUT,
                          "Pods deleted {deleted}/" + str(count))  # fmt: skip
        with w.changed:
            pod_times = [asdict(p) for p in pods.values()]
        conn.send(("deleted", (time.perf_counter() - t0 if gone else None, pod_times)))
    except EOFError:
        return  # the parent went away
    except Exception as exc:
        with contextlib.suppress(OSError):
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        if watch is not None:
            watch.stop()
        kube.close()


class LoadGenerator:
    """The parent's side of load_generator (a spawned process: never fork a process whose
    scheduler threads hold locks)."""

    def __init__(self, kubeconfig: Path, scheduler_name: str, prefix: str, count: int,
                 creators: int, timeout: float, rate: float | None = None,
                 gang: int = 0) -> None:  # fmt: skip
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self.process = context.Process(
            target=load_generator,
            args=(
                child,
                str(kubeconfig),
                scheduler_name,
                prefix,
                count,
                creators,
                rate,
                timeout,
                gang,
            ),
            name=f"bench-load-{prefix}",
            daemon=True,
        )
        self.process.start()
        child.close()

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid

    def send(self, message: str) -> None:
        self._conn.send(message)

    def expect(self, kind: str, timeout: float) -> Any:
        if not self._conn.poll(timeout):
            raise SystemExit(f"the load generator sent no {kind!r} within {timeout:.0f} s")
        got, value = self._conn.recv()
        if got == "error":
            raise SystemExit(f"the load generator failed: {value}")
        if got != kind:
            raise SystemExit(f"the load generator sent {got!r}, expected {kind!r}")
        return value

    def stop(self) -> None:
        self._conn.close()
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.terminate()  # our own child, by its PID
            self.process.join(timeout=10)


@dataclass
class Instrument:
    """Times recorded by thin wrappers around the scheduler (they only record, then call on):
    when its watch first delivered each Pod, when its submit left and returned, when the job's
    `started` hook arrived (and whether the scheduler had recorded the job's submit by then; if
    not, only the poll can bind the Pod), when its bind returned, and what its Slurm poll
    returned for jobs whose `started` hook came after the poll was sent."""

    seen: dict[str, float] = field(default_factory=dict)  # Pod uid -> time
    gone_seen: dict[str, float] = field(default_factory=dict)  # DELETED delivered
    submit_sent: dict[str, float] = field(default_factory=dict)
    submitted: dict[str, float] = field(default_factory=dict)
    started_hook: dict[str, float] = field(default_factory=dict)
    bind_sent: dict[str, float] = field(default_factory=dict)
    bind_returned: dict[str, float] = field(default_factory=dict)
    early_hooks: set[str] = field(default_factory=set)
    # Pod uid -> (poll sent, poll returned): a poll of the scheduler's that left before the
    # job's `started` hook came back with the job PENDING (Slurm's answer predates the hook).
    stale_pending: dict[str, tuple[float, float]] = field(default_factory=dict)
    # Pod uid -> the job's state in the scheduler right after that poll was processed: RUNNING
    # if it kept what the hook said, PENDING if it stored the poll's answer over it.
    stale_after: dict[str, str] = field(default_factory=dict)
    hook_answers: Counter[str] = field(default_factory=Counter)  # "started ok", "signalled wait"
    hook_errors: Counter[str] = field(default_factory=Counter)  # exception name -> requests
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Set while the scheduler's poll runs on this thread: the uids flagged by its jobs() call.
    _polling: threading.local = field(default_factory=threading.local)

    def attach(self, scheduler: PodScheduler, clients: SlurmClients, kube: Kube) -> None:
        # start() hands `self._on_pod` and `self.on_hook` to the watch and the hooks server,
        # start() and the poll thread call `self._poll_jobs()`, and the steps call
        # `self._slurm.operator.submit`/`.jobs` and, through its PodWriter, the same Kube's
        # `bind_pod`: instance attributes set before start() win over the methods.
        on_pod = scheduler._on_pod

        def timed_on_pod(event: str, pod: dict[str, Any]) -> None:
            with self.lock:
                self.seen.setdefault(pod["metadata"]["uid"], time.time())
                if event == "DELETED":
                    self.gone_seen.setdefault(pod["metadata"]["uid"], time.time())
            on_pod(event, pod)

        scheduler._on_pod = timed_on_pod  # type: ignore[method-assign]
        api = clients.operator
        submit = api.submit

        def timed_submit(spec: JobSpec) -> Any:
            uid = pod_uid_of(spec.name or "") or ""
            sent = time.time()
            result = submit(spec)
            with self.lock:
                self.submit_sent[uid] = sent
                self.submitted[uid] = time.time()
            return result

        api.submit = timed_submit  # type: ignore[method-assign]
        jobs = api.jobs

        def timed_jobs(since: int | None = None) -> Any:
            flagged: list[str] | None = getattr(self._polling, "flagged", None)
            sent = time.time()
            snapshot = jobs() if since is None else jobs(since=since)
            returned = time.time()
            if flagged is None or snapshot is None:  # not the scheduler's poll, or a 304
                return snapshot
            with self.lock:
                for job in snapshot.items:
                    uid = pod_uid_of(job.name)
                    hooked = self.started_hook.get(uid or "")
                    if uid and job.state == "PENDING" and hooked is not None and hooked > sent:
                        self.stale_pending.setdefault(uid, (sent, returned))
                        flagged.append(uid)
            return snapshot

        api.jobs = timed_jobs  # type: ignore[method-assign]
        poll = scheduler._poll_jobs

        def timed_poll() -> None:
            # start() and the poll thread call `self._poll_jobs()`: after it has processed the
            # snapshot, look at what the scheduler now holds for the flagged jobs.
            flagged: list[str] = []
            self._polling.flagged = flagged
            try:
                poll()
            finally:
                self._polling.flagged = None
                for uid in flagged:
                    job = scheduler.job_of(uid)
                    with self.lock:
                        self.stale_after.setdefault(uid, job.state if job else "no job")

        scheduler._poll_jobs = timed_poll  # type: ignore[method-assign]
        bind_pod = kube.bind_pod

        def timed_bind(*args: Any, **kwargs: Any) -> None:
            sent = time.time()
            bind_pod(*args, **kwargs)
            with self.lock:
                self.bind_sent[kwargs.get("pod_uid") or ""] = sent
                self.bind_returned[kwargs.get("pod_uid") or ""] = time.time()

        kube.bind_pod = timed_bind  # type: ignore[method-assign]
        on_hook = scheduler.on_hook

        def timed_hook(call: HookCall) -> str:
            if call.kind == "started":
                job = scheduler.job_of(call.pod_uid)
                with self.lock:
                    self.started_hook.setdefault(call.pod_uid, time.time())
                    if job is None or job.job_id != call.job_id:
                        self.early_hooks.add(call.pod_uid)
            answer = on_hook(call)
            with self.lock:
                self.hook_answers[f"{call.kind} {answer}"] += 1
            return answer

        scheduler.on_hook = timed_hook  # type: ignore[method-assign]

    def count_hook_errors(self, scheduler: PodScheduler) -> None:
        """After start(): socketserver prints a traceback to stderr for every request whose
        handler raised (a caller that gave up: BrokenPipeError). Count them and log one line
        each instead, so the output stays readable and the count is reported."""
        assert scheduler.hooks is not None
        server = scheduler.hooks._server

        def handle_error(request: Any, client_address: Any) -> None:
            exc = sys.exc_info()[1]
            name = type(exc).__name__ if exc is not None else "unknown"
            with self.lock:
                self.hook_errors[name] += 1
            logging.getLogger("bench.hooks").warning(
                "hooks server: a request from %s failed: %r", client_address[1], exc
            )

        server.handle_error = handle_error  # type: ignore[method-assign]


# --------------------------------------------------------------------------- CPU accounting

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu(stat_path: str) -> float:
    """utime + stime of a process or thread, in seconds; 0 when it is gone."""
    try:
        fields = Path(stat_path).read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _machine_busy() -> float:
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def _thread_group(name: str) -> str | None:
    if name == f"scheduler-pods-{POD_NAMESPACE}":
        return "  its watch of the Pods (schedulerName)"
    if name.startswith("scheduler-worker-"):
        return "  its workers"
    groups = {
        "scheduler-pods-": "  its watch of the slurmd Pods",
        "scheduler-nodes-": "  its watch of the Nodes",
        "scheduler-poll": "  its Slurm poll",
        "scheduler-hooks": "  its hooks server (accept loop)",
        "scheduler-events": "  its event senders",
    }
    return next((label for prefix, label in groups.items() if name.startswith(prefix)), None)


def cpu_snapshot(stack: Stack, loader_pid: int) -> dict[str, float]:
    """CPU seconds so far of this process (and its scheduler's long-lived threads), the load
    generator, the `up` process (node agent) and each daemon of the stack, and the machine.
    Keys are `label#id` per thread or process; cpu_used adds them up per label."""
    out: dict[str, float] = {
        "benchmark process: PodScheduler": _cpu("/proc/self/stat"),
    }
    for thread in threading.enumerate():
        group = _thread_group(thread.name)
        if group is not None and thread.native_id is not None and thread.is_alive():
            out[f"{group}#{thread.native_id}"] = _cpu(f"/proc/self/task/{thread.native_id}/stat")
    out["load generator (creates, watches)"] = _cpu(f"/proc/{loader_pid}/stat")
    out["local up: node agent (kubelet)"] = _cpu(f"/proc/{stack.process.pid}/stat")
    supervisor = LocalStack.open(stack.runtime).supervisor
    for name in sorted(supervisor.names()):
        record = supervisor.read(name)
        if record is None:
            continue
        label = "slurmd (all nodes)" if name.startswith("slurmd-") else name
        out[f"{label}#{name}"] = _cpu(f"/proc/{record.pid}/stat")
    out["machine"] = _machine_busy()
    return out


def cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Per label: a thread or process that appeared meanwhile counts from 0; one that ended
    meanwhile (a stopped scheduler's thread) is left out."""
    used: dict[str, float] = {}
    for key, value in after.items():
        label = key.split("#", 1)[0]
        used[label] = used.get(label, 0.0) + max(0.0, value - before.get(key, 0.0))
    listed = sum(v for k, v in used.items() if k != "machine" and not k.startswith("  "))
    used["rest of the machine (job processes, curl, other stacks)"] = used["machine"] - listed
    return used


@dataclass
class SchedResult:
    count: int
    creators: int
    workers: int
    poll_seconds: float
    hooks_port: int
    start_seconds: float
    pods: list[PodTimes]
    create_seconds: float
    counters_bound: Counters  # when the last Pod was bound
    cpu: dict[str, float]  # CPU seconds, first create -> last bind
    watch_events: int
    watch_bytes: int
    deleted_in_batch: int  # Pods gone before the cleanup asked for it
    log_mark: int  # captured log records up to the last bind
    steady_seconds: float
    steady_polls: int
    steady_unchanged: int
    memory: JobMemory | None
    mem_drop: int
    instrument: Instrument
    checks: list[str]  # problems found
    jobs_in_slurm: int
    spread: dict[str, int]
    scheduler_name: str = ""
    cleanup: Cleanup | None = None
    paced: PacedResult | None = None
    counters_end: Counters | None = None  # when the scheduler was stopped

    @property
    def bound(self) -> list[PodTimes]:
        return [p for p in self.pods if p.bound is not None]

    @property
    def batch_seconds(self) -> float:
        first = min(p.sent for p in self.pods)
        return max(p.bound for p in self.bound if p.bound) - first

    @property
    def throughput(self) -> float:
        return len(self.bound) / self.batch_seconds if self.bound else 0.0


@dataclass
class Cleanup:
    """Deleting a phase's Pods: the scheduler cancels their jobs."""

    pods_gone: float | None  # seconds from the first delete to the last DELETED seen
    jobs_gone: float | None  # ... until no placeholder job holds resources
    deleted: list[PodTimes]  # with delete_sent and gone


@dataclass
class PacedResult:
    count: int
    rate: float  # asked for, Pods/s
    pods: list[PodTimes]
    create_seconds: float
    cpu: dict[str, float]  # first create -> last bind
    counters: Counters  # what the scheduler did in that time
    checks: list[str]
    jobs_in_slurm: int
    cleanup: Cleanup | None = None

    @property
    def bound(self) -> list[PodTimes]:
        return [p for p in self.pods if p.bound is not None]

    @property
    def seconds(self) -> float:
        return max(p.bound for p in self.bound if p.bound) - min(p.sent for p in self.pods)


@dataclass
class BacklogResult:
    scheduler_name: str
    count: int
    pods: list[PodTimes]
    create_seconds: float
    bound_before_start: int  # Pods bound before the backlog scheduler started: must be 0
    started_at: float  # epoch, just before start()
    start_seconds: float  # start() itself: lists the jobs, the Pods, the Nodes
    cpu: dict[str, float]  # start -> last bind
    counters: Counters  # at the last bind
    instrument: Instrument
    log_mark: tuple[int, int]  # captured log records: at start, at the last bind
    checks: list[str]
    jobs_in_slurm: int
    cleanup: Cleanup | None = None
    counters_end: Counters | None = None

    @property
    def bound(self) -> list[PodTimes]:
        return [p for p in self.pods if p.bound is not None]

    @property
    def seconds(self) -> float:
        """Scheduler start -> last bind seen."""
        return max(p.bound for p in self.bound if p.bound) - self.started_at

    @property
    def throughput(self) -> float:
        return len(self.bound) / self.seconds if self.bound else 0.0


def copy_counters(counters: Counters) -> Counters:
    return Counters(**vars(counters))


def counters_since(before: Counters, after: Counters) -> Counters:
    return Counters(**{k: v - getattr(before, k) for k, v in vars(after).items()})


def bench_settings(workers: int, name_suffix: str = "", repo: Path = REPO) -> SchedulerSettings:
    config = load_config(read_repo(repo), read_library())
    settings = settings_from_values(
        config.values, release=config.settings.release, namespace=config.settings.namespace,
        hooks_host="127.0.0.1", hooks_port=0, workers=workers,
    )  # fmt: skip
    return replace(settings, name=settings.name + name_suffix)


def placeholder_jobs_ended(api: SlurmRestApi) -> bool:
    return not any(j.state in HOLDING for j in api.jobs().items if pod_uid_of(j.name) is not None)


def clean_up(loader: LoadGenerator, api: SlurmRestApi, count: int) -> Cleanup:
    """The load generator deletes the Pods; the scheduler cancels their jobs."""
    say(f"deleting {count} Pods")
    t0 = time.perf_counter()
    loader.send("delete")
    pods_gone, deleted_times = loader.expect("deleted", SETTLE_TIMEOUT + 60)
    jobs_gone = None
    if wait_until(lambda: placeholder_jobs_ended(api), SETTLE_TIMEOUT, poll=0.5):
        jobs_gone = time.perf_counter() - t0
    else:
        say(f"placeholder jobs still hold resources {SETTLE_TIMEOUT:.0f} s after the deletes")
    return Cleanup(pods_gone, jobs_gone, [PodTimes(**p) for p in deleted_times])


def instrumented_scheduler(
    stack: Stack, settings: SchedulerSettings
) -> tuple[Kube, Kube, SlurmClients, PodScheduler, Instrument]:
    """The bench's own client, the scheduler's, and a PodScheduler (not started) with timing
    wrappers."""
    kube = Kube.from_kubeconfig(stack.kubeconfig, field_manager="scheduler-bench")
    sched_kube = Kube.from_kubeconfig(stack.kubeconfig, field_manager=wk.SCHEDULER_FIELD_MANAGER)
    clients = SlurmClients(stack.rest_url, MintedTokens(stack.jwt_key, stack.user),
                           jwt_key=stack.jwt_key)  # fmt: skip
    scheduler = PodScheduler(sched_kube, clients, settings)
    instrument = Instrument()
    instrument.attach(scheduler, clients, sched_kube)
    return kube, sched_kube, clients, scheduler, instrument


def run_scheduler(
    stack: Stack, count: int, workers: int, creators: int, timeout: float, steady: float,
    paced_count: int, paced_rate: float, captured: LogCapture, *, repo: Path = REPO,
    gang: int = 0, prefix: str = "bench", name_suffix: str = "",
) -> SchedResult:  # fmt: skip
    """The burst, its cleanup, then the paced Pods with the same scheduler, and their cleanup.
    With GANG, the Pods come in gangs of that many (one Slurm job of GANG nodes each)."""
    settings = bench_settings(workers, name_suffix, repo)
    kube, sched_kube, clients, scheduler, instrument = instrumented_scheduler(stack, settings)
    loader: LoadGenerator | None = None
    started_scheduler = False
    try:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": POD_NAMESPACE}})
        loader = LoadGenerator(stack.kubeconfig, settings.name, prefix, count, creators, timeout,
                               gang=gang)  # fmt: skip
        loader.expect("ready", 120)
        t0 = time.perf_counter()
        scheduler.start()
        started_scheduler = True
        start_seconds = time.perf_counter() - t0
        assert scheduler.hooks is not None
        instrument.count_hook_errors(scheduler)
        say(f"scheduler {settings.name} started in {start_seconds:.2f} s; creating {count} Pods")
        before = mem_available()
        cpu_before = cpu_snapshot(stack, loader.pid)
        loader.send("create")
        create_seconds, _ = loader.expect("created", timeout)
        say(f"created {count} Pods in {create_seconds:.2f} s; waiting for the binds")
        raw_pods, events, event_bytes, deleted = loader.expect("bound", timeout + 60)
        cpu = cpu_used(cpu_before, cpu_snapshot(stack, loader.pid))
        log_mark = len(captured.records)
        counters_bound = copy_counters(scheduler.counters)
        pods = [PodTimes(**p) for p in raw_pods]
        bound = sum(1 for p in pods if p.bound is not None)
        if bound < count:
            say(f"only {bound}/{count} Pods bound after {timeout:.0f} s")
        memory = job_memory(stack.process.pid)
        mem_drop = before - mem_available()
        checks, jobs_in_slurm = check_binds(kube, clients.operator, pods, settings, gang)
        if gang:
            checks += torn_down(counters_bound, deleted)

        say(f"steady state: watching the poll for {steady:.0f} s")
        polls0, unchanged0 = scheduler.counters.polls, scheduler.counters.polls_unchanged
        time.sleep(steady)
        steady_polls = scheduler.counters.polls - polls0
        steady_unchanged = scheduler.counters.polls_unchanged - unchanged0

        result = SchedResult(
            count, creators, workers, settings.poll_seconds, scheduler.hooks.port, start_seconds,
            pods, create_seconds, counters_bound, cpu, events, event_bytes, deleted, log_mark,
            steady, steady_polls,
            steady_unchanged, memory, mem_drop, instrument, checks, jobs_in_slurm,
            dict(Counter(p.node for p in pods if p.node)), settings.name,
        )  # fmt: skip
        result.cleanup = clean_up(loader, clients.operator, count)
        loader.stop()
        loader = None

        if paced_count:
            loader = LoadGenerator(stack.kubeconfig, settings.name, "paced", paced_count,
                                   creators, timeout, rate=paced_rate)  # fmt: skip
            loader.expect("ready", 120)
            say(f"paced: creating {paced_count} Pods at {paced_rate:g}/s")
            counters0 = copy_counters(scheduler.counters)
            cpu_before = cpu_snapshot(stack, loader.pid)
            loader.send("create")
            paced_create, _ = loader.expect("created", timeout)
            raw_pods, *_ = loader.expect("bound", timeout + 60)
            cpu = cpu_used(cpu_before, cpu_snapshot(stack, loader.pid))
            counters = counters_since(counters0, scheduler.counters)
            pods = [PodTimes(**p) for p in raw_pods]
            paced_checks, paced_jobs = check_binds(kube, clients.operator, pods, settings)
            result.checks += [f"paced: {c}" for c in paced_checks]
            result.paced = PacedResult(paced_count, paced_rate, pods, paced_create, cpu,
                                       counters, paced_checks, paced_jobs)  # fmt: skip
            result.paced.cleanup = clean_up(loader, clients.operator, paced_count)
        result.counters_end = copy_counters(scheduler.counters)
        return result
    finally:
        if loader is not None:
            loader.stop()
        if started_scheduler:
            scheduler.stop()
        clients.close()
        kube.close()
        sched_kube.close()


def run_backlog(
    stack: Stack, count: int, workers: int, creators: int, timeout: float, captured: LogCapture,
    *, repo: Path = REPO, gang: int = 0, prefix: str = "backlog", name_suffix: str = "-backlog",
) -> BacklogResult:  # fmt: skip
    """Pods for a scheduler name nothing watches yet; then a scheduler of that name starts:
    its bind rate does not depend on how fast the API server creates Pods. With GANG, in gangs
    of that many."""
    settings = bench_settings(workers, name_suffix, repo)
    kube, sched_kube, clients, scheduler, instrument = instrumented_scheduler(stack, settings)
    loader: LoadGenerator | None = None
    started_scheduler = False
    try:
        loader = LoadGenerator(stack.kubeconfig, settings.name, prefix, count, creators,
                               timeout, gang=gang)  # fmt: skip
        loader.expect("ready", 120)
        say(f"backlog: creating {count} Pods for {settings.name}, which nothing watches yet")
        loader.send("create")
        create_seconds, bound_before = loader.expect("created", timeout)
        say(f"created {count} Pods in {create_seconds:.2f} s; starting {settings.name}")
        cpu_before = cpu_snapshot(stack, loader.pid)
        mark = len(captured.records)
        started_at = time.time()
        t0 = time.perf_counter()
        scheduler.start()
        started_scheduler = True
        start_seconds = time.perf_counter() - t0
        instrument.count_hook_errors(scheduler)
        raw_pods, *_ = loader.expect("bound", timeout + 60)
        cpu = cpu_used(cpu_before, cpu_snapshot(stack, loader.pid))
        counters = copy_counters(scheduler.counters)
        log_mark = (mark, len(captured.records))
        pods = [PodTimes(**p) for p in raw_pods]
        bound = sum(1 for p in pods if p.bound is not None)
        if bound < count:
            say(f"backlog: only {bound}/{count} Pods bound after {timeout:.0f} s")
        checks, jobs_in_slurm = check_binds(kube, clients.operator, pods, settings, gang)
        if gang:
            checks += torn_down(counters, sum(1 for p in pods if p.gone is not None))
        early = [p.name for p in pods if p.bound is not None and p.bound < started_at]
        if bound_before or early:
            checks.append(f"{max(bound_before, len(early))} Pods were bound before the backlog "
                          f"scheduler started (e.g. {', '.join(early[:3])})")  # fmt: skip
        result = BacklogResult(
            settings.name, count, pods, create_seconds, bound_before, started_at, start_seconds,
            cpu, counters, instrument, log_mark, checks, jobs_in_slurm,
        )  # fmt: skip
        result.cleanup = clean_up(loader, clients.operator, count)
        result.counters_end = copy_counters(scheduler.counters)
        return result
    finally:
        if loader is not None:
            loader.stop()
        if started_scheduler:
            scheduler.stop()
        clients.close()
        kube.close()
        sched_kube.close()


def check_binds(
    kube: Kube, api: SlurmRestApi, pods: list[PodTimes], settings: Any, gang: int = 0
) -> tuple[list[str], int]:
    """Every bound Pod's placeholder job runs on the Slurm node it was bound for, on that Slurm
    node's Kubernetes Node; one job per Pod. Problems are listed, not raised. Only the jobs of
    these Pods count (those of earlier phases stay in Slurm's list until MinJobAge)."""
    if gang:
        return check_gang_binds(kube, api, pods, settings, gang)
    problems: list[str] = []
    ours = {p.uid for p in pods if p.uid}
    slurmd = {
        p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName")
        for p in kube.list("v1", "Pod", settings.namespace,
                           label_selector=f"{wk.LABEL_NAME}=slurmd").items
    }  # fmt: skip
    jobs: dict[str, list[Any]] = {}
    for job in api.jobs().items:
        uid = pod_uid_of(job.name)
        if uid is not None and uid in ours:
            jobs.setdefault(uid, []).append(job)
    duplicated = [uid for uid, js in jobs.items() if len(js) > 1]
    if duplicated:
        problems.append(f"{len(duplicated)} Pods have more than one placeholder job")
    wrong: list[str] = []
    for pod in pods:
        if pod.bound is None:
            continue
        mine = [j for j in jobs.get(pod.uid, ()) if str(j.job_id) == pod.job_id]
        job = mine[0] if mine else None
        on_node = slurmd.get(pod.slurm_node) == pod.node
        if job is None or job.state != "RUNNING" or job.nodes != pod.slurm_node or not on_node:
            what = f"job {job.job_id} {job.state} on {job.nodes!r}" if job else "no such job"
            wrong.append(
                f"{pod.name} bound to {pod.node} for job {pod.job_id} on {pod.slurm_node!r} "
                f"(slurmd there on {slurmd.get(pod.slurm_node)}), Slurm says {what}"
            )
    if wrong:
        problems.append(
            f"{len(wrong)} bound Pods do not match their job's state or node, e.g. "
            + "; ".join(wrong[:3])
        )
    unbound = [p.name for p in pods if p.bound is None]
    if unbound:
        problems.append(f"{len(unbound)} Pods never bound (e.g. {', '.join(unbound[:5])})")
    return problems, sum(len(js) for js in jobs.values())


def torn_down(counters: Counters, gone: int) -> list[str]:
    """A gang's Pods deleted, or its job cancelled, by the scheduler before the phase's last
    bind: nothing in the benchmark fails them, so the scheduler tore down gangs it had placed."""
    if not (counters.pods_deleted or counters.jobs_cancelled or gone):
        return []
    return [
        f"before the last bind the scheduler deleted {counters.pods_deleted} Pods and "
        f"cancelled {counters.jobs_cancelled} gang jobs ({gone} Pods already gone)"
    ]


def _slurmd_nodes(kube: Kube, settings: Any) -> dict[str, str | None]:
    """Slurm node (slurmd Pod name) -> its Kubernetes Node."""
    return {
        p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName")
        for p in kube.list("v1", "Pod", settings.namespace,
                           label_selector=f"{wk.LABEL_NAME}=slurmd").items
    }  # fmt: skip


def check_gang_binds(
    kube: Kube, api: SlurmRestApi, pods: list[PodTimes], settings: Any, gang: int
) -> tuple[list[str], int]:
    """Every gang has GANG members and one job, RUNNING on GANG nodes; its members are bound for
    that job, each on a distinct node of it, on that Slurm node's Kubernetes Node."""
    problems: list[str] = []
    slurmd = _slurmd_nodes(kube, settings)
    groups: dict[str, list[PodTimes]] = {}
    for pod in pods:
        groups.setdefault(pod.group, []).append(pod)
    keys = {gang_key(POD_NAMESPACE, g): g for g in groups}
    jobs: dict[str, list[Any]] = {}
    for job in api.jobs().items:
        key = pod_uid_of(job.name)
        if key is not None and key in keys:
            jobs.setdefault(keys[key], []).append(job)
    active = {g: [j for j in js if j.state in HOLDING] for g, js in jobs.items()}
    several = [g for g, js in active.items() if len(js) > 1]
    if several:
        problems.append(f"{len(several)} gangs have more than one active job (e.g. {several[0]})")
    wrong: list[str] = []
    for group, members in sorted(groups.items()):
        bound = [p for p in members if p.bound is not None]
        if not bound:
            continue
        ids = {p.job_id for p in bound}
        job = next((j for j in jobs.get(group, ()) if str(j.job_id) in ids), None)
        nodes = set(hostlist.expand_hostlist(job.nodes)) if job and job.nodes else set()
        placed = [p.slurm_node for p in bound]
        bad = (
            len(members) != gang or len(bound) != gang or len(ids) != 1 or job is None
            or job.state != "RUNNING" or len(nodes) != gang or len(set(placed)) != gang
            or not set(placed) <= nodes or any(slurmd.get(p.slurm_node) != p.node for p in bound)
        )  # fmt: skip
        if bad:
            what = f"job {job.job_id} {job.state} on {job.nodes!r}" if job else "no such job"
            wrong.append(f"{group}: {len(bound)}/{len(members)} bound for jobs {sorted(ids)} on "
                         f"{sorted(placed)}, Slurm says {what}")  # fmt: skip
    if wrong:
        problems.append(f"{len(wrong)} gangs do not match their job, e.g. " + "; ".join(wrong[:2]))
    unbound = [p.name for p in pods if p.bound is None]
    if unbound:
        problems.append(f"{len(unbound)} Pods never bound (e.g. {', '.join(unbound[:5])})")
    return problems, sum(len(js) for js in jobs.values())


# --------------------------------------------------------------------------- report


def gang_check_rows(out: Callable[..., None], c: Counters, checks: list[str], checked: str) -> None:
    out(f"  counters at the last bind: submitted {c.submitted}, bound {c.bound}, refused "
        f"{c.refused}, pods_deleted {c.pods_deleted}, jobs_cancelled {c.jobs_cancelled}, "
        f"hooks {c.hooks}, polls {c.polls}")  # fmt: skip
    out("  CHECKS FAILED: " + "; ".join(checks) if checks else f"  checked: {checked}")


def fmt_row(label: str, values: Iterable[float], width: int = 34) -> str:
    return f"  {label:<{width}}" + "".join(f"{v:>8.3f}" for v in values)


@dataclass
class Target:
    label: str
    value: str
    met: bool


HEADER = "".join(f"{h:>8}" for h in ("p50", "p90", "p99", "max"))


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
        ("`started` hook", lambda p: inst.started_hook.get(p.uid)),
        ("bind sent", lambda p: inst.bind_sent.get(p.uid)),
        ("bind returned", lambda p: inst.bind_returned.get(p.uid)),
        ("seen bound", lambda p: p.bound),
    ]
    out("  where the time goes, per Pod (wrappers record when the scheduler's watch handler, "
        "submit, hook handler and bind ran):")  # fmt: skip
    between_marks_rows(out, marks, pods, 44)


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
    # Pairs of Pods waiting for their bind at the same time (the second's hook came before the
    # first's bind was sent): how often the later hook was bound first.
    hooked = sorted(
        (inst.started_hook[u], inst.bind_sent[u])
        for u in uids
        if u in inst.started_hook and u in inst.bind_sent
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
            f"{later_first / pairs:.0%} were bound latest `started` hook first (FIFO 0%, "
            "random 50%, a stack 100%)"
        )


def hook_race_rows(
    out: Callable[..., None], pods: list[PodTimes], inst: Instrument, pods_deleted: int,
    requeued: int,
) -> None:  # fmt: skip
    """`started` hooks that beat the submit's record, and polls whose answer predates a hook."""
    uids = {p.uid for p in pods if p.uid}
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


def ratio_text(numerator: float, denominator: float | None) -> tuple[str, float | None]:
    if not denominator:
        return "n/a", None
    ratio = numerator / denominator
    return f"{numerator:.1f} / {denominator:.1f} = {ratio:.2f}", ratio


def report(
    args: argparse.Namespace, stack: Stack, raw: RawResult, sched: SchedResult,
    backlog: BacklogResult | None, captured: LogCapture, load_at_start: float,
    gangs: GangRun | None = None,
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
    out(
        f"1. raw slurmrestd: {raw.count} batch jobs (sleep 600, {RAW_CPUS} CPU, "
        f"{RAW_MEMORY_MB} MB), {args.workers} concurrent submitters, one shared client"
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
    settled = f"{raw.settled_after:.1f} s" if raw.settled_after is not None else "never"
    out(f"  cancelled in {raw.cancel_seconds:.2f} s; no job left and every CPU free after "
        f"{settled}")  # fmt: skip
    out()

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
    if bound:
        out()
        own = latency_rows(out, bound)
        burst_p50 = percentile(own, 50)
        stage_rows(out, bound, inst, ("create returned", lambda p: p.created))
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
    out(
        f"  counters at the last bind: submitted {c.submitted}, bound {c.bound}, refused "
        f"{c.refused}, pods_deleted {c.pods_deleted}, jobs_cancelled {c.jobs_cancelled}, hooks "
        f"{c.hooks}, polls {c.polls} ({c.polls_unchanged} answered 304)"
    )
    in_batch = captured.records[: sched.log_mark]
    if c.pods_deleted or c.jobs_cancelled or sched.deleted_in_batch:
        out(
            f"  DURING THE BATCH the scheduler deleted {c.pods_deleted} Pods and cancelled "
            f"{c.jobs_cancelled} jobs; {sched.deleted_in_batch} Pods were gone before cleanup:"
        )
        for (name, level, text), n in _kinds(r for r in in_batch if "cancelled" in r.msg):
            out(f"    {n:>5} x {level} {name}: {text}")
    out(
        f"  steady state, {sched.steady_seconds:.0f} s after the last bind: {sched.steady_polls} "
        f"polls, {sched.steady_unchanged} answered 304 Not Modified"
    )
    if sched.memory is not None:
        out(f"  while bound: {sched.memory.text(len(bound))}; MemAvailable "
            f"{sched.mem_drop / 2**30:+.2f} GiB lower")  # fmt: skip
    nodes = ", ".join(f"{n} {k}" for n, k in sorted(sched.spread.items()))
    out(f"  placeholder jobs in Slurm: {sched.jobs_in_slurm}; Pods per Node: {nodes or '-'}")
    burst_checks = [c for c in sched.checks if not c.startswith("paced: ")]
    if burst_checks:
        out("  CHECKS FAILED: " + "; ".join(burst_checks))
    else:
        out("  checked: one job per Pod, each RUNNING on the Slurm node the Pod was bound for, "
            "on that node's Kubernetes Node")  # fmt: skip
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
            f"({pc.polls_unchanged} answered 304)")  # fmt: skip
        if paced.checks:
            out("  CHECKS FAILED: " + "; ".join(paced.checks))
        else:
            out(f"  checked: one job per Pod ({paced.jobs_in_slurm} jobs), each RUNNING where "
                "its Pod was bound")  # fmt: skip
        cleanup_rows(out, "  cleanup: ", paced.cleanup, inst)
        out()

    # ---- 5. backlog
    ratio_submits: float | None = None
    ratio_running: float | None = None
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
            if raw.processes_after:
                text, _ = ratio_text(backlog.throughput, raw.count / raw.processes_after)
                out(
                    f"  throughput / raw submit -> all processes up: {text} (not a target; a Pod "
                    "is bound after its job's script has called the `started` hook, which is "
                    "later than RUNNING)"
                )
            out()
            cpu_rows(out, backlog.cpu, backlog.seconds, "from its start to the last bind")
        bc = backlog.counters
        out(
            f"  counters at the last bind: submitted {bc.submitted}, bound {bc.bound}, refused "
            f"{bc.refused}, pods_deleted {bc.pods_deleted}, jobs_cancelled {bc.jobs_cancelled}, "
            f"hooks {bc.hooks}, polls {bc.polls} ({bc.polls_unchanged} answered 304)"
        )
        if backlog.checks:
            out("  CHECKS FAILED: " + "; ".join(backlog.checks))
        else:
            out(f"  checked: one job per Pod ({backlog.jobs_in_slurm} jobs), each RUNNING where "
                "its Pod was bound, none bound before the scheduler started")  # fmt: skip
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
    for (_name, _level, text), n in _kinds(cancels):
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
    for (name, level, text), n in _kinds(warnings)[:6]:
        out(f"    {n:>5} x {level} {name}: {text}")
    up_warnings = [
        line for line in stack.log.read_text(errors="replace").splitlines()
        if " WARNING " in line or " ERROR " in line or "Traceback" in line
    ]  # fmt: skip
    out(f"  warnings logged by `local up` (node agent): {len(up_warnings)}"
        + (f", e.g. {up_warnings[0][:160]}" if up_warnings else ""))  # fmt: skip

    def p50_target(label: str, value: float | None) -> Target:
        if value is None:
            return Target(label, "n/a", False)
        return Target(label, f"{value:.2f} s", value < P50_TARGET)

    def ratio_target(label: str, value: float | None) -> Target:
        if value is None:
            return Target(label, "n/a", False)
        return Target(label, f"{value:.2f}", value >= RATIO_TARGET)

    paced_label = f"paced, {paced.rate:g}/s" if paced is not None else "paced (not run)"
    return [
        p50_target(f"p50 create -> bound, burst of {sched.count}", burst_p50),
        p50_target(f"p50 create -> bound, {paced_label}", paced_p50),
        ratio_target("backlog Pods bound/s / raw submits/s", ratio_submits),
        ratio_target("backlog Pods bound/s / raw jobs RUNNING/s", ratio_running),
    ]


# --------------------------------------------------------------------------- gangs


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
        ("`started` hook", lambda m: inst.started_hook.get(key(m))),
        ("first bind sent", lambda m: each([inst.bind_sent.get(p.uid) for p in m], min)),
        ("last bind returned", lambda m: each([inst.bind_returned.get(p.uid) for p in m], max)),
        ("all seen bound", lambda m: each([p.bound for p in m], max)),
    ]
    complete = [m for m in _groups(pods).values() if all(p.bound for p in m)]
    out("  where a gang's time goes, per fully bound gang (its job's submit and `started` hook, "
        "its members' watch events and binds):")  # fmt: skip
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
        stages = ("seen", "submit_sent", "submitted", "started_hook", "bind_sent",
                  "bind_returned")  # fmt: skip
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


def _kinds(records: Iterable[logging.LogRecord]) -> list[tuple[tuple[str, str, str], int]]:
    return Counter((r.name, r.levelname, _shape(r.getMessage())) for r in records).most_common()


def _shape(message: str) -> str:
    """A message with its numbers and uids blanked, so like messages count together."""
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<uid>", message)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return text[:150]


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

    def terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # run the finally blocks: the stack must stop

    signal.signal(signal.SIGTERM, terminate)
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
        targets = report(args, stack, raw, sched, backlog, captured, load, gangs)
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
