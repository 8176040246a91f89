"""Where a Pod's time goes, stage by stage, from the scheduler's own marks:
created -> seen -> admitted -> submitted -> Slurm allocated -> seen allocated -> bound.

A Pod's marks are kept only while it waits: they are handed on (`on_done`) and dropped when it
is bound, and dropped when it is deleted, so what is held follows the Pods waiting now, never
the history; past LIMIT waiting Pods a new one is not timed (counted in `untracked`). Pure but
for a lock: times are given by the callers, epoch seconds.

Two marks come in whole seconds: `created` (metadata.creationTimestamp) and `allocated`
(Slurm's start_time), so a stage that starts or ends on one of them reads up to 1 s off.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

STAGES = ("created", "seen", "admitted", "submitted", "allocated", "seen allocated", "bound")
LIMIT = 100_000  # Pods timed at once, at most


@dataclass(frozen=True)
class PodStages:
    """One bound Pod's marks: stage -> epoch seconds (a stage not marked is absent)."""

    uid: str
    times: Mapping[str, float]


StagesObserver = Callable[[PodStages], None]  # runs on a worker thread: cheap, never raises


class StageClock:
    def __init__(self, on_done: StagesObserver | None = None, limit: int = LIMIT) -> None:
        self.on_done = on_done
        self._limit = limit
        self._lock = threading.Lock()
        self._waiting: dict[str, dict[str, float]] = {}
        self.untracked = 0  # Pods not timed: LIMIT were waiting already

    def __len__(self) -> int:
        return len(self._waiting)

    def seen(self, uid: str, at: float, created: float | None) -> None:
        """The watch brought an unbound Pod: it is timed from here (once)."""
        with self._lock:
            if uid in self._waiting:
                return
            if len(self._waiting) >= self._limit:
                self.untracked += 1
                return
            marks = {"created": created} if created is not None else {}
            self._waiting[uid] = {**marks, "seen": at}

    def mark(self, uids: Iterable[str], stage: str, at: float) -> None:
        """The first time each waiting Pod reached `stage`; Pods not timed are skipped."""
        with self._lock:
            for uid in uids:
                marks = self._waiting.get(uid)
                if marks is not None:
                    marks.setdefault(stage, at)

    def bound(self, uid: str, at: float) -> None:
        with self._lock:
            marks = self._waiting.pop(uid, None)
        if marks is None:
            return
        marks.setdefault("bound", at)
        on_done = self.on_done
        if on_done is not None:
            on_done(PodStages(uid, MappingProxyType(marks)))

    def drop(self, uid: str) -> None:
        """The Pod is gone (or no longer ours to bind): its marks go."""
        with self._lock:
            self._waiting.pop(uid, None)


@dataclass(frozen=True)
class StageRow:
    label: str  # "seen -> admitted"
    count: int  # Pods that have both marks
    p50: float
    p99: float


def stage_table(records: Iterable[PodStages], stages: Sequence[str] = STAGES) -> list[StageRow]:
    """Per pair of consecutive stages, the p50 and p99 (seconds) over the Pods that have both
    marks; a pair no Pod has is left out. A mark in whole seconds can read earlier than the one
    before it (Slurm's start time truncated, before the submit returned): each mark counts as
    at least the one before it, the earliest the stage can truly have been reached."""
    ordered = [_monotone(r.times, stages) for r in records]
    rows: list[StageRow] = []
    for first, then in itertools.pairwise(stages):
        spans = sorted(t[then] - t[first] for t in ordered if first in t and then in t)
        if spans:
            rows.append(
                StageRow(f"{first} -> {then}", len(spans), percentile(spans, 50),
                         percentile(spans, 99))
            )  # fmt: skip
    return rows


def _monotone(times: Mapping[str, float], stages: Sequence[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    floor = -math.inf
    for stage in stages:
        if stage in times:
            floor = out[stage] = max(times[stage], floor)
    return out


def created_at(pod: Mapping[str, Any]) -> float | None:
    """The Pod's metadata.creationTimestamp in epoch seconds (whole seconds: the API server
    writes no fraction); None without one."""
    stamp = pod["metadata"].get("creationTimestamp")
    if not isinstance(stamp, str):
        return None
    try:
        created = datetime.fromisoformat(stamp)  # "2024-05-01T12:00:00Z" (Python 3.11+)
    except ValueError:
        return None
    return created.timestamp() if created.tzinfo is not None else None


def percentile(ordered: Sequence[float], pct: float) -> float:
    """Nearest rank over sorted values: the smallest value with `pct`% at or below it."""
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]
