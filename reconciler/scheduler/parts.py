"""The parts a Pod's steps (pod_effects.py) and a gang's (gang_effects.py) act through: both
paths share one of each, so neither has a cache, a queue or an effects object of its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reconciler.scheduler.effects import Effects
from reconciler.scheduler.intake import Intake
from reconciler.scheduler.job_trust import JobTrust
from reconciler.scheduler.placement import Placement
from reconciler.scheduler.settings import SchedulerSettings
from reconciler.scheduler.state import SchedulerState
from reconciler.scheduler.workqueue import WorkQueue


@dataclass(frozen=True)
class Parts:
    state: SchedulerState
    effects: Effects
    intake: Intake
    placement: Placement
    trust: JobTrust
    queue: WorkQueue
    settings: SchedulerSettings
    clock: Callable[[], float]
