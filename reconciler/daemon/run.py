"""`reconciler run`: fetch the source on an interval, converge each new revision, resync the
applied one, sync node health both ways, and run the Pod scheduler beside it, all in one
process.

apscheduler runs the fetch and resync jobs on one worker thread, so a fetch and a resync never
converge at the same time; a directory source's watcher asks for a run at once when files
change. The node health sync has a worker of its own: a convergence waiting up to its drain
timeout must not hold up a drain for a cordoned Node. The Pod scheduler has threads of its own
and keeps scheduling while a revision is being applied. SIGTERM: the convergence and node sync
pass under way finish, then everything stops. Slurm's state for /metrics is read on a worker
of its own too (a read of every job may take seconds on a big cluster), and scrapes serve
what it last read.

With leader election, `leading` says whether this replica may act: every job asks it before it
starts, and /readyz and the reconciler_leader metric report it, so a replica resumed after a
pause neither acts nor claims to lead while its elector steps down.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from reconciler.adapters.http_server import (
    UNAUTHORIZED,
    GuardedHandler,
    GuardedServer,
    LengthRefused,
    Limits,
    body_length,
)
from reconciler.apply.upgrade_effects import UpgradePausedError
from reconciler.daemon.converge import Converger, Outcome
from reconciler.daemon.heap import trim_heap
from reconciler.daemon.metrics import CONVERGE_RESYNC, CONVERGE_REVISION, DaemonMetrics
from reconciler.daemon.scheduler_slot import SchedulerSlot
from reconciler.daemon.webhook import judge
from reconciler.errors import ReconcilerError, SourceError
from reconciler.scheduler.loop import PodScheduler
from reconciler.slurm_metrics.reader import SlurmMetricsReader, SlurmView
from reconciler.sources import Revision, Source
from reconciler.sources.directory import DirectorySource
from reconciler.sync.node_health_effects import NodeSync

log = logging.getLogger(__name__)

FETCH_JOB, RESYNC_JOB, NODE_SYNC_JOB = "fetch", "resync", "node-sync"
SLURM_METRICS_JOB = "slurm-metrics"
# compute.topology: a look every node sync interval, and the convergence it asks for.
TOPOLOGY_JOB, TOPOLOGY_CONVERGE_JOB = "topology", "topology-converge"


def _not_a_skipped_run(record: logging.LogRecord) -> bool:
    """A run skipped while the last still runs (a long apply) is the design, not a warning:
    the fetch says "applying" itself. Without this, one WARNING per interval."""
    return "maximum number of running instances reached" not in record.getMessage()


logging.getLogger("apscheduler.scheduler").addFilter(_not_a_skipped_run)


MAX_WEBHOOK_BYTES = 1024 * 1024  # GitHub caps a webhook payload at 25 MB; a push is kilobytes
HTTP_LIMITS = Limits(max_connections=64, max_body_bytes=MAX_WEBHOOK_BYTES)
PROBE_PATHS = frozenset({"/healthz", "/readyz"})  # also served past the cap


@dataclass(frozen=True)
class RunSettings:
    interval_seconds: float = 30.0
    resync_seconds: float = 300.0
    listen_host: str = "127.0.0.1"
    listen_port: int = 8080
    webhook_secret: bytes | None = None  # POST /webhook is served only with a secret
    branch: str = "main"  # the branch whose pushes the webhook acts on
    node_sync_seconds: float = 10.0  # node health, both ways; 0: off
    slurm_metrics_seconds: float = 30.0  # read Slurm for /metrics; 0: off
    http: Limits = HTTP_LIMITS

    def __repr__(self) -> str:
        return f"RunSettings(interval={self.interval_seconds}, resync={self.resync_seconds})"


class Daemon:
    def __init__(
        self,
        source: Source,
        converger: Converger,
        settings: RunSettings,
        *,
        scheduler: PodScheduler | None = None,
        node_sync: NodeSync | None = None,
        slurm_metrics: SlurmMetricsReader | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._source = source
        self._converger = converger
        converger.proceed = lambda: not self._stopping.is_set() and self._leading()
        self._settings = settings
        self._node_sync = node_sync
        self._slurm_metrics = slurm_metrics
        self._clock = clock
        self._leading: Callable[[], bool] = lambda: True  # alone: always
        self._initial: Revision | None = None  # converged first: the last applied revision
        self.waiting = ""  # why no revision could be used yet (for /readyz)
        self.metrics = DaemonMetrics()
        self._stopping = threading.Event()
        self.scheduler = SchedulerSlot(converger, self.metrics, self._stopping)
        self.scheduler.current = scheduler
        # Read at scrape time: attach() may bring the scheduler after the metrics exist.
        self.metrics.watch_scheduler(lambda: getattr(self.scheduler.current, "counters", None))
        self.metrics.watch_packing(lambda: getattr(self.scheduler.current, "fragmentation", None))
        self.metrics.watch_leader(lambda: self._leading())
        self.metrics.watch_slurm(self._slurm_view)
        names = ("default", NODE_SYNC_JOB, SLURM_METRICS_JOB, TOPOLOGY_JOB)
        self._jobs = BackgroundScheduler(
            executors={name: ThreadPoolExecutor(1) for name in names},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._tried: str | None = None  # the last revision id converged
        self._ready = threading.Event()
        self._http = GuardedServer(
            (settings.listen_host, settings.listen_port), self._handler_class(), settings.http,
            probes=self._probe,
        )  # fmt: skip
        self.metrics.watch_http("daemon", self._http.refusals.snapshot)
        self.metrics.watch_http("hooks", self.scheduler.hooks_refusals)
        self._serving = False

    def attach(
        self,
        *,
        scheduler: PodScheduler | None = None,
        node_sync: NodeSync | None = None,
        slurm_metrics: SlurmMetricsReader | None = None,
        initial: Revision | None = None,
    ) -> None:
        """What the first usable revision configures, known once it is found (health is
        served while the daemon looks for it); `initial`: converge this one first, the last
        revision applied, because the head could not be used."""
        self.scheduler.current = scheduler
        self._node_sync = node_sync
        self._slurm_metrics = slurm_metrics
        self._initial = initial

    def lead_with(self, leading: Callable[[], bool]) -> None:
        """Act only while `leading()` (a LeaderElector's)."""
        self._leading = leading

    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    # ---- lifecycle ----------------------------------------------------------------------

    def serve(self) -> None:
        """Health and metrics only (a follower waiting for the lease serves these too)."""
        if not self._serving:
            self._serving = True
            threading.Thread(
                target=self._http.serve_forever, name="daemon-http", daemon=True
            ).start()

    def start(self) -> None:
        """Everything: converge and schedule (the leader, or the only replica)."""
        self.serve()
        self.scheduler.start()
        now = datetime.now(UTC)
        self._jobs.add_job(
            self._fetch_and_converge, "interval", seconds=self._settings.interval_seconds,
            id=FETCH_JOB, next_run_time=now,
        )  # fmt: skip
        self._jobs.add_job(
            self._resync, "interval", seconds=self._settings.resync_seconds, id=RESYNC_JOB
        )
        if self._node_sync is not None and self._settings.node_sync_seconds > 0:
            self._jobs.add_job(
                self._sync_nodes, "interval", seconds=self._settings.node_sync_seconds,
                id=NODE_SYNC_JOB, executor=NODE_SYNC_JOB, next_run_time=now,
            )  # fmt: skip
        if self._slurm_metrics is not None and self._settings.slurm_metrics_seconds > 0:
            self._jobs.add_job(
                self._read_slurm, "interval",
                seconds=self._settings.slurm_metrics_seconds, id=SLURM_METRICS_JOB,
                executor=SLURM_METRICS_JOB, next_run_time=now,
            )  # fmt: skip
        if self._settings.node_sync_seconds > 0:
            self._jobs.add_job(
                self._look_at_topology, "interval", seconds=self._settings.node_sync_seconds,
                id=TOPOLOGY_JOB, executor=TOPOLOGY_JOB,
            )  # fmt: skip
        self._jobs.start()
        self.scheduler.start_later()
        if isinstance(self._source, DirectorySource):
            threading.Thread(
                target=self._watch_directory, args=(self._source,), name="daemon-watch",
                daemon=True,
            ).start()  # fmt: skip

    def stop(self) -> None:
        """Let the convergence under way finish, then stop everything."""
        self._stopping.set()
        if self._jobs.running:
            self._jobs.shutdown(wait=True)
            self.scheduler.stop()
        if self._node_sync is not None:
            self._node_sync.close()
        if self._slurm_metrics is not None:
            self._slurm_metrics.close()
        if self._serving:
            self._http.shutdown()
        self._http.server_close()

    def run_now(self) -> None:
        """Fetch and converge at once (a webhook, a changed directory)."""
        if not self._stopping.is_set() and self._jobs.running:
            self._jobs.modify_job(FETCH_JOB, next_run_time=datetime.now(UTC))

    # ---- the jobs -------------------------------------------------------------------------

    def _fetch_and_converge(self) -> None:
        if not self._leading():
            return
        if self._initial is not None:  # the head was unusable at start: first what is applied
            initial, self._initial = self._initial, None
            self._converge(initial, resync=False)
        revision = self._fetch()
        if revision is not None and revision.id != self._tried:
            self._converge(revision, resync=False)
        trim_heap()  # what the interval's work freed, back to the kernel (daemon/heap.py)

    def _resync(self) -> None:
        if not self._leading():
            return
        revision = self._fetch()
        if revision is not None:
            self._converge(revision, resync=revision.id == self._tried)

    def _fetch(self) -> Revision | None:
        try:
            return self._source.fetch()
        except SourceError as error:
            log.warning("daemon: fetching the config repo failed: %s", error)
            if error.revision:  # fetched, then refused: `reconciler status` must say so
                origin = getattr(self._source, "origin", "")
                refused = Revision(error.revision, Path(), origin, "refused by the source")
                outcome = self._converger.refused(refused, error)
                if outcome is not None:
                    self.metrics.record(outcome, self._clock())
            return None
        except ReconcilerError as error:
            log.warning("daemon: fetching the config repo failed: %s", error)
            return None

    def _converge(self, revision: Revision, *, resync: bool) -> Outcome | None:
        cpu = time.thread_time()  # a convergence runs on this thread alone
        try:
            outcome = self._converger.converge(revision, resync=resync)
        except UpgradePausedError as paused:  # stopping, or no longer leading: not tried
            log.info("daemon: %s", paused)
            return None
        cpu = time.thread_time() - cpu
        self._tried = revision.id
        self.scheduler.converged(revision, failed=outcome.state == "failed")
        kind = CONVERGE_RESYNC if resync else CONVERGE_REVISION
        self.metrics.record(outcome, self._clock(), kind=kind, cpu_seconds=cpu)
        self._ready.set()
        return outcome

    def _sync_nodes(self) -> None:
        assert self._node_sync is not None
        self._as_leader(self._node_sync.run_once, "the node health sync failed")

    def _read_slurm(self) -> None:
        assert self._slurm_metrics is not None
        self._as_leader(self._slurm_metrics.refresh, "reading Slurm for /metrics failed")

    def _as_leader(self, work: Callable[[], object], failed: str) -> None:
        """An interval job only the leader runs."""
        if not self._leading():
            return
        try:
            work()
        except Exception:  # a bug: keep the trace; the next interval tries again
            log.exception("daemon: %s", failed)

    def _slurm_view(self) -> SlurmView | None:
        """Slurm's series for a scrape: none where nothing reads Slurm (--slurm-metrics-interval
        0, or a follower, which never reads)."""
        return self._slurm_metrics.view() if self._slurm_metrics is not None else None

    def _look_at_topology(self) -> None:
        """compute.topology: converge now when the Nodes call for another topology.conf
        (on the convergence thread, so never beside another convergence)."""
        if not self._leading():
            return
        try:
            stale = self._converger.topology.stale()
        except ReconcilerError as error:
            log.warning("daemon: reading Nodes and slurmd Pods for topology.conf failed: %s", error)
            return
        if stale and not self._stopping.is_set():
            self._jobs.add_job(self._converge_topology, id=TOPOLOGY_CONVERGE_JOB,
                               replace_existing=True)  # fmt: skip

    def _converge_topology(self) -> None:
        if not self._leading():
            return
        revision = self._fetch()
        if revision is not None:
            self._converge(revision, resync=False)

    def _watch_directory(self, source: DirectorySource) -> None:
        while not self._stopping.is_set():
            if source.wait_for_change(self._stopping, timeout_ms=1000):
                self.run_now()

    # ---- HTTP: health, readiness, metrics, webhook --------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        daemon = self

        class Handler(GuardedHandler):
            def do_GET(self) -> None:
                self.answer(*daemon.answer(self.path))

            def do_POST(self) -> None:
                length = body_length(
                    self.headers, daemon._settings.http.max_body_bytes, required=True
                )
                if isinstance(length, LengthRefused):
                    self.refuse(length.status, length.reason, length.text)
                    return
                body = self.rfile.read(length)
                status, text = daemon.webhook(self.path, dict(self.headers.items()), body)
                if status == 401:
                    self.server.refusals.add(UNAUTHORIZED)
                self.answer(status, text.encode() + b"\n", "text/plain")

        return Handler

    def webhook(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str]:
        secret = self._settings.webhook_secret
        if path != "/webhook" or secret is None:
            return 404, "not found"
        if not self._leading():
            return 503, "this replica is not the leader"
        verdict = judge(headers, body, secret, self._settings.branch)
        if verdict.status != 401:  # refusals are counted (/metrics), not logged
            log.info("daemon: webhook: %s", verdict.message)
        if verdict.fetch:
            self.run_now()
        return verdict.status, verdict.message

    def _probe(self, path: str) -> tuple[int, bytes, str] | None:
        """What a connection past the cap is answered: the kubelet's probes only (each takes
        microseconds; /metrics and the webhook wait for a slot)."""
        return self.answer(path) if path in PROBE_PATHS else None

    def answer(self, path: str) -> tuple[int, bytes, str]:
        if path == "/healthz":
            return 200, b"ok\n", "text/plain"
        if path == "/readyz":
            return self._readiness()
        if path == "/metrics":
            return 200, generate_latest(self.metrics.registry), CONTENT_TYPE_LATEST
        return 404, b"not found\n", "text/plain"

    def _readiness(self) -> tuple[int, bytes, str]:
        if self.waiting:
            return 503, f"no usable revision yet: {self.waiting}\n".encode(), "text/plain"
        if not self._leading():
            return 503, b"not the leader: this replica waits for the lease\n", "text/plain"
        if self._ready.is_set():
            return 200, b"ok\n", "text/plain"
        return 503, b"the first revision has not been converged yet\n", "text/plain"
