"""The scheduler's next step for a Pod and its placeholder job, as a user watching both sees it."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler import wellknown as wk
from reconciler.adapters.slurm.model import SlurmJob
from reconciler.scheduler.decide.admission import fingerprint
from reconciler.scheduler.decide.pod_decide import (
    ACTIVE_STATES,
    ANNOUNCE_AFTER_SECONDS,
    Admit,
    Announce,
    Bind,
    CancelJob,
    DeletePod,
    RecheckAt,
    next_steps,
    recorded_job_id,
)

KILL_WAIT = 30
NOW = 1_800_000_000.0
UID = "0b6a7a53-0000-4000-8000-00000000000a"
ENDED = ["CANCELLED", "PREEMPTED", "TIMEOUT", "COMPLETING", "COMPLETED", "FAILED", "NODE_FAIL"]


def slurm_job(**fields: Any) -> SlurmJob:
    base = SlurmJob(
        job_id=12, name=f"pod:default/p@{UID}", state="PENDING", state_reason="None",
        state_description="", partition="gpu", nodes="", required_nodes="", excluded_nodes="",
        reservation="", constraints="", gres="", user_name="root", user_id=0, group_id=0,
        comment="", time_limit_minutes=None, priority=1, node_count=1, cpus=1, submit_time=0,
        start_time=0, end_time=0, exit_code=None, batch_host="", flags=frozenset(),
    )  # fmt: skip
    return dataclasses.replace(base, **fields)


def a_pod(
    *,
    node: str | None = None,
    phase: str = "Pending",
    annotations: dict[str, str] | None = None,
    deleting: str | None = None,
    deletion_grace: int | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "p",
        "namespace": "default",
        "uid": UID,
        "annotations": dict(annotations or {}),
    }
    if deleting is not None:
        meta["deletionTimestamp"] = deleting
    if deletion_grace is not None:
        meta["deletionGracePeriodSeconds"] = deletion_grace
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "terminationGracePeriodSeconds": 5,
    }
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def steps(pod: dict[str, Any] | None, job: SlurmJob | None, now: float = NOW) -> list[Any]:
    return next_steps(pod, job, now=now, kill_wait_seconds=KILL_WAIT)


def stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def refused_pod(**kw: Any) -> dict[str, Any]:
    pod = a_pod(**kw)
    pod["metadata"]["annotations"][wk.ANNOTATION_REJECTED] = fingerprint(pod)
    return pod


def kinds(result: list[Any]) -> list[type]:
    return [type(step) for step in result]


# ---- the Pod is gone, or finished -----------------------------------------------------------


@pytest.mark.parametrize("state", ["PENDING", "RUNNING", "SUSPENDED", "REQUEUED", "EXPEDITING"])
def test_deleted_pod_cancels_its_active_job(state: str) -> None:
    assert steps(None, slurm_job(state=state)) == [CancelJob(12, "its Pod was deleted")]


@pytest.mark.parametrize("state", ENDED)
def test_deleted_pod_leaves_an_ended_job_alone(state: str) -> None:
    assert steps(None, slurm_job(state=state)) == []


def test_nothing_to_do_without_pod_or_job() -> None:
    assert steps(None, None) == []


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_finished_pod_gives_its_allocation_back(phase: str) -> None:
    result = steps(a_pod(node="gpu-1", phase=phase), slurm_job(state="RUNNING", nodes="gpu-1"))
    assert result == [CancelJob(12, f"its Pod {phase.lower()}")]


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_finished_pod_with_ended_or_no_job_needs_nothing(phase: str) -> None:
    assert steps(a_pod(node="gpu-1", phase=phase), slurm_job(state="CANCELLED")) == []
    assert steps(a_pod(node="gpu-1", phase=phase), None) == []


# ---- the Pod is terminating -----------------------------------------------------------------


def deleting_pod(deleted_at: float, grace: int = 5) -> dict[str, Any]:
    # The API server sets deletionTimestamp to the time of the delete plus the grace period.
    return a_pod(node="gpu-1", phase="Running", deleting=stamp(deleted_at + grace),
                 deletion_grace=grace)  # fmt: skip


def test_terminating_pod_keeps_its_job_until_kill_wait_after_the_delete() -> None:
    pod = deleting_pod(NOW - 10)
    job = slurm_job(state="RUNNING", nodes="gpu-1")
    assert steps(pod, job) == [RecheckAt(NOW - 10 + KILL_WAIT)]


def test_terminating_pod_past_kill_wait_has_its_job_cancelled() -> None:
    pod = deleting_pod(NOW - KILL_WAIT)
    assert kinds(steps(pod, slurm_job(state="RUNNING", nodes="gpu-1"))) == [CancelJob]
    pod = deleting_pod(NOW - KILL_WAIT - 100)
    assert kinds(steps(pod, slurm_job(state="RUNNING", nodes="gpu-1"))) == [CancelJob]


@given(
    st.integers(min_value=0, max_value=3600),
    st.integers(min_value=0, max_value=120),
    st.integers(min_value=-600, max_value=600),
)
def test_terminating_deadline_property(deleted_ago: int, grace: int, offset: int) -> None:
    deleted_at = NOW - deleted_ago
    pod = deleting_pod(deleted_at, grace)
    deadline = deleted_at + KILL_WAIT
    now = deadline + offset
    result = steps(pod, slurm_job(state="RUNNING", nodes="gpu-1"), now=now)
    if now < deadline:
        assert result == [RecheckAt(deadline)]
    else:
        assert kinds(result) == [CancelJob]


def test_terminating_pod_without_grace_counts_from_its_deletion_timestamp() -> None:
    pod = a_pod(node="gpu-1", deleting=stamp(NOW))
    assert steps(pod, slurm_job(state="RUNNING")) == [RecheckAt(NOW + KILL_WAIT)]


def test_terminating_pod_with_ended_or_no_job_needs_nothing() -> None:
    assert steps(deleting_pod(NOW), slurm_job(state="CANCELLED")) == []
    assert steps(deleting_pod(NOW), None) == []


def test_terminating_pod_is_never_admitted_or_bound() -> None:
    pod = a_pod(deleting=stamp(NOW), deletion_grace=0)
    assert steps(pod, None) == []
    assert kinds(steps(pod, slurm_job(state="RUNNING", nodes="gpu-1"))) == [RecheckAt]


# ---- admission ------------------------------------------------------------------------------


def test_new_pod_is_admitted() -> None:
    assert steps(a_pod(), None) == [Admit()]


def test_refused_pod_is_not_looked_at_again_while_unchanged() -> None:
    assert steps(refused_pod(), None) == []


def test_refused_pod_is_admitted_again_once_the_user_changes_it() -> None:
    pod = refused_pod()
    pod["metadata"]["annotations"][wk.ANNOTATION_EXCLUSIVE] = "user"
    assert steps(pod, None) == [Admit()]
    changed_spec = refused_pod()
    changed_spec["spec"]["terminationGracePeriodSeconds"] = 1
    assert steps(changed_spec, None) == [Admit()]


def test_refused_pod_whose_job_was_cancelled_stays_refused() -> None:
    assert steps(refused_pod(), slurm_job(state="CANCELLED")) == []


def test_bound_pod_without_job_is_not_ours_to_judge() -> None:
    assert steps(a_pod(node="somewhere", phase="Running"), None) == []


def test_pod_whose_job_was_purged_is_deleted() -> None:
    pod = a_pod(annotations={wk.ANNOTATION_JOB_ID: "12"})
    result = steps(pod, None)
    assert kinds(result) == [DeletePod]
    assert result[0].reason == wk.EVENT_SLURM_ENDED
    assert "12" in result[0].message


def test_bound_pod_whose_job_was_purged_is_deleted() -> None:
    pod = a_pod(node="gpu-1", phase="Running", annotations={wk.ANNOTATION_JOB_ID: "12"})
    assert kinds(steps(pod, None)) == [DeletePod]


@pytest.mark.parametrize(("raw", "expected"), [("12", 12), ("", None), ("x", None), ("-3", None)])
def test_recorded_job_id(raw: str, expected: int | None) -> None:
    assert recorded_job_id(a_pod(annotations={wk.ANNOTATION_JOB_ID: raw})) == expected


def test_a_non_ascii_digit_job_id_is_not_a_job_id() -> None:
    pod = a_pod(annotations={wk.ANNOTATION_JOB_ID: "\u00b2"})  # "²".isdigit() is True
    assert recorded_job_id(pod) is None
    assert steps(pod, None) == [Admit()]


# ---- binding --------------------------------------------------------------------------------


def test_running_job_binds_its_pod_to_the_first_node() -> None:
    assert steps(a_pod(), slurm_job(state="RUNNING", nodes="gpu-[3-4]")) == [Bind(12, "gpu-3")]


def test_running_job_without_nodes_yet_waits() -> None:
    pod = a_pod(annotations={wk.ANNOTATION_JOB_ID: "12"})
    assert steps(pod, slurm_job(state="RUNNING", nodes="")) == []


@pytest.mark.parametrize("state", sorted(ACTIVE_STATES - {"RUNNING"}))
def test_pending_or_otherwise_active_job_waits(state: str) -> None:
    pod = a_pod(annotations={wk.ANNOTATION_JOB_ID: "12"})
    assert steps(pod, slurm_job(state=state)) == []


def test_a_job_that_starts_soon_writes_nothing_on_its_pod_before_the_bind() -> None:
    submitted = int(NOW)
    job = slurm_job(submit_time=submitted)
    assert steps(a_pod(), job) == [RecheckAt(submitted + ANNOUNCE_AFTER_SECONDS)]


@pytest.mark.parametrize("state", sorted(ACTIVE_STATES - {"RUNNING"}))
def test_a_pod_that_waits_for_its_job_is_told_its_job_id(state: str) -> None:
    job = slurm_job(state=state, submit_time=int(NOW - ANNOUNCE_AFTER_SECONDS))
    assert steps(a_pod(), job) == [Announce(12)]


def test_a_pod_that_records_another_job_is_told_its_new_one() -> None:
    pod = a_pod(annotations={wk.ANNOTATION_JOB_ID: "11"})
    assert steps(pod, slurm_job(submit_time=0)) == [Announce(12)]


@pytest.mark.parametrize("state", ENDED)
def test_unbound_pod_whose_job_ended_is_deleted(state: str) -> None:
    result = steps(a_pod(), slurm_job(state=state, state_reason="Preempted"))
    assert kinds(result) == [DeletePod]
    assert result[0].reason == wk.EVENT_SLURM_ENDED
    assert "12" in result[0].message


@pytest.mark.parametrize("state", ENDED)
def test_bound_pod_whose_job_ended_is_deleted(state: str) -> None:
    result = steps(a_pod(node="gpu-1", phase="Running"), slurm_job(state=state, nodes="gpu-1"))
    assert kinds(result) == [DeletePod]


def test_ended_message_names_the_state_and_reason() -> None:
    (step,) = steps(a_pod(), slurm_job(state="TIMEOUT", state_reason="TimeLimit"))
    assert "TIMEOUT" in step.message
    assert "TimeLimit" in step.message
    (step,) = steps(a_pod(), slurm_job(state="CANCELLED", state_reason="None"))
    assert "reason" not in step.message


def test_completing_job_message_says_slurm_is_ending_it() -> None:
    (step,) = steps(a_pod(node="gpu-1", phase="Running"), slurm_job(state="COMPLETING"))
    assert "ending" in step.message


@pytest.mark.parametrize("state", ["RUNNING", "SUSPENDED", "CONFIGURING"])
def test_bound_pod_with_running_job_needs_nothing(state: str) -> None:
    assert steps(a_pod(node="gpu-1", phase="Running"), slurm_job(state=state, nodes="gpu-1")) == []


@pytest.mark.parametrize("state", ["PENDING", "REQUEUED", "REQUEUE_HOLD", "EXPEDITING"])
def test_bound_pod_whose_job_was_requeued_is_deleted_and_the_job_cancelled(state: str) -> None:
    result = steps(a_pod(node="gpu-1", phase="Running"), slurm_job(state=state))
    assert kinds(result) == [DeletePod, CancelJob]
    assert result[1].job_id == 12
    assert "requeued" in result[0].message


# ---- level-triggered: the same input gives the same answer ----------------------------------


@given(
    st.sampled_from([*sorted(ACTIVE_STATES), *ENDED, None]),
    st.sampled_from([None, "gpu-1"]),
    st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]),
    st.booleans(),
)
def test_decisions_are_pure(state: str | None, node: str | None, phase: str, gone: bool) -> None:
    pod = None if gone else a_pod(node=node, phase=phase)
    job = None if state is None else slurm_job(state=state, nodes="gpu-1")
    snapshot = copy.deepcopy(pod)
    first = steps(pod, job)
    assert steps(pod, job) == first
    assert pod == snapshot  # nothing written on the Pod
    for step in first:
        if isinstance(step, CancelJob | Bind):
            assert step.job_id == 12
    if gone:
        assert all(isinstance(step, CancelJob) for step in first)


def test_a_refused_pod_never_keeps_a_running_job() -> None:
    job = slurm_job(state="RUNNING", nodes="n1")
    assert steps(refused_pod(), job) == [CancelJob(job.job_id, "its Pod was refused")]


def test_a_pod_we_deleted_is_not_deleted_again_before_the_watch_says_so() -> None:
    """A preempted Pod's job read twice (its start watch, then a hook or a poll) before the
    Pod watch brings the delete: one delete and one SlurmJobEnded Event, not two (CI saw two
    under load)."""
    from reconciler.scheduler.state import SchedulerState

    pod = a_pod(node="slurm-gpu-small-1", annotations={wk.ANNOTATION_JOB_ID: "12"})
    job = slurm_job(state="PREEMPTED", nodes="slurm-gpu-small-1")
    state = SchedulerState()
    state.pods[UID] = pod
    assert kinds(steps(state.pods[UID], job)) == [DeletePod]
    state.note_deleting(pod, NOW)
    noted = state.pods[UID]["metadata"]
    assert noted["deletionGracePeriodSeconds"] == 5  # the Pod's own grace
    assert noted["deletionTimestamp"] == "2027-01-15T08:00:05Z"  # NOW + 5 s
    assert steps(state.pods[UID], job) == []
    # A job still running while the Pod terminates is cancelled at kill-wait, as for any
    # delete the watch brought.
    running = slurm_job(state="RUNNING", nodes="slurm-gpu-small-1")
    assert steps(state.pods[UID], running, now=NOW + KILL_WAIT + 1)[0].__class__.__name__ == (
        "CancelJob"
    )
