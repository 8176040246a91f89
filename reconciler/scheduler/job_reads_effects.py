"""The scheduler's reads of Slurm's jobs into the cache (state.py): the safety-net poll, the
whole list, and the read of one job.

Slurm's whole job list is read only at start, after a gap (no poll succeeded for GAP_SECONDS)
and while a submit of unknown outcome waits for it (job_reads_decide.list_needed), and then
streamed and filtered to placeholder jobs (`jobs_where`): held in memory are our jobs, not
Slurm's history. In between, on slurmrestd v0.0.40+, a poll is `GET /jobs/state/` and a GET of
each job of ours whose state moved. slurmrestd 22.05 (v0.0.38) has no state list:
there the poll is `GET /jobs?update_time=`, one 304 while nothing changed and the whole list
otherwise.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from reconciler.adapters.slurm.model import CAN_LIST_JOB_STATES, SlurmJob, SlurmRestApi
from reconciler.adapters.slurm.transport import DEFAULT_TIMEOUT_SECONDS
from reconciler.errors import ReconcilerError
from reconciler.kuberules.integers import shown
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.counters import Counters
from reconciler.scheduler.decide.job_reads_decide import list_needed, look_at_states
from reconciler.scheduler.decide.jobindex import merge_listing
from reconciler.scheduler.decide.placeholder import parse_job_name
from reconciler.scheduler.job_trust import JobTrust
from reconciler.scheduler.state import SchedulerState
from reconciler.scheduler.workqueue import WorkQueue

log = logging.getLogger(__name__)

POLL_DUTY = 5.0  # the safety-net poll waits at least this many times what its last list took
GAP_SECONDS = 60.0  # no poll succeeded for this long (or 3 intervals): read the whole list
READERS = 4  # GETs of moved jobs in flight at once
# When a key learned something is kept this long: longer than any read in flight (30 s timeout)
LEARNED_SECONDS = 2 * DEFAULT_TIMEOUT_SECONDS


class JobReads:
    def __init__(
        self,
        state: SchedulerState,
        slurm: SlurmClients,
        trust: JobTrust,
        queue: WorkQueue,
        counters: Counters,
        *,
        poll_seconds: float,
        repack: threading.Event,
    ) -> None:
        self._state = state
        self._slurm = slurm
        self._trust = trust
        self._queue = queue
        self.counters = counters
        self._poll_seconds = poll_seconds
        self._repack = repack
        self.lock = threading.Lock()  # the poll thread and the start watch share it
        self._jobs_since: int | None = None  # v0.0.38's update_time
        self._listed_once = False
        self._last_ok: float | None = None  # when a poll last succeeded (monotonic)
        self.pods_listed = False  # our Pods' records are known: duplicates may be cancelled
        # the first job list, merged again once the Pods' records are known
        self._first_listing: tuple[tuple[SlurmJob, ...], float] | None = None
        self._readers = ThreadPoolExecutor(READERS, thread_name_prefix="scheduler-poll-read")

    # ---- the poll ---------------------------------------------------------------------

    def poll_forever(self, stopping: threading.Event, poll: Callable[[], None]) -> None:
        """Every poll interval, `poll`: this object's `poll`, called through its owner
        (PodScheduler._poll_jobs, which the benchmark wraps)."""
        wait = self._poll_seconds
        while not stopping.wait(wait):
            began = time.monotonic()
            try:
                poll()
            except ReconcilerError as exc:
                log.warning("scheduler: polling Slurm jobs failed: %s", exc)
            except Exception as exc:  # one poll's fault, whatever it is: the next one runs
                log.warning(
                    "scheduler: polling Slurm jobs failed: %s: %s",
                    type(exc).__name__, shown(str(exc)),
                )  # fmt: skip
            wait = poll_wait(self._poll_seconds, time.monotonic() - began)
        self._readers.shutdown(wait=False)

    def poll(self) -> None:
        """A look at our jobs in Slurm: the whole list where one is needed, else the cheapest
        look the server offers."""
        with self.lock:
            self.counters.polls += 1
            api = self._slurm.operator
            if CAN_LIST_JOB_STATES not in api.capabilities:
                self._poll_update_time(api)
            elif self._list_needed():
                self._read_list(api)
            else:
                self._poll_states(api)
            self._last_ok = time.monotonic()

    def pods_known(self) -> None:
        """The Pods' records are in the cache: the first list again (which job is whose)."""
        with self.lock:
            self.pods_listed = True
            first, self._first_listing = self._first_listing, None
            if first is not None:  # not read twice: on a busy Slurm it is megabytes
                self._take_listing(*first)
        if first is None:
            self.poll()

    def _list_needed(self) -> bool:
        gap_seconds = max(GAP_SECONDS, 3 * self._poll_seconds)
        gap = self._last_ok is not None and time.monotonic() - self._last_ok > gap_seconds
        with self._state.lock:
            uncertain, listed_at = dict(self._state.uncertain), self._state.listed_at
        return list_needed(
            listed_once=self._listed_once, gap=gap, uncertain=uncertain, listed_at=listed_at
        )

    def _read_list(self, api: SlurmRestApi) -> None:
        sent = time.monotonic()
        snapshot = api.jobs_where(is_placeholder)
        self._listed(snapshot.items, sent)

    def _poll_update_time(self, api: SlurmRestApi) -> None:
        """v0.0.38: one 304 when nothing changed; otherwise the whole list."""
        sent = time.monotonic()
        if self._jobs_since is None:
            snapshot = api.jobs_where(is_placeholder)
        else:
            changed = api.jobs(since=self._jobs_since)
            if changed is None:
                self.counters.polls_unchanged += 1
                with self._state.lock:
                    self._state.listed_at = sent  # no job was made since the last list either
                return
            snapshot = changed
        self._jobs_since = snapshot.as_of
        self._listed(snapshot.items, sent)

    def _listed(self, items: tuple[SlurmJob, ...], sent: float) -> None:
        self._listed_once = True
        if not self.pods_listed:
            self._first_listing = (items, sent)
        self._take_listing(items, sent)

    def _take_listing(self, items: tuple[SlurmJob, ...], sent: float) -> None:
        """A job list asked for at `sent` into the cache; the keys it changed looked at."""
        owner = self._trust.ownership()
        state = self._state
        with state.lock:
            merged = merge_listing(
                state.jobs, state.learned, items, sent=sent, owner=owner,
                records=state.records_locked, abandoned=state.abandoned,
                submitting=state.submitting,
            )  # fmt: skip
            state.take_listing_locked(merged, sent)
        for uid in [*merged.changed, *merged.vanished]:
            job = merged.jobs.get(uid)  # a started job's Pod is a bind: it waits behind no new Pod
            self._queue.add(uid, urgent=job is not None and job.state == "RUNNING")
        if merged.changed:
            self._repack.set()  # jobs started or ended: the fullest nodes changed
        if self.pods_listed:  # which job is a duplicate needs the Pods' records
            self._trust.cancel_extras(merged.extras)

    def _poll_states(self, api: SlurmRestApi) -> None:
        """Every job's state (a few ms), then a GET of each job of ours whose state moved."""
        sent = time.monotonic()
        states = api.job_states()
        state = self._state
        with state.lock:
            fresh = {key for key, at in state.learned.items() if at > sent}
            look = look_at_states(
                dict(state.jobs), states, skip=fresh | state.submitting,
                start_watched=state.start_watched_locked(),
            )  # fmt: skip
        reads = [self._readers.submit(self.refresh, k, i, api) for k, i in look.reread.items()]
        for read in reads:
            try:
                read.result()
            except ReconcilerError as exc:  # the next poll sees the state moved still
                log.warning("scheduler: reading a job whose state moved failed: %s", exc)
        with state.lock:
            for key, job_id in look.vanished.items():
                if (job := state.jobs.get(key)) is not None and job.job_id == job_id:
                    state.vanished[key] = job_id
            for key in look.purged:
                if state.learned.get(key, 0) <= sent:
                    state.jobs.pop(key, None)  # it ended (we saw it) and Slurm purged it
            state.prune_locked(sent - LEARNED_SECONDS, states)  # memory follows our Pods
        for key in [*look.vanished, *look.purged]:
            self._queue.add(key)
        if look.reread:
            self._repack.set()
        if not (look.reread or look.vanished or look.purged):
            self.counters.polls_unchanged += 1

    # ---- one job ------------------------------------------------------------------------

    def refresh(self, key: str, job_id: int, api: SlurmRestApi) -> None:
        """The job as Slurm has it now, unless the key has moved on or learned more meanwhile
        (a hook, a list): then that is newer. A job Slurm no longer has is left to the next
        look, which confirms it gone (job_trust.py)."""
        asked = time.monotonic()
        job = api.job(job_id)
        if job is None:
            return
        state = self._state
        with state.lock:
            current = state.jobs.get(key)
            if current is None or current.job_id != job_id or state.learned.get(key, 0) > asked:
                return
            state.record_locked(key, job)
        self._queue.add(key, urgent=job.state == "RUNNING")  # a bind waits behind no new Pod


def is_placeholder(job: SlurmJob) -> bool:
    """Named (or admin-commented) as a placeholder of some scheduler: ownership.py decides
    whose; any other job is dropped as the list is read."""
    return parse_job_name(job.name) is not None or parse_job_name(job.admin_comment) is not None


def poll_wait(interval: float, took: float) -> float:
    """The safety-net poll's next wait: the interval, but never less than POLL_DUTY times what
    the last poll took. On a busy Slurm a change-guarded list is the whole list (12.5 KiB a job
    on v0.0.42); at 3,500 jobs, a list every 5 s from us and the scale benchmark's checks kept
    slurmctld so busy that it timed out (bench/README.md, "Daemon at scale")."""
    return max(interval, POLL_DUTY * took)
