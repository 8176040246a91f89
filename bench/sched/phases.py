"""The scheduler's phases: burst, cleanup, paced (one scheduler) and backlog (another)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.harness.loadgen import LoadGenerator, PodTimes
from bench.harness.procs import JobMemory, cpu_used, job_memory, mem_available
from bench.harness.report import say
from bench.harness.stack import Stack
from bench.harness.timing import wait_until
from bench.sched.checks import check_binds, torn_down
from bench.sched.common import (
    POD_NAMESPACE,
    REPO,
    SETTLE_TIMEOUT,
    LogCapture,
    bench_settings,
    copy_counters,
    counters_since,
    placeholder_jobs_ended,
    start_loader,
)
from bench.sched.instrument import Instrument, cpu_snapshot
from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.loop import Counters, PodScheduler
from reconciler.scheduler.settings import SchedulerSettings


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


def stop_phase(
    loader: LoadGenerator | None, scheduler: PodScheduler | None, clients: SlurmClients,
    *kubes: Kube,
) -> None:  # fmt: skip
    """The end of a phase, also after an error: its load generator, its scheduler if it
    started, its clients."""
    if loader is not None:
        loader.stop()
    if scheduler is not None:
        scheduler.stop()
    clients.close()
    for kube in kubes:
        kube.close()


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
        loader = start_loader(stack, settings.name, prefix, count, creators, timeout,
                              gang=gang)  # fmt: skip
        loader.expect("ready", 120)
        t0 = time.perf_counter()
        scheduler.start()
        started_scheduler = True
        start_seconds = time.perf_counter() - t0
        instrument.started(scheduler)
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
            loader = start_loader(stack, settings.name, "paced", paced_count, creators,
                                  timeout, rate=paced_rate)  # fmt: skip
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
        stop_phase(loader, scheduler if started_scheduler else None, clients, kube, sched_kube)


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
        loader = start_loader(stack, settings.name, prefix, count, creators, timeout,
                              gang=gang)  # fmt: skip
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
        instrument.started(scheduler)
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
        stop_phase(loader, scheduler if started_scheduler else None, clients, kube, sched_kube)
