"""Merging Slurm's job lists into what the scheduler knows: newer knowledge is never undone."""

from __future__ import annotations

import dataclasses

from reconciler.adapters.slurm_rest import SlurmJob
from reconciler.scheduler.jobindex import merge_listing, placeholders_by_uid
from tests.unit.test_scheduler_decide import slurm_job

A, B = "uid-a", "uid-b"


def job(uid: str, job_id: int, state: str = "PENDING", nodes: str = "") -> SlurmJob:
    return dataclasses.replace(
        slurm_job(), job_id=job_id, name=f"pod:ns/p@{uid}", state=state, nodes=nodes
    )


def test_a_list_sent_before_a_started_hook_does_not_undo_it() -> None:
    running = job(A, 7, "RUNNING", "n1")
    merged = merge_listing({A: running}, {A: 10.0}, [job(A, 7, "PENDING")], sent=9.5)
    assert merged.jobs[A] == running
    assert merged.changed == []


def test_a_list_sent_after_the_hook_is_taken() -> None:
    merged = merge_listing(
        {A: job(A, 7, "RUNNING", "n1")}, {A: 10.0}, [job(A, 7, "CANCELLED")], sent=10.5
    )
    assert merged.jobs[A].state == "CANCELLED"
    assert merged.changed == [A]
    assert merged.learned == {}  # older than the list: forgotten


def test_a_job_missing_from_the_list_was_purged_unless_just_submitted() -> None:
    known = {A: job(A, 7), B: job(B, 8)}
    merged = merge_listing(known, {B: 11.0}, [], sent=10.0)
    assert A not in merged.jobs and merged.changed == [A]
    assert merged.jobs[B] == known[B]


def test_an_older_job_never_replaces_a_newer_one() -> None:
    newer = job(A, 9)
    merged = merge_listing({A: newer}, {}, [job(A, 7, "CANCELLED")], sent=1.0)
    assert merged.jobs[A] == newer


def test_unchanged_jobs_are_not_looked_at_again() -> None:
    same = job(A, 7, "RUNNING", "n1")
    assert merge_listing({A: same}, {}, [same], sent=1.0).changed == []


def test_other_jobs_are_ignored_and_the_newest_of_a_resubmit_wins() -> None:
    plain = dataclasses.replace(slurm_job(), name="train.sh", job_id=3)
    found = placeholders_by_uid([plain, job(A, 7, "CANCELLED"), job(A, 9)])
    assert list(found) == [A] and found[A].job_id == 9


def test_an_abandoned_job_never_stands_for_its_pod_again() -> None:
    merged = merge_listing({}, {}, [job(A, 7, "CANCELLED")], sent=1.0, abandoned={7})
    assert merged.jobs == {} and merged.changed == []
