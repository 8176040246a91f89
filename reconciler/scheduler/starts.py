"""Binding on Slurm's allocation: while placeholder jobs we submitted are PENDING, ask Slurm
often which of them it started, so their Pods are bound as soon as Slurm allocates the node,
not when the job's script has been launched and has called the `started` hook (on a busy
machine that came seconds later).

On slurmrestd v0.0.40+ a look is `GET /jobs/state/` (ids and states, a few ms), then a GET of
each job that left PENDING (its nodes), READERS at a time: never the whole list, which on a
busy Slurm is megabytes. v0.0.38 has no state list: a look is the
`update_time`-guarded poll, 304 while nothing changed.

Adaptive: every FAST_SECONDS while a pending job is young (submitted within YOUNG_SECONDS:
slurmctld allocates on its own tick, about once a second, so a new job usually starts within
one); once every pending job is older (they wait for resources), each look that finds nothing
waits longer, up to SLOW_SECONDS. Never sooner than DUTY times the last look's own duration, so
a loaded slurmrestd is not asked faster than it answers. With nothing pending it sleeps until
the next submit. A job's `started` hook makes it look at once (still paced): the hook is a
hint, never believed itself, and only scripts of jobs an older version submitted still send it
(placeholder.py). The safety-net poll stays: whichever tells first binds the Pod.

The job holds the node from its allocation until the Pod is gone, script started or not: a
Pod deleted before the script starts is released like any other (its job is cancelled once
the Pod is gone, or kill-wait after the delete), and a cancelled job whose script never ran
has nothing to wait for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from reconciler.adapters.slurm.model import CAN_LIST_JOB_STATES, SlurmRestApi
from reconciler.errors import ReconcilerError
from reconciler.scheduler.counters import Counters
from reconciler.scheduler.state import SchedulerState
from reconciler.scheduler.workqueue import WorkQueue

log = logging.getLogger(__name__)

FAST_SECONDS = 0.2
SLOW_SECONDS = 2.0
YOUNG_SECONDS = 10.0
BACKOFF = 1.5  # the wait grows by this after a look that found no job started
DUTY = 3.0  # wait at least this many times the last look's own duration
READERS = 4  # GETs of started jobs in flight at once: a burst's starts are read in parallel


class StartWatch:
    def __init__(
        self,
        state: SchedulerState,
        operator: Callable[[], SlurmRestApi],
        queue: WorkQueue,
        counters: Counters,
        *,
        poll_all: Callable[[], None],
        read_back: Callable[[str, int, SlurmRestApi], None],
        repack: threading.Event,
        stopping: threading.Event,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._state = state
        self._operator = operator  # the scheduler's operator client (tests may swap it)
        self._queue = queue
        self.counters = counters
        self._poll_all = poll_all  # the safety-net poll, update_time-guarded
        self._read_back = read_back  # a GET of one job into the cache (job_reads_effects.py)
        self._repack = repack
        self._stopping = stopping
        self._clock = clock  # epoch seconds, as Slurm's submit times
        self._submitted = threading.Event()
        self._hinted = threading.Event()  # a job's script said it started: look now
        self._wait = FAST_SECONDS
        self._spent = 0.0  # what the last look's state list took: the pace slurmrestd allows
        self._looked = 0.0  # when the last look began (monotonic)
        self._readers = ThreadPoolExecutor(READERS, thread_name_prefix="scheduler-starts-read")

    def nudge(self) -> None:
        """A job was submitted: look soon."""
        self._submitted.set()

    def look_now(self) -> None:
        """A job's `started` hook: look without waiting (paced by DUTY all the same)."""
        self._hinted.set()

    def run_forever(self, idle_seconds: float) -> None:
        while not self._stopping.is_set():
            if not self._pending():
                self._submitted.wait(idle_seconds)
                self._submitted.clear()
                self._wait = FAST_SECONDS
                continue
            self._submitted.clear()
            self._hinted.wait(self._wait)
            self._hinted.clear()
            self._stopping.wait(max(0.0, self._looked + DUTY * self._spent - time.monotonic()))
            self._looked = time.monotonic()
            try:
                found = self.look()
            except ReconcilerError as exc:
                log.warning("scheduler: looking for started jobs failed: %s", exc)
                found = 0
            self._wait = self._next_wait(found, self._spent)
        self._readers.shutdown(wait=False)

    def _next_wait(self, found: int, spent: float) -> float:
        young = self._clock() - YOUNG_SECONDS
        with self._state.lock:
            fresh = any(
                j.state == "PENDING" and j.submit_time >= young for j in self._state.jobs.values()
            )
        wait = FAST_SECONDS if found or fresh else min(self._wait * BACKOFF, SLOW_SECONDS)
        return max(wait, DUTY * spent)

    def look(self) -> int:
        """One look; how many pending jobs it found started (or otherwise moved on)."""
        pending = self._pending()
        if not pending:
            return 0
        self.counters.start_looks += 1
        api = self._operator()
        began = time.monotonic()
        if CAN_LIST_JOB_STATES not in api.capabilities:  # 22.05: the update_time poll
            self._poll_all()
            self._spent = time.monotonic() - began
            moved = self._moved(pending)
        else:
            states = api.job_states()
            self._spent = time.monotonic() - began
            moved = [i for i in pending if states.get(i, "PENDING") != "PENDING"]
            reads = [self._readers.submit(self._refresh, pending[i], i, api) for i in moved]
            for read in reads:
                read.result()  # a failed read raises here: logged, the next look retries
        if moved:
            self.counters.starts_seen += len(moved)
            self._repack.set()  # jobs started: the fullest nodes changed
        return len(moved)

    def _moved(self, pending: dict[int, str]) -> list[int]:
        """Of `pending` (job id -> key), the jobs the cache no longer holds PENDING."""
        with self._state.lock:
            jobs = self._state.jobs
            return [
                i for i, key in pending.items()
                if (job := jobs.get(key)) is None or job.job_id != i or job.state != "PENDING"
            ]  # fmt: skip

    def _pending(self) -> dict[int, str]:
        """Job id -> key, of the PENDING jobs we hold for Pods (or gangs)."""
        with self._state.lock:
            return self._state.start_watched_locked()

    def _refresh(self, key: str, job_id: int, api: SlurmRestApi) -> None:
        """One started job read back (the benchmark wraps it: keep the name)."""
        self._read_back(key, job_id, api)
