"""The steady-state poll reads only our jobs whose state moved; the whole list only at start,
after a gap or for a submit of unknown outcome (whole lists load slurmctld)."""

from __future__ import annotations

from reconciler.scheduler.counters import whole_list_reads
from reconciler.scheduler.decide.job_reads_decide import StateLook, list_needed, look_at_states
from reconciler.scheduler.state import SchedulerState
from tests.unit.test_scheduler_jobindex import job

A, B, C, D = "uid-a", "uid-b", "uid-c", "uid-d"


def test_only_jobs_whose_state_moved_are_read_back() -> None:
    known = {A: job(A, 1), B: job(B, 2, "RUNNING", "n1"), C: job(C, 3, "RUNNING", "n2")}
    states = {1: "RUNNING", 2: "RUNNING", 3: "COMPLETING", 99: "PENDING"}  # 99: not ours
    assert look_at_states(known, states) == StateLook(reread={A: 1, C: 3})


def test_a_holding_job_missing_from_the_list_is_confirmed_and_an_ended_one_forgotten() -> None:
    known = {A: job(A, 1, "RUNNING", "n1"), B: job(B, 2, "COMPLETED", "n1")}
    assert look_at_states(known, {}) == StateLook(vanished={A: 1}, purged=[B])


def test_keys_newer_than_the_list_are_left_alone() -> None:
    known = {A: job(A, 1), D: job(D, 4)}
    assert look_at_states(known, {1: "RUNNING"}, skip={A, D}) == StateLook()


def test_the_whole_list_at_start_after_a_gap_and_for_a_submit_of_unknown_outcome() -> None:
    assert list_needed(listed_once=False, gap=False, uncertain={}, listed_at=0.0)
    assert list_needed(listed_once=True, gap=True, uncertain={}, listed_at=5.0)
    assert list_needed(listed_once=True, gap=False, uncertain={A: 6.0}, listed_at=5.0)
    assert not list_needed(listed_once=True, gap=False, uncertain={A: 4.0}, listed_at=5.0)
    assert not list_needed(listed_once=True, gap=False, uncertain={}, listed_at=5.0)


def test_whole_list_reads_are_counted_by_operation() -> None:
    requests = {"jobs": 2, "jobs_where": 1, "job_summaries": 1, "job_states": 40, "job": 9}
    assert whole_list_reads(requests) == 4


def test_a_poll_prunes_old_notes_and_abandoned_jobs_slurm_purged() -> None:
    """Without whole lists (which prune them) these grew with every Pod ever scheduled."""
    state = SchedulerState()
    state.learned = {"old": 10.0, "new": 95.0}
    state.abandoned = {1, 2, 9}  # 9: newer than the list, which may not show it yet
    with state.lock:
        state.prune_locked(before=50.0, listed={2: "CANCELLED", 5: "RUNNING"})
    assert (state.learned, state.abandoned) == ({"new": 95.0}, {2, 9})


def test_a_job_leaving_pending_is_left_to_the_start_watch() -> None:
    """The start watch reads each job that leaves PENDING; the poll reading it too made a
    burst's starts two GETs each. A job the start watch does not watch is read here."""
    known = {A: job(A, 1), B: job(B, 2), C: job(C, 3, "RUNNING", "n1")}
    states = {1: "RUNNING", 2: "CANCELLED", 3: "COMPLETING"}
    assert look_at_states(known, states, start_watched={1}) == StateLook(reread={B: 2, C: 3})


def test_the_start_watch_watches_pending_jobs_but_abandoned_ones() -> None:
    state = SchedulerState()
    with state.lock:
        for key, held in ((A, job(A, 1)), (B, job(B, 2)), (C, job(C, 3, "RUNNING", "n1"))):
            state.record_locked(key, held)
        state.abandoned.add(2)
        assert state.start_watched_locked() == {1: A}
