"""Prometheus metrics of the daemon, in a registry of its own (served at /metrics)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from reconciler.daemon.converge import Outcome
from reconciler.scheduler.decide.packing_decide import Fragmentation
from reconciler.scheduler.loop import Counters
from reconciler.slurm_metrics.collector import SlurmCollector
from reconciler.slurm_metrics.reader import SlurmView
from reconciler.sync.node_health_effects import OPERATIONS as NODE_SYNC_OPERATIONS

# What a convergence was: a revision not converged before, or a resync of the applied one.
CONVERGE_REVISION, CONVERGE_RESYNC = "revision", "resync"
CONVERGE_KINDS = (CONVERGE_REVISION, CONVERGE_RESYNC)


class DaemonMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.reconcile_seconds = Histogram(
            "reconciler_reconcile_duration_seconds",
            "Time to load, compile, plan and apply one revision",
            ["state"],
            registry=self.registry,
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
        )
        self.reconciles = Counter(
            "reconciler_reconciles", "Revisions converged, by outcome", ["state"],
            registry=self.registry,
        )  # fmt: skip
        self.applied_at = Gauge(
            "reconciler_last_applied_timestamp_seconds",
            "When the cluster last matched a revision (applied or unchanged)",
            registry=self.registry,
        )
        self.applied_revision = Gauge(
            "reconciler_applied_revision_info", "The revision the cluster holds (value 1)",
            ["revision"], registry=self.registry,
        )  # fmt: skip
        self.drift = Counter(
            "reconciler_drift_corrections", "Resyncs that reverted changes made by hand",
            registry=self.registry,
        )  # fmt: skip
        # By what was converged: a revision not converged before (the start, a new commit) or
        # a resync (the applied revision re-planned); a resync is the cost paid every --resync.
        self.converge_seconds = Histogram(
            "reconciler_converge_duration_seconds",
            "Time of one convergence (load, compile, plan, apply), by kind: revision (one not "
            "converged before) or resync (the applied revision re-planned)",
            ["kind"],
            registry=self.registry,
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
        )
        self.converge_cpu = Counter(
            "reconciler_converge_cpu_seconds",
            "CPU time of the thread that converged (load, compile, plan, apply), by kind",
            ["kind"],
            registry=self.registry,
        )
        for kind in CONVERGE_KINDS:  # at 0 from the start
            self.converge_seconds.labels(kind)
            self.converge_cpu.labels(kind)
        self.pod_bind_seconds = Histogram(
            "reconciler_scheduler_pod_bind_seconds",
            "From a Pod's creationTimestamp (whole seconds: up to 1 s early) to the scheduler's "
            "successful binding of it to a Node",
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300),
        )
        self.slurm_request_seconds = Histogram(
            "reconciler_slurm_request_seconds",
            "The scheduler's slurmrestd requests (failed ones too), by operation",
            ["operation"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.slurm_request_errors = Counter(
            "reconciler_slurm_request_errors",
            "The scheduler's slurmrestd requests that failed (unreachable, HTTP error or Slurm "
            "`errors`), by operation",
            ["operation"],
            registry=self.registry,
        )
        self.node_sync_actions = Counter(
            "reconciler_node_sync_actions",
            "Node health sync actions carried out (drain, resume, pod_health, cordon, uncordon)",
            ["action"],
            registry=self.registry,
        )
        self.node_sync_errors = Counter(
            "reconciler_node_sync_errors",
            "Node health sync failures, retried next pass: a read that failed (list), a Slurm "
            "node Slurm does not know (unknown_node), or an action that failed",
            ["operation"],
            registry=self.registry,
        )
        for operation in NODE_SYNC_OPERATIONS:  # at 0 from the start, so alerts see them
            self.node_sync_errors.labels(operation)
        self._refusals: _RefusalsCollector | None = None
        self._watch_process()

    def _watch_process(self) -> None:
        """The process's memory, CPU and fds and Python's collector, under the names every
        Python exporter serves them; and the blocks Python's allocator holds (a read of a
        counter it keeps): what a daemon that runs for months must keep flat."""
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        blocks = Gauge(
            "reconciler_python_allocated_blocks",
            "Memory blocks Python's object allocator holds (sys.getallocatedblocks): the "
            "objects the daemon keeps, and their parts",
            registry=self.registry,
        )
        blocks.set_function(sys.getallocatedblocks)

    def record(
        self, outcome: Outcome, now: float, *, kind: str = "", cpu_seconds: float = 0.0
    ) -> None:
        """One outcome; with KIND (CONVERGE_KINDS), a convergence that took CPU_SECONDS of its
        thread (a revision the source refused has none)."""
        self.reconcile_seconds.labels(outcome.state).observe(outcome.seconds)
        if kind:
            self.converge_seconds.labels(kind).observe(outcome.seconds)
            self.converge_cpu.labels(kind).inc(cpu_seconds)
        self.reconciles.labels(outcome.state).inc()
        if outcome.drift:
            self.drift.inc()
        if outcome.state != "failed":
            self.applied_at.set(now)
            self.applied_revision.clear()
            self.applied_revision.labels(outcome.revision.id).set(1)

    def watch_scheduler(self, counters: Callable[[], Counters | None]) -> None:
        self.registry.register(_SchedulerCollector(counters))

    def watch_leader(self, leading: Callable[[], bool]) -> None:
        """1 while this replica leads (or runs alone), read at scrape time."""
        self.registry.register(_LeaderCollector(leading))

    def watch_http(self, server: str, refusals: Callable[[], Mapping[str, int] | None]) -> None:
        """Requests an HTTP server refused, by reason (adapters.http_server.REASONS)."""
        if self._refusals is None:
            self._refusals = _RefusalsCollector()
            self.registry.register(self._refusals)
        self._refusals.servers[server] = refusals

    def watch_packing(self, figure: Callable[[], Fragmentation | None]) -> None:
        """The bin-packed partitions' fragmentation, as the scheduler last read it."""
        self.registry.register(_PackingCollector(figure))

    def watch_slurm(self, view: Callable[[], SlurmView | None]) -> None:
        """Slurm's nodes, jobs and scheduler statistics, as the reader last read them."""
        self.registry.register(SlurmCollector(view))

    def observe_bind(self, seconds: float) -> None:
        """PodScheduler's bind hook (scheduler.effects.BindObserver)."""
        self.pod_bind_seconds.observe(seconds)

    def observe_slurm(self, operation: str, seconds: float, ok: bool) -> None:
        """The Slurm clients' hook (adapters.slurm.transport.SlurmObserver)."""
        self.slurm_request_seconds.labels(operation).observe(seconds)
        if not ok:
            self.slurm_request_errors.labels(operation).inc()

    def observe_node_sync(self, operation: str, ok: bool) -> None:
        """The node sync's hook (sync.node_sync.NodeSyncObserver)."""
        if ok:
            self.node_sync_actions.labels(operation).inc()
        else:
            self.node_sync_errors.labels(operation).inc()


_SCHEDULER_COUNTERS = {
    "submitted": "Placeholder jobs submitted",
    "bound": "Pods bound to a Node",
    "refused": "Pods refused at admission",
    "pods_deleted": "Pods deleted because their job ended",
    "jobs_cancelled": "Placeholder jobs cancelled",
    "polls": "Polls of Slurm's job list",
    "polls_unchanged": "Polls that found nothing changed (a 304, or no job of ours moved)",
    "hooks": "Calls from placeholder jobs to the hooks API",
    "start_looks": "Looks at Slurm's job states while placeholder jobs were pending",
    "starts_seen": "Pending placeholder jobs those looks found started",
}


class _SchedulerCollector(Collector):
    """The scheduler's own counters, read at scrape time."""

    def __init__(self, counters: Callable[[], Counters | None]) -> None:
        self._counters = counters

    def collect(self) -> Iterator[CounterMetricFamily]:
        counters = self._counters()
        if counters is None:
            return
        for field, text in _SCHEDULER_COUNTERS.items():
            family = CounterMetricFamily(f"reconciler_scheduler_{field}", text)
            family.add_metric([], float(getattr(counters, field)))
            yield family
        writes = CounterMetricFamily(
            "reconciler_scheduler_api_writes",
            "Writes to the API server about Pods, by kind (and Event reason)",
            labels=["kind", "reason"],
        )
        for key, count in sorted(counters.api_writes.items()):
            kind, _, reason = key.partition(":")
            writes.add_metric([kind, reason], float(count))
        yield writes


_PACKING_GAUGES = {
    "idle_nodes": "Nodes of the bin-packed partitions with nothing allocated",
    "partly_used_nodes": "Nodes of the bin-packed partitions partly allocated",
    "stranded_gpus": "Free GPUs on partly allocated nodes of the bin-packed partitions",
}


class _PackingCollector(Collector):
    def __init__(self, figure: Callable[[], Fragmentation | None]) -> None:
        self._figure = figure

    def collect(self) -> Iterator[GaugeMetricFamily]:
        figure = self._figure()
        if figure is None:
            return
        for field, text in _PACKING_GAUGES.items():
            yield GaugeMetricFamily(
                f"reconciler_scheduler_packed_{field}", text, value=float(getattr(figure, field))
            )


class _LeaderCollector(Collector):
    def __init__(self, leading: Callable[[], bool]) -> None:
        self._leading = leading

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "reconciler_leader",
            "1 while this replica holds the lease and acts (or runs without leader election)",
            value=1.0 if self._leading() else 0.0,
        )


class _RefusalsCollector(Collector):
    """Every server's refusals in one family (one name may appear once in an exposition)."""

    def __init__(self) -> None:
        self.servers: dict[str, Callable[[], Mapping[str, int] | None]] = {}

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "reconciler_http_refused_requests",
            "Requests an HTTP server refused or cut, by reason: busy (too many connections), "
            "timeout, no_length, bad_length, too_large (Content-Length), unauthorized",
            labels=["server", "reason"],
        )
        for server, refusals in sorted(self.servers.items()):
            for reason, count in sorted((refusals() or {}).items()):
                family.add_metric([server, reason], float(count))
        yield family
