"""Where a Pod's time goes: the per-Pod marks are kept only while the Pod waits,
and the table is each stage's p50/p99 over the bound Pods."""

from __future__ import annotations

import dataclasses
from typing import Any

from reconciler.scheduler.decide.jobindex import Merged
from reconciler.scheduler.stages import (
    STAGES,
    PodStages,
    StageClock,
    StageRow,
    created_at,
    percentile,
    stage_table,
)
from reconciler.scheduler.state import SchedulerState
from tests.unit.test_scheduler_jobindex import job


def test_a_bound_pod_hands_on_its_marks_and_they_are_dropped() -> None:
    done: list[PodStages] = []
    clock = StageClock(done.append)
    clock.seen("a", 10.0, created=9.0)
    clock.mark(["a"], "admitted", 10.5)
    clock.mark(["a"], "admitted", 11.0)  # the first time counts: a retry does not move it
    clock.mark(["a", "not-timed"], "submitted", 12.0)
    clock.bound("a", 13.0)
    assert len(clock) == 0
    assert [(d.uid, dict(d.times)) for d in done] == [
        ("a", {"created": 9.0, "seen": 10.0, "admitted": 10.5, "submitted": 12.0, "bound": 13.0})
    ]
    clock.bound("a", 14.0)  # bound twice (a watch replay): told once
    assert len(done) == 1


def test_a_deleted_pod_leaves_nothing_and_memory_follows_the_waiting_pods() -> None:
    done: list[PodStages] = []
    clock = StageClock(done.append)
    for wave in range(50):  # history: 50 waves of 100 Pods, each bound or deleted
        for i in range(100):
            clock.seen(f"{wave}-{i}", float(wave), created=None)
        for i in range(100):
            if i % 2:
                clock.bound(f"{wave}-{i}", float(wave) + 1)
            else:
                clock.drop(f"{wave}-{i}")
        assert len(clock) == 0
    assert len(done) == 2500
    clock.mark(["0-1"], "admitted", 99.0)  # a Pod long gone is not timed again
    assert len(clock) == 0


def test_past_the_limit_new_pods_are_counted_not_timed() -> None:
    clock = StageClock(limit=2)
    for uid in ("a", "b", "c"):
        clock.seen(uid, 1.0, created=None)
    clock.seen("a", 2.0, created=None)  # seen again: not a new Pod
    assert (len(clock), clock.untracked) == (2, 1)


def test_the_table_gives_each_stage_its_p50_and_p99() -> None:
    records = [
        PodStages(str(i), {"created": 0.0, "seen": 0.1 * i, "admitted": 0.1 * i + 0.01,
                           "bound": 0.1 * i + 1.0})
        for i in range(1, 101)
    ]  # fmt: skip
    rows = {row.label: row for row in stage_table(records)}
    assert list(rows) == ["created -> seen", "seen -> admitted"]  # admitted -> bound skips stages
    seen = rows["created -> seen"]
    assert (seen.count, round(seen.p50, 6), round(seen.p99, 6)) == (100, 5.0, 9.9)
    assert round(rows["seen -> admitted"].p99, 6) == 0.01


def test_a_whole_second_mark_counts_as_at_least_the_one_before_it() -> None:
    # Slurm's start time is whole seconds: 12 is in fact 12.0 to 12.999, after the submit.
    record = PodStages("a", {"submitted": 12.4, "allocated": 12.0, "seen allocated": 12.9})
    assert stage_table([record]) == [
        StageRow("submitted -> allocated", 1, 0.0, 0.0),
        StageRow("allocated -> seen allocated", 1, 0.5, 0.5),
    ]


def test_stages_are_in_the_order_a_pod_goes_through_them() -> None:
    assert STAGES == (
        "created", "seen", "admitted", "submitted", "allocated", "seen allocated", "bound"
    )  # fmt: skip


def test_percentile_is_nearest_rank() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == 4.0
    assert percentile([7.0], 99) == 7.0


def test_created_at_reads_the_creation_timestamp() -> None:
    assert created_at({"metadata": {"creationTimestamp": "1970-01-01T00:01:00Z"}}) == 60.0
    assert created_at({"metadata": {}}) is None
    assert created_at({"metadata": {"creationTimestamp": "yesterday"}}) is None


def _pod(uid: str, node: str = "") -> dict[str, Any]:
    meta = {"uid": uid, "name": uid, "namespace": "ns", "creationTimestamp": "1970-01-01T00:01:40Z"}
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}}


def test_the_cache_marks_seen_and_allocated_and_drops_a_deleted_pods_marks() -> None:
    done: list[PodStages] = []
    state = SchedulerState()
    state.stages.on_done = done.append
    state.on_pod("ADDED", _pod("a"))
    state.on_pod("ADDED", _pod("b"))
    state.on_pod("ADDED", _pod("bound-elsewhere", node="node-1"))  # not ours to time
    assert len(state.stages) == 2
    with state.lock:
        state.record_locked("a", job("a", 1))  # pending: no allocation yet
        state.record_locked("a", dataclasses.replace(job("a", 1, "RUNNING", "n1"), start_time=120))
    state.on_pod("DELETED", _pod("b"))
    state.stages.bound("a", 130.0)
    assert len(state.stages) == 0
    [record] = done
    assert record.times["created"] == 100.0 and record.times["allocated"] == 120.0
    assert {"seen", "seen allocated"} <= set(record.times)


def test_a_job_list_marks_the_pods_whose_jobs_it_shows_started() -> None:
    state = SchedulerState()
    state.on_pod("ADDED", _pod("a"))
    running = dataclasses.replace(job("a", 1, "RUNNING", "n1"), start_time=120)
    with state.lock:
        state.take_listing_locked(Merged({"a": running}, {}, ["a"]), sent=0.0)
    done: list[PodStages] = []
    state.stages.on_done = done.append
    state.stages.bound("a", 130.0)
    assert done[0].times["allocated"] == 120.0 and "seen allocated" in done[0].times
