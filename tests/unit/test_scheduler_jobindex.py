"""Merging Slurm's job lists into what the scheduler knows: newer knowledge is never undone,
and a job missing from one list is not taken for gone."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from reconciler.adapters.slurm.model import SlurmJob
from reconciler.scheduler.decide.jobindex import Merged, merge_listing
from reconciler.scheduler.decide.ownership import Ownership
from tests.unit.test_scheduler_pod_decide import slurm_job

A, B = "uid-a", "uid-b"
US = "sched"
OWNER = Ownership(US, "root", marked=True)


def job(uid: str, job_id: int, state: str = "PENDING", nodes: str = "") -> SlurmJob:
    name = f"pod:ns/p@{uid}:{US}"
    return dataclasses.replace(
        slurm_job(), job_id=job_id, name=name, admin_comment=name, state=state, nodes=nodes
    )


def merge(
    known: Mapping[str, SlurmJob],
    learned: Mapping[str, float],
    listed: Iterable[SlurmJob],
    *,
    records: Mapping[str, Collection[int]] | None = None,
    **kw: Any,
) -> Merged:
    found = records or {}
    return merge_listing(
        known, learned, listed, owner=OWNER, records=lambda key: found.get(key, ()), **kw
    )


def test_a_list_sent_before_a_started_hook_does_not_undo_it() -> None:
    running = job(A, 7, "RUNNING", "n1")
    merged = merge({A: running}, {A: 10.0}, [job(A, 7, "PENDING")], sent=9.5)
    assert merged.jobs[A] == running
    assert merged.changed == []


def test_a_list_sent_after_the_hook_is_taken() -> None:
    merged = merge({A: job(A, 7, "RUNNING", "n1")}, {A: 10.0}, [job(A, 7, "CANCELLED")], sent=10.5)
    assert merged.jobs[A].state == "CANCELLED"
    assert merged.changed == [A]
    assert merged.learned == {}  # older than the list: forgotten


def test_a_job_missing_from_the_list_is_kept_until_slurm_confirms_it_gone() -> None:
    """One list that lacks jobs (a bad answer) must not delete their Pods."""
    known = {A: job(A, 7, "RUNNING", "n1"), B: job(B, 8)}
    merged = merge(known, {B: 11.0}, [], sent=10.0)
    assert merged.jobs == known and merged.changed == []
    assert merged.vanished == {A: 7}  # B was just submitted: newer than the list


def test_an_ended_job_missing_from_the_list_was_purged() -> None:
    merged = merge({A: job(A, 7, "CANCELLED")}, {}, [], sent=10.0)
    assert A not in merged.jobs and merged.changed == [A] and merged.vanished == {}


def test_an_older_job_never_replaces_the_known_one() -> None:
    newer = job(A, 9)
    merged = merge({A: newer}, {}, [job(A, 7, "CANCELLED")], sent=1.0)
    assert merged.jobs[A] == newer and merged.vanished == {A: 9}


def test_unchanged_jobs_are_not_looked_at_again() -> None:
    same = job(A, 7, "RUNNING", "n1")
    assert merge({A: same}, {}, [same], sent=1.0).changed == []


def test_other_jobs_are_ignored_and_a_pods_recorded_job_is_found_after_a_restart() -> None:
    plain = dataclasses.replace(slurm_job(), name="train.sh", job_id=3)
    merged = merge({}, {}, [plain, job(A, 7, "CANCELLED"), job(A, 9)], sent=1.0,
                   records={A: {7}})  # fmt: skip
    assert list(merged.jobs) == [A] and merged.jobs[A].job_id == 7
    assert merged.extras == [job(A, 9)]  # ours, active, and recorded nowhere


def test_an_abandoned_job_never_stands_for_its_pod_again() -> None:
    merged = merge({}, {}, [job(A, 7, "CANCELLED")], sent=1.0, abandoned={7})
    assert merged.jobs == {} and merged.changed == []


def test_a_key_with_a_submit_in_flight_is_left_alone() -> None:
    """Its new job may be listed before the submit returns: no record names it yet, and it
    must be neither an extra nor taken for the old job's replacement."""
    old = job(A, 7, "CANCELLED")
    merged = merge({A: old}, {}, [old, job(A, 9)], sent=1.0, submitting={A})
    assert merged.jobs == {A: old} and merged.extras == [] and merged.vanished == {}


def test_a_spoof_named_like_the_pods_job_changes_nothing() -> None:
    """A spoof: `sbatch -J <the Pod's job name> --hold` by any user."""
    real = job(A, 7, "RUNNING", "n1")
    spoof = dataclasses.replace(real, job_id=12, state="PENDING", admin_comment="", nodes="")
    merged = merge({A: real}, {}, [real, spoof], sent=1.0)
    assert merged.jobs == {A: real} and merged.changed == [] and merged.extras == []
