"""Reads Slurm for /metrics on the daemon's interval and keeps what the last read gave, so a
scrape only serves what is kept and never waits for slurmctld.

Two sources. Where slurmctld serves its own OpenMetrics (Slurm 25.11+ with
`MetricsType=metrics/openmetrics`) at the URL the reader is given, one read is three GETs of
its totals (`openmetrics`), and no job list is read at all. Otherwise, or while those do not
answer (asked again every OPENMETRICS_RETRY_SECONDS), or where slurmrestd names a release
before 25.11 (whose slurmctld logs an error for each HTTP request), one read goes through
slurmrestd: a
ping (is slurmctld there), then every node, the jobs and the scheduler statistics; `figures`
turns them into families at once, and only the families are kept (a 50,000-job answer is not
held between reads). Which source gave the families is served beside them and
logged when it changes. A failed read keeps the last families: the snapshot's age, served
beside them, says how old they are, and `slurm_controller_up` says whether slurmctld answered.

Reading every job is what costs on REST (slurmrestd writes about 5 KB of JSON per job, which
is decoded here: bench/README.md has the figures), and slurmctld and slurmrestd pay it while
the scheduler waits on them. So the job states are read first (`GET /jobs/state/`, ids and
states): above `job_detail_limit` jobs that is all that is read, and jobs are counted per
state alone (no partition, no pending reason; `job_count_families`). At or below it, and on
v0.0.38 (no state list), jobs are read as summaries
(`job_summaries()`: each job's object is reduced to its state, partition and reason as soon
as it is decoded), so the read's memory is that of one job's JSON at a time, not of the whole
list. A read that took S seconds is not started again before PAUSE_FACTOR x S seconds have
passed: on a cluster whose read outgrows the interval, the daemon and slurmrestd spend at most
a quarter of their time on it, and the snapshot's age grows instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from reconciler.adapters.slurm.model import CAN_LIST_JOB_STATES, SlurmRestApi
from reconciler.adapters.slurmctld_metrics import SlurmctldMetrics
from reconciler.errors import ReconcilerError, SlurmctldMetricsLimitError
from reconciler.slurm_metrics.figures import (
    Family,
    diag_families,
    job_count_families,
    job_families,
    node_families,
)
from reconciler.slurm_metrics.openmetrics import ENDPOINTS, ExpositionError, openmetrics_families
from reconciler.slurm_release import OPENMETRICS_SINCE, SlurmRelease, maybe_release

log = logging.getLogger(__name__)

PAUSE_FACTOR = 3.0  # after a read of S seconds, the next starts S x this later at the soonest
# After slurmctld's OpenMetrics did not answer, reads go through slurmrestd for this long: a
# slurmctld without them (before 25.11, or no MetricsType) is not asked every interval.
OPENMETRICS_RETRY_SECONDS = 300.0
SOURCE_OPENMETRICS, SOURCE_REST = "openmetrics", "rest"
SOURCES = (SOURCE_OPENMETRICS, SOURCE_REST)
# Above this many jobs a REST read counts them per state only: the whole list of 2,000 jobs
# is 10 to 25 MB that slurmrestd writes in 2 s idle, 25 s saturated, on 24.11 (docs/metrics.md).
JOB_DETAIL_LIMIT = 2000


@dataclass(frozen=True)
class SlurmView:
    """What a scrape serves: the families of the last complete read and how it stands."""

    families: tuple[Family, ...]  # () before the first complete read
    read_at: float | None  # epoch seconds the last complete read ended; None: none yet
    read_seconds: float  # how long that read took (Slurm's answers and the figures)
    controller_up: bool  # slurmctld answered the last ping
    failures: int  # reads that failed since the daemon started
    began_at: float  # the first read's start: the snapshot's age before any read completed
    source: str = SOURCE_REST  # SOURCES: where the last read (complete or not) went
    job_detail: bool = True  # the job families have partitions and reasons (False: per state)

    def age(self, now: float) -> float:
        return max(now - (self.read_at if self.read_at is not None else self.began_at), 0.0)


class SlurmMetricsReader:
    def __init__(
        self,
        api: SlurmRestApi,
        *,
        openmetrics: SlurmctldMetrics | None = None,
        clock: Callable[[], float] = time.time,
        job_detail_limit: int = JOB_DETAIL_LIMIT,
    ) -> None:
        """OPENMETRICS: slurmctld's endpoints, read instead of API while they answer.
        JOB_DETAIL_LIMIT: above this many jobs, REST reads count them per state only."""
        self._api = api
        self._job_detail_limit = job_detail_limit
        self._job_detail = True  # the last REST read's; a change is logged
        self._openmetrics = openmetrics
        self._clock = clock
        self._view: SlurmView | None = None  # replaced whole: a scrape reads one or the other
        self._said = ""  # the failure last logged: a failing Slurm is logged once, not per read
        self._source = ""  # the source last logged
        self._ask_openmetrics_at = 0.0  # epoch seconds; after a failure, OPENMETRICS_RETRY later
        self._cut_off = False  # the last OpenMetrics read went past its limit (counted failed)
        self._lock = threading.Lock()  # one read at a time (the interval job, a test)

    def view(self) -> SlurmView | None:
        """None until the first read began (a follower, which never reads, serves nothing)."""
        return self._view

    def refresh(self) -> SlurmView:
        """One read, unless the last complete one ended less than PAUSE_FACTOR times its
        duration ago; a Slurm that fails is logged and counted, never raised."""
        with self._lock:
            began = self._clock()
            last = self._view or SlurmView((), None, 0.0, False, 0, began)
            if last.read_at is not None and began < last.read_at + PAUSE_FACTOR * last.read_seconds:
                return last
            started = time.perf_counter()
            families, source = self._from_openmetrics(began), SOURCE_OPENMETRICS
            # slurmctld's answer went past its limit: a failed read, though REST may answer
            # (a read that fails on both counts once)
            failures = last.failures + int(self._cut_off)
            if families is None:
                source = SOURCE_REST
                if self._openmetrics is None:
                    self._switch(SOURCE_REST, "no slurmctld OpenMetrics URL given")
                try:
                    self._api.ping()
                except ReconcilerError as error:
                    return self._failed(last, "ping", error, controller_up=False, source=source)
                try:
                    families = self._from_rest()
                except ReconcilerError as error:
                    return self._failed(last, "read", error, controller_up=True, source=source)
            seconds = time.perf_counter() - started
            detail = self._job_detail or source == SOURCE_OPENMETRICS
            self._view = SlurmView(
                families, self._clock(), seconds, True, failures, last.began_at, source,
                detail,
            )  # fmt: skip
            if self._said:
                log.info("slurm metrics: Slurm answers again (read in %.2f s)", seconds)
                self._said = ""
            return self._view

    def _from_rest(self) -> tuple[Family, ...]:
        # slurm_families' order; each answer goes as soon as its families are made
        nodes = node_families(self._api.nodes().items)
        jobs = self._job_families()
        return (*nodes, *jobs, *diag_families(self._api.diag()))

    def _job_families(self) -> tuple[Family, ...]:
        """Every job in full (partition, pending reason) up to the limit; above it, jobs per
        state from the state list alone, and the whole list is not read."""
        if CAN_LIST_JOB_STATES not in self._api.capabilities:  # v0.0.38: the list or nothing
            return job_families(self._api.job_summaries())
        counts = self._api.job_state_counts()
        total = sum(counts.values())
        detail = total <= self._job_detail_limit
        if detail != self._job_detail:
            self._job_detail = detail
            if detail:
                log.info(
                    "slurm metrics: %d jobs, at most %d: jobs are read in full again "
                    "(partitions, pending reasons)", total, self._job_detail_limit,
                )  # fmt: skip
            else:
                log.warning(
                    "slurm metrics: %d jobs, more than %d (--slurm-metrics-job-detail-limit): "
                    "jobs are counted per state only (slurm_jobs in partition '*', no "
                    "slurm_jobs_pending or slurm_jobs_held) and Slurm's whole job list is not "
                    "read; Slurm 25.11's OpenMetrics give them without it",
                    total, self._job_detail_limit,
                )  # fmt: skip
        if not detail:
            return job_count_families(counts)
        return job_families(self._api.job_summaries())

    def _from_openmetrics(self, now: float) -> tuple[Family, ...] | None:
        """The families from slurmctld's OpenMetrics; None where they are not asked or did
        not answer (then REST reads, and they are asked again OPENMETRICS_RETRY_SECONDS on)."""
        self._cut_off = False
        if self._openmetrics is None or now < self._ask_openmetrics_at:
            return None
        where = self._openmetrics.url
        release = self._known_release()
        if release is not None and release < OPENMETRICS_SINCE:
            self._switch(SOURCE_REST, f"Slurm {release} serves no OpenMetrics (Slurm "
                         f"{OPENMETRICS_SINCE.series} does): {where} is not asked")  # fmt: skip
            return None
        try:
            families = openmetrics_families(self._openmetrics.read(ENDPOINTS))
        except (ReconcilerError, ExpositionError) as error:
            self._ask_openmetrics_at = now + OPENMETRICS_RETRY_SECONDS
            said = error.message if isinstance(error, ReconcilerError) else str(error)
            # Cut off past its limit: not a slurmctld without OpenMetrics, but one (or what
            # answers in its place) sending more than a cluster's figures; worth a warning.
            self._cut_off = isinstance(error, SlurmctldMetricsLimitError)
            self._switch(SOURCE_REST, f"slurmctld's OpenMetrics at {where}: {said}; asked "
                         f"again every {OPENMETRICS_RETRY_SECONDS:g} s",
                         level=logging.WARNING if self._cut_off else logging.INFO)  # fmt: skip
            return None
        self._switch(SOURCE_OPENMETRICS, f"slurmctld's OpenMetrics at {where}")
        return families

    def _known_release(self) -> SlurmRelease | None:
        """The release slurmrestd's answers named (one ping the first time; REST reads keep
        it current); None when unknown, and OpenMetrics are asked."""
        try:
            return maybe_release(self._api.slurm_version)
        except ReconcilerError:
            return None

    def _switch(self, source: str, why: str, *, level: int = logging.INFO) -> None:
        """Logs the source once, when it changes."""
        if source != self._source:
            how = "from" if source == SOURCE_OPENMETRICS else "through slurmrestd:"
            log.log(level, "slurm metrics: reading Slurm %s %s", how, why)
            self._source = source

    def _failed(
        self,
        last: SlurmView,
        step: str,
        error: ReconcilerError,
        *,
        controller_up: bool,
        source: str,
    ) -> SlurmView:
        said = f"{step}: {error}"
        if said != self._said:
            log.warning("slurm metrics: reading Slurm failed (%s); serving the last read", said)
            self._said = said
        self._view = SlurmView(
            last.families, last.read_at, last.read_seconds, controller_up, last.failures + 1,
            last.began_at, source, last.job_detail,
        )  # fmt: skip
        return self._view

    def close(self) -> None:
        self._api.close()
        if self._openmetrics is not None:
            self._openmetrics.close()
