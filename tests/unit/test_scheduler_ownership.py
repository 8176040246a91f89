"""Which Slurm jobs are this scheduler's placeholders. Any Slurm user can
name a job like one; only ours, by name, record and admin comment, may stand for a Pod."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from reconciler.adapters.slurm.model import SlurmJob
from reconciler.scheduler.decide.ownership import (
    Claim,
    Ownership,
    choose,
    hook_refusal,
    placeholders,
)
from tests.unit.test_scheduler_pod_decide import slurm_job

US, THEM = "tenant-slurm-scheduler", "other-slurm-scheduler"
UID = "0b6a7a53-0000-4000-8000-00000000000a"
NAME = f"pod:ns/p@{UID}:{US}"
MARKED = Ownership(US, "root", marked=True)  # v0.0.40+: the operator submits every job
UNMARKED = Ownership(US, "slurm", marked=False, users={UID: frozenset({"1001"})})  # 22.05


def job(job_id: int, name: str = NAME, *, state: str = "RUNNING", **fields: Any) -> SlurmJob:
    base = dict(user_name="slurm", user_id=64030, admin_comment="", nodes="n1")
    return dataclasses.replace(
        slurm_job(), job_id=job_id, name=name, state=state, **{**base, **fields}
    )


def ours(job_id: int, **fields: Any) -> SlurmJob:
    """A job this scheduler submitted on a v0.0.40+ server: named in its admin comment."""
    return job(job_id, admin_comment=NAME, user_name="root", user_id=0, **fields)


# ---- claims ---------------------------------------------------------------------------------


def test_an_admin_comment_only_an_operator_can_set_vouches_for_a_job() -> None:
    assert MARKED.claim(ours(5)) == Claim(UID, vouched=True)


@pytest.mark.parametrize(
    "spoof",
    [
        job(9, user_name="mallory", user_id=1234),  # any user, our exact name
        job(9, user_name="root", user_id=0),  # root's sbatch: no admin comment
        job(9, name=f"pod:ns/p@{UID}", user_name="root", user_id=0),  # the old name
    ],
    ids=["other-user", "root-sbatch", "old-name"],
)
def test_a_look_alike_is_never_vouched_for_on_a_marking_server(spoof: SlurmJob) -> None:
    assert MARKED.claim(spoof) == Claim(UID, vouched=False)


def test_without_admin_comments_the_user_vouches() -> None:
    assert UNMARKED.claim(job(5, user_name="slurm")) == Claim(UID, True)  # the operator
    assert UNMARKED.claim(job(5, user_name="sunk-pods", user_id=1001)) == Claim(UID, True)
    assert UNMARKED.claim(job(5, user_name="mallory", user_id=1234)) == Claim(UID, False)
    assert UNMARKED.claim(job(5, name=f"pod:ns/p@{UID}")) == Claim(UID, False)  # the old name


@pytest.mark.parametrize(
    "theirs",
    [
        job(5, name=f"pod:ns/p@{UID}:{THEM}"),
        job(5, name=f"pod-group:ns/g@gang_ns_g:{THEM}"),
        job(5, admin_comment=f"pod-group:ns/g@gang_ns_g:{THEM}", name=NAME),
        job(5, name="train-llm"),
    ],
    ids=["their-pod", "their-gang", "their-admin-comment", "plain"],
)
def test_another_schedulers_jobs_and_plain_jobs_are_never_claimed(theirs: SlurmJob) -> None:
    assert MARKED.claim(theirs) is None
    assert UNMARKED.claim(theirs) is None


# ---- which one stands for the Pod -----------------------------------------------------------


def test_a_recorded_job_stands_for_its_pod_and_a_held_look_alike_is_left_alone() -> None:
    """A spoof: a newer PENDING job with the Pod's name. It must neither replace the
    Pod's job (a requeue to the scheduler, which deletes the Pod) nor be cancelled by us."""
    spoof = job(9, state="PENDING", user_name="mallory", user_id=1234)
    found = placeholders([ours(5), spoof], MARKED, lambda key: {5})
    assert found.jobs == {UID: ours(5)} and found.extras == []
    found = placeholders([ours(5), spoof], MARKED, lambda key: ())  # after a restart
    assert found.jobs == {UID: ours(5)} and found.extras == []


def test_a_look_alike_alone_stands_for_nothing() -> None:
    spoof = job(9, state="PENDING", user_name="root", user_id=0)
    assert placeholders([spoof], MARKED, lambda key: ()).jobs == {}
    assert placeholders([spoof], MARKED, lambda key: {5}).jobs == {}


def test_a_recorded_job_counts_even_under_its_old_name() -> None:
    """Jobs submitted before names carried the scheduler's name stay their Pods' by record."""
    old = job(5, name=f"pod:ns/p@{UID}", user_name="root", user_id=0)
    assert placeholders([old], MARKED, lambda key: {5}).jobs == {UID: old}


def test_without_a_record_the_first_submit_wins_and_later_ones_are_extras() -> None:
    """A submit that timed out after Slurm took it, then a second submit: one job stays."""
    jobs, extras = choose([(ours(8), True), (ours(5), True), (ours(7, state="PENDING"), True)], ())
    assert jobs == ours(5)
    assert extras == [ours(7, state="PENDING"), ours(8)]


def test_with_a_record_unrecorded_active_jobs_of_ours_are_extras() -> None:
    chosen, extras = choose([(ours(5), True), (ours(7), True), (job(9), False)], {5})
    assert chosen == ours(5) and extras == [ours(7)]
    chosen, extras = choose([(ours(5, state="CANCELLED"), True), (ours(7), True)], {7})
    assert chosen == ours(7) and extras == []  # an ended one is no duplicate


def test_without_an_active_one_the_newest_ended_job_tells_the_pod() -> None:
    ended = [(ours(5, state="CANCELLED"), True), (ours(7, state="COMPLETED"), True)]
    assert choose(ended, ()) == (ours(7, state="COMPLETED"), [])


def test_abandoned_jobs_and_keys_with_a_submit_in_flight_are_skipped() -> None:
    listed = [ours(5, state="CANCELLED"), ours(7)]
    found = placeholders(listed, MARKED, lambda key: {5}, abandoned={5})
    assert found.jobs == {UID: ours(7)}  # the record of an abandoned job no longer counts
    assert placeholders(listed, MARKED, lambda key: (), skip={UID}).jobs == {}


# ---- hook calls -----------------------------------------------------------------------------


def refusal(job: SlurmJob | None, recorded: set[int], node: str = "n1", kind: str = "started",
            key: str = UID) -> str | None:  # fmt: skip
    return hook_refusal(kind, key, node, job, MARKED, recorded)


def test_a_hook_call_is_acted_on_only_as_slurm_describes_the_job() -> None:
    assert refusal(ours(5), {5}) is None
    assert refusal(ours(5, nodes="n[1-3]"), {5}, node="n2") is None  # a gang's job
    assert refusal(ours(5), set()) is None  # started before our submit returned


@pytest.mark.parametrize(
    ("slurm_job", "recorded", "node", "why"),
    [
        (None, {5}, "n1", "no such job"),
        (ours(5), {5}, "n7", "not on 'n7'"),  # a node Slurm never gave it
        (ours(5, nodes="", state="PENDING"), {5}, "n1", "no node yet"),
        (job(9, user_name="mallory", user_id=1), {5}, "n1", "holds job 5, not 9"),
        (job(9, user_name="mallory", user_id=1), set(), "n1", "nothing records"),
        (job(9, name="train-llm"), {5}, "n1", "not this scheduler's placeholder"),
        (ours(5), {5}, "n1", "placeholder for"),  # another Pod's token
    ],
    ids=["no-job", "other-node", "pending", "unrecorded", "unvouched", "plain-job", "other-key"],
)
def test_a_forged_hook_call_is_refused(
    slurm_job: SlurmJob | None, recorded: set[int], node: str, why: str
) -> None:
    key = "another-pod-uid" if why == "placeholder for" else UID
    found = refusal(slurm_job, recorded, node=node, key=key)
    assert found is not None and why in found


def test_a_signalled_call_needs_no_node() -> None:
    assert refusal(ours(5, state="COMPLETING"), {5}, node="", kind="signalled") is None
