"""`reconciler run`: fetch the source on an interval, converge each new revision, resync the
applied one, sync node health both ways, and run the Pod scheduler beside it, all in one
process.

apscheduler runs the fetch and resync jobs on one worker thread, so a fetch and a resync never
converge at the same time; a directory source's watcher asks for a run at once when files
change. The node health sync has a worker of its own: a convergence waiting up to its drain
timeout must not hold up a drain for a cordoned Node. The Pod scheduler has threads of its own
and keeps scheduling while a revision is being applied. SIGTERM: the convergence and node sync
pass under way finish, then everything stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from reconciler.daemon.converge import Converger, Outcome
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.daemon.webhook import judge
from reconciler.errors import ReconcilerError, SourceError
from reconciler.scheduler.loop import PodScheduler
from reconciler.sources import Revision, Source
from reconciler.sources.directory import DirectorySource
from reconciler.sync.node_sync import NodeSync

log = logging.getLogger(__name__)

FETCH_JOB, RESYNC_JOB, NODE_SYNC_JOB = "fetch", "resync", "node-sync"
# apscheduler logs two INFO lines per run of a job; the node sync runs every few seconds and
# logs what it changes itself, so its executor's lines would only bury that.
logging.getLogger(f"apscheduler.executors.{NODE_SYNC_JOB}").setLevel(logging.WARNING)


MAX_WEBHOOK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class RunSettings:
    interval_seconds: float = 30.0
    resync_seconds: float = 300.0
    listen_host: str = "127.0.0.1"
    listen_port: int = 8080
    webhook_secret: bytes | None = None  # POST /webhook is served only with a secret
    branch: str = "main"  # the branch whose pushes the webhook acts on
    node_sync_seconds: float = 10.0  # node health, both ways; 0: off

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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._source = source
        self._converger = converger
        self._settings = settings
        self._pod_scheduler = scheduler
        self._node_sync = node_sync
        self._clock = clock
        self.metrics = DaemonMetrics()
        self.metrics.watch_scheduler(lambda: scheduler.counters if scheduler else None)
        self.metrics.watch_packing(lambda: scheduler.fragmentation if scheduler else None)
        self._jobs = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(1), NODE_SYNC_JOB: ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._tried: str | None = None  # the last revision id converged
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._http = ThreadingHTTPServer(
            (settings.listen_host, settings.listen_port), self._handler_class()
        )
        self._http.daemon_threads = True
        self._serving = False

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
        if self._pod_scheduler is not None:
            self._pod_scheduler.start()
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
        self._jobs.start()
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
            if self._pod_scheduler is not None:
                self._pod_scheduler.stop()
        if self._node_sync is not None:
            self._node_sync.close()
        if self._serving:
            self._http.shutdown()
        self._http.server_close()

    def run_now(self) -> None:
        """Fetch and converge at once (a webhook, a changed directory)."""
        if not self._stopping.is_set():
            self._jobs.modify_job(FETCH_JOB, next_run_time=datetime.now(UTC))

    # ---- the jobs -------------------------------------------------------------------------

    def _fetch_and_converge(self) -> None:
        revision = self._fetch()
        if revision is not None and revision.id != self._tried:
            self._converge(revision, resync=False)

    def _resync(self) -> None:
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

    def _converge(self, revision: Revision, *, resync: bool) -> Outcome:
        outcome = self._converger.converge(revision, resync=resync)
        if self._pod_scheduler is not None:
            self._pod_scheduler.set_policies(self._converger.pod_policies)
        self._tried = revision.id
        self.metrics.record(outcome, self._clock())
        self._ready.set()
        return outcome

    def _sync_nodes(self) -> None:
        assert self._node_sync is not None
        try:
            self._node_sync.run_once()
        except Exception:  # a bug: keep the trace; the next interval tries again
            log.exception("daemon: the node health sync failed")

    def _watch_directory(self, source: DirectorySource) -> None:
        while not self._stopping.is_set():
            if source.wait_for_change(self._stopping, timeout_ms=1000):
                self.run_now()

    # ---- HTTP: health, readiness, metrics -----------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        daemon = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body, kind = daemon.answer(self.path)
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = min(int(self.headers.get("Content-Length") or 0), MAX_WEBHOOK_BYTES)
                body = self.rfile.read(length)
                status, text = daemon.webhook(self.path, dict(self.headers.items()), body)
                payload = text.encode() + b"\n"
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler

    def webhook(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, str]:
        secret = self._settings.webhook_secret
        if path != "/webhook" or secret is None:
            return 404, "not found"
        verdict = judge(headers, body, secret, self._settings.branch)
        log.info("daemon: webhook: %s", verdict.message)
        if verdict.fetch:
            self.run_now()
        return verdict.status, verdict.message

    def answer(self, path: str) -> tuple[int, bytes, str]:
        if path == "/healthz":
            return 200, b"ok\n", "text/plain"
        if path == "/readyz":
            if self._ready.is_set():
                return 200, b"ok\n", "text/plain"
            return 503, b"the first revision has not been converged yet\n", "text/plain"
        if path == "/metrics":
            return 200, generate_latest(self.metrics.registry), CONTENT_TYPE_LATEST
        return 404, b"not found\n", "text/plain"
