"""The daemon's Pod scheduler over its life: made at start, or once Slurm answers (on a cluster
the daemon brings up from nothing, slurmrestd exists only after the first convergence, and
answers 502 until slurmctld does), given each applied revision's policies and power saving, and
made again when a revision changes what a running scheduler cannot take as it is (its names,
the namespaces it watches, accounting, ...: scheduler/settings.py restart_needed). A scheduler
made again adopts its jobs by their Pods' UIDs, as after any restart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from reconciler.daemon.converge import Converger
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.errors import ReconcilerError
from reconciler.scheduler.loop import PodScheduler
from reconciler.scheduler.settings import SchedulerSettings, restart_needed
from reconciler.sources import Revision

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SettingsFollower:
    """How the daemon takes each applied revision's scheduler settings (cli/run.py)."""

    settings_of: Callable[[Revision], SchedulerSettings | None]  # None: no scheduler
    connect: Callable[[SchedulerSettings], Callable[[], PodScheduler]]
    retry_seconds: float  # between tries to make it while Slurm does not answer


class SchedulerSlot:
    def __init__(
        self, converger: Converger, metrics: DaemonMetrics, stopping: threading.Event
    ) -> None:
        self._converger = converger
        self._metrics = metrics
        self._stopping = stopping
        self.current: PodScheduler | None = None
        self._later: tuple[Callable[[], PodScheduler], float] | None = None
        self._follow: SettingsFollower | None = None
        self._wanted: SchedulerSettings | None = None  # what it is made with, or being made
        # Bumped at each making again: an attach thread of older settings gives up.
        self._generation = 0
        self._converged = False  # a convergence ran: its policies, not the first revision's

    def make_later(self, connect: Callable[[], PodScheduler], retry_seconds: float) -> None:
        """Made by `connect` once slurmrestd answers (start() tries it, then every
        `retry_seconds`)."""
        self._later = (connect, retry_seconds)

    def follow(self, follow: SettingsFollower, first: SchedulerSettings | None) -> None:
        """Make it again when an applied revision changes its settings; `first`: the
        settings it is made with at start."""
        self._follow, self._wanted = follow, first

    def start(self) -> None:
        """The scheduler made at start; one to be made once Slurm answers is left to
        start_later()."""
        if self.current is not None:
            self.current.start()
            self._converger.scheduler_names = ", ".join(self.current.settings.names)

    def start_later(self) -> None:
        if self.current is None and self._later is not None:
            self._attach_in_thread(*self._later)

    def stop(self) -> None:
        if self.current is not None:
            self.current.stop()

    def converged(self, revision: Revision, failed: bool) -> None:
        """After a convergence: a failed revision leaves the converger's policies as they
        were, which before any success are none, so the scheduler keeps the ones it has."""
        self._converged = True
        if failed:
            return
        if self.current is not None:
            self.current.set_policies(self._converger.pod_policies)
            if self._converger.power_saving is not None:
                self.current.power.set_enabled(self._converger.power_saving)
        if self._follow is not None:
            self._follow_revision(revision, self._follow)

    def hooks_refusals(self) -> dict[str, int] | None:
        hooks = self.current.hooks if self.current is not None else None
        return hooks.refusals.snapshot() if hooks is not None else None

    def _follow_revision(self, revision: Revision, follow: SettingsFollower) -> None:
        wanted = follow.settings_of(revision)
        changed = restart_needed(self._wanted, wanted)
        if not changed:
            return
        log.info("daemon: revision %s changes the scheduler's %s: making it again",
                 revision.id[:12], ", ".join(changed))  # fmt: skip
        self._generation += 1
        self._wanted = wanted
        old, self.current = self.current, None
        if old is not None:
            old.stop()  # frees the hooks port the new one binds
        if wanted is None:
            self._converger.scheduler_names = ""
            log.info("daemon: scheduler.enabled is false: Pods are no longer scheduled")
            return
        self._attach_in_thread(follow.connect(wanted), follow.retry_seconds)

    def _attach_in_thread(self, connect: Callable[[], PodScheduler], every: float) -> None:
        threading.Thread(
            target=self.attach, args=(connect, every, self._generation),
            name="daemon-scheduler-connect", daemon=True,
        ).start()  # fmt: skip

    def attach(self, connect: Callable[[], PodScheduler], every: float, generation: int) -> None:
        """Make and start it, retrying every `every` seconds while Slurm does not answer."""
        said = ""
        while not self._stopping.is_set() and generation == self._generation:
            try:
                scheduler = self._started(connect)
            except ReconcilerError as error:
                # Unreachable, or reachable before slurmctld answers it (502, 504): either
                # way not yet. Said once per kind of answer, not once per try.
                if said != (kind := type(error).__name__):
                    log.warning("daemon: the scheduler waits for Slurm: %s; trying again "
                                "every %g s", error.message, every)  # fmt: skip
                    said = kind
                self._stopping.wait(every)
                continue
            if generation != self._generation:  # newer settings came while it was made
                scheduler.stop()
                return
            self.current = scheduler
            if self._stopping.is_set():  # the daemon's stop may have looked before this
                scheduler.stop()
            self._converger.scheduler_names = ", ".join(scheduler.settings.names)
            log.info("daemon: scheduling Pods as %s (answers to %s)", scheduler.settings.name,
                     self._converger.scheduler_names)  # fmt: skip
            return

    def _started(self, connect: Callable[[], PodScheduler]) -> PodScheduler:
        """Made and started, or none at all: its start reads Slurm's jobs, which fails while
        slurmctld is down behind a slurmrestd that answers, and a half-started one would
        hold the hooks port the next try binds."""
        scheduler = connect()
        if self._converged:
            scheduler.set_policies(self._converger.pod_policies)
        scheduler.observe(bind=self._metrics.observe_bind, slurm=self._metrics.observe_slurm)
        try:
            scheduler.start()
        except BaseException:
            scheduler.stop()
            raise
        return scheduler
