"""Timing wrappers around a PodScheduler, and the CPU of its threads and of the stack."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.harness.procs import cpu_seconds, machine_busy, stack_cpu
from bench.harness.stack import Stack
from bench.sched.common import POD_NAMESPACE
from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm.model import JobSpec
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.counters import whole_list_reads
from reconciler.scheduler.decide.placeholder import pod_uid_of
from reconciler.scheduler.hook_server import HookCall
from reconciler.scheduler.loop import PodScheduler
from reconciler.scheduler.stages import PodStages


@dataclass(frozen=True)
class Look:
    """One look of the scheduler's start watch (starts.py), our clock."""

    began: float
    state_list: float  # seconds its `GET /jobs/state/` took
    ended: float  # the reads of the jobs it found started included
    started: int  # jobs it found started (each read by itself)


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
    # When the scheduler first held the job RUNNING from its start watch or a poll (a hook's
    # time is started_hook): the first of the three is when it knew of the allocation.
    start_seen: dict[str, float] = field(default_factory=dict)
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
    # The scheduler's own stage marks of each Pod it bound (PodScheduler.observe(stages=)).
    stages: list[PodStages] = field(default_factory=list)
    whole_lists_at_start: int = 0  # whole job-list reads the scheduler's start() made
    looks: list[Look] = field(default_factory=list)  # the start watch's, in order
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Set while the scheduler's poll runs on this thread: the uids flagged by its jobs() call.
    _polling: threading.local = field(default_factory=threading.local)

    def attach(self, scheduler: PodScheduler, clients: SlurmClients, kube: Kube) -> None:
        # start() hands `self._on_pod` and `self.on_hook` to the watch and the hooks server,
        # start() and the poll thread call `self._poll_jobs()`, and the steps call
        # `self._slurm.operator.submit`/`.jobs` and, through its PodWriter, the same Kube's
        # `bind_pod`: instance attributes set before start() win over the methods.
        scheduler.observe(stages=self._keep_stages)
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

            self._note_running(scheduler)

        scheduler._poll_jobs = timed_poll  # type: ignore[method-assign]
        starts = scheduler._starts
        refresh = starts._refresh

        def timed_refresh(key: str, job_id: int, api: Any) -> None:
            refresh(key, job_id, api)
            job = scheduler.job_of(key)
            if job is not None and job.state == "RUNNING":
                with self.lock:
                    self.start_seen.setdefault(key, time.time())

        starts._refresh = timed_refresh  # type: ignore[method-assign]
        look = starts.look

        def timed_look() -> int:
            began = time.time()
            started = look()
            with self.lock:
                self.looks.append(Look(began, starts._spent, time.time(), started))
            return started

        starts.look = timed_look  # type: ignore[method-assign]
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

    def _keep_stages(self, record: PodStages) -> None:
        with self.lock:
            self.stages.append(record)

    def started(self, scheduler: PodScheduler) -> None:
        """Right after start(): what it read of Slurm's whole job list."""
        self.whole_lists_at_start = whole_list_reads(scheduler.counters.slurm_requests)

    def allocation_known(self, uid: str) -> float | None:
        """When the scheduler first knew the job was allocated: start watch, poll or hook."""
        times = [t for t in (self.start_seen.get(uid), self.started_hook.get(uid)) if t]
        return min(times) if times else None

    def _note_running(self, scheduler: PodScheduler) -> None:
        now = time.time()
        running = [k for k, j in scheduler.known_jobs().items() if j.state == "RUNNING"]
        with self.lock:
            for key in running:
                self.start_seen.setdefault(key, now)

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
        "benchmark process: PodScheduler": cpu_seconds("/proc/self/stat"),
    }
    for thread in threading.enumerate():
        group = _thread_group(thread.name)
        if group is not None and thread.native_id is not None and thread.is_alive():
            stat = f"/proc/self/task/{thread.native_id}/stat"
            out[f"{group}#{thread.native_id}"] = cpu_seconds(stat)
    out["load generator (creates, watches)"] = cpu_seconds(f"/proc/{loader_pid}/stat")
    out["local up: node agent (kubelet)"] = cpu_seconds(f"/proc/{stack.process.pid}/stat")
    out.update(stack_cpu(stack.runtime))
    out["machine"] = machine_busy()
    return out
