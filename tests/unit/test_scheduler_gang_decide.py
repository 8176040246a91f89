"""Gangs: a pod group's Pods run together as one multi-node Slurm job, or not at all."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from reconciler import wellknown as wk
from reconciler.adapters.slurm.model import SlurmJob
from reconciler.scheduler.decide.admission import PodRequest, Problem, fingerprint
from reconciler.scheduler.decide.gang_decide import (
    AdoptMembers,
    BindGang,
    CancelGangJob,
    DeleteMembers,
    Gang,
    RefreshJob,
    SubmitGang,
    WaitForMembers,
    gang_from_annotations,
    gang_from_pod_group,
    gang_key,
    gang_key_of,
    gang_request,
    group_of,
    is_gang_key,
    next_gang_steps,
    uses_pod_group_crd,
)
from tests.unit.test_scheduler_pod_decide import slurm_job

NS, GROUP = "ml", "train"
JOB = 40
MIN = wk.ANNOTATION_POD_GROUP_MIN_MEMBER
POLICY = wk.ANNOTATION_GANG_POLICY


def member(
    name: str,
    *,
    created: str = "2030-01-01T00:00:00Z",
    job: int | None = None,
    node: str | None = None,
    phase: str = "Pending",
    deleting: bool = False,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Pod of the group; `node` binds it (spec.nodeName plus the Slurm node annotation)."""
    notes = {wk.ANNOTATION_POD_GROUP: GROUP, **(annotations or {})}
    if job is not None:
        notes[wk.ANNOTATION_JOB_ID] = str(job)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": f"uid-{name}",
        "creationTimestamp": created,
        "annotations": notes,
    }
    if deleting:
        meta["deletionTimestamp"] = "2030-01-02T00:00:00Z"
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]
    }
    if node is not None:
        spec["nodeName"] = f"k8s-{node}"
        notes[wk.ANNOTATION_SLURM_NODE] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def gang(min_member: int = 3, policy: str = "restart") -> Gang:
    return Gang(NS, GROUP, min_member, policy)  # type: ignore[arg-type]


def gang_job(state: str = "PENDING", nodes: str = "", node_count: int = 3) -> SlurmJob:
    g = gang()
    return dataclasses.replace(
        slurm_job(),
        job_id=JOB,
        name=g.job_name("s"),
        state=state,
        nodes=nodes,
        node_count=node_count,
    )


RUNNING = gang_job("RUNNING", "n[1-3]")


def names(pods: Any) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def with_min(value: str, **notes: str) -> dict[str, str]:
    return {MIN: value, **notes}


# ---- identity -------------------------------------------------------------------------------


def test_a_gang_is_keyed_and_its_job_named_by_namespace_and_group() -> None:
    g = gang()
    assert g.key == gang_key(NS, GROUP)
    assert is_gang_key(g.key)
    assert not is_gang_key("0b6a7a53-0000-4000-8000-00000000000a")  # a Pod UID
    assert g.job_name("s").startswith(wk.GANG_JOB_PREFIX)
    assert f"{NS}/{GROUP}" in g.job_name("s") and g.job_name("s").endswith(f"@{g.key}:s")


def test_the_group_comes_from_the_coscheduling_label_before_the_annotation() -> None:
    pod = member("a")
    assert group_of(pod) == GROUP and not uses_pod_group_crd(pod)
    assert gang_key_of(pod) == gang_key(NS, GROUP)
    pod["metadata"]["labels"] = {wk.LABEL_POD_GROUP: "other"}
    assert group_of(pod) == "other" and uses_pod_group_crd(pod)
    assert gang_key_of(pod) == gang_key(NS, "other")


def test_a_pod_without_a_group_or_with_a_blank_one_is_no_gang_member() -> None:
    pod = member("a")
    del pod["metadata"]["annotations"][wk.ANNOTATION_POD_GROUP]
    assert group_of(pod) is None and gang_key_of(pod) is None
    pod["metadata"]["annotations"][wk.ANNOTATION_POD_GROUP] = "   "
    assert group_of(pod) is None and gang_key_of(pod) is None


# ---- size and policy from annotations ------------------------------------------------------


def test_members_agreeing_on_their_size_make_a_gang_with_the_default_policy() -> None:
    members = [member(n, annotations=with_min("3")) for n in "abc"]
    assert gang_from_annotations(NS, GROUP, members, "keep-going") == gang(3, "keep-going")


def test_members_agreeing_on_a_policy_override_the_default() -> None:
    members = [member(n, annotations=with_min("2", **{POLICY: "keep-going"})) for n in "ab"]
    assert gang_from_annotations(NS, GROUP, members, "restart") == gang(2, "keep-going")


def test_members_disagreeing_on_their_size_are_told_which_annotation_and_values() -> None:
    members = [member("a", annotations=with_min("3")), member("b", annotations=with_min("4"))]
    found = gang_from_annotations(NS, GROUP, members, "restart")
    assert isinstance(found, Problem)
    assert wk.ANNOTATION_POD_GROUP_MIN_MEMBER in found.field
    assert "'3'" in found.message and "'4'" in found.message and GROUP in found.message


def test_members_without_a_size_are_told_to_set_it() -> None:
    found = gang_from_annotations(NS, GROUP, [member("a"), member("b")], "restart")
    assert isinstance(found, Problem)
    assert wk.ANNOTATION_POD_GROUP_MIN_MEMBER in found.field
    assert "none" in found.message


@pytest.mark.parametrize("raw", ["three", "0", "-1", "2.5", "", "²", "1e3"])
def test_a_size_that_is_not_a_whole_number_of_pods_is_a_problem(raw: str) -> None:
    found = gang_from_annotations(NS, GROUP, [member("a", annotations=with_min(raw))], "restart")
    assert isinstance(found, Problem)
    assert wk.ANNOTATION_POD_GROUP_MIN_MEMBER in found.field
    assert repr(raw.strip()) in found.message


def test_a_size_with_surrounding_blanks_is_read() -> None:
    members = [member(n, annotations=with_min(" 2 ")) for n in "ab"]
    assert gang_from_annotations(NS, GROUP, members, "restart") == gang(2)


def test_an_unknown_policy_is_a_problem_naming_the_policy_annotation() -> None:
    members = [member("a", annotations=with_min("1", **{POLICY: "retry"}))]
    found = gang_from_annotations(NS, GROUP, members, "restart")
    assert isinstance(found, Problem)
    assert wk.ANNOTATION_GANG_POLICY in found.field
    assert "restart" in found.message and "keep-going" in found.message
    assert "'retry'" in found.message


def test_members_disagreeing_on_the_policy_are_a_problem_naming_it() -> None:
    members = [
        member("a", annotations=with_min("2", **{POLICY: "restart"})),
        member("b", annotations=with_min("2", **{POLICY: "keep-going"})),
    ]
    found = gang_from_annotations(NS, GROUP, members, "restart")
    assert isinstance(found, Problem)
    assert wk.ANNOTATION_GANG_POLICY in found.field
    assert "restart" in found.message and "keep-going" in found.message


# ---- size and policy from a PodGroup --------------------------------------------------------


def pod_group(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": GROUP, "annotations": annotations or {}}, "spec": spec}


def test_a_pod_group_gives_its_min_member_and_the_default_policy() -> None:
    assert gang_from_pod_group(NS, GROUP, pod_group({"minMember": 4}), "restart") == gang(4)


def test_a_pod_group_annotation_overrides_the_default_policy() -> None:
    found = gang_from_pod_group(
        NS, GROUP, pod_group({"minMember": 2}, {POLICY: "keep-going"}), "restart"
    )
    assert found == gang(2, "keep-going")


@pytest.mark.parametrize("spec", [{}, {"minMember": 0}, {"minMember": -2}, {"minMember": "3"}])
def test_a_pod_group_without_a_usable_min_member_is_a_problem(spec: dict[str, Any]) -> None:
    found = gang_from_pod_group(NS, GROUP, pod_group(spec), "restart")
    assert isinstance(found, Problem)
    assert f"PodGroup {NS}/{GROUP}" in found.field and "spec.minMember" in found.field
    assert repr(spec.get("minMember")) in found.message


def test_a_pod_group_without_a_spec_is_a_problem() -> None:
    found = gang_from_pod_group(NS, GROUP, {"metadata": {}}, "restart")
    assert isinstance(found, Problem) and "spec.minMember" in found.field


def test_a_pod_group_with_an_unknown_policy_is_a_problem() -> None:
    found = gang_from_pod_group(NS, GROUP, pod_group({"minMember": 2}, {POLICY: "x"}), "restart")
    assert isinstance(found, Problem) and wk.ANNOTATION_GANG_POLICY in found.field


# ---- one request for the whole gang ---------------------------------------------------------


BASE_REQUEST = PodRequest(cpus=1, memory_mb=1024, gpus=0, grace_seconds=5)


def request(**fields: Any) -> PodRequest:
    return dataclasses.replace(BASE_REQUEST, **fields)


def test_every_node_gets_the_largest_members_cpus_memory_gpus_and_grace() -> None:
    found = gang_request(
        [
            request(cpus=8, memory_mb=1024, gpus=0, grace_seconds=5, partition="gpu"),
            request(cpus=2, memory_mb=65536, gpus=1, grace_seconds=30, partition="gpu"),
            request(cpus=4, memory_mb=2048, gpus=4, grace_seconds=10, partition="gpu"),
        ]
    )
    assert isinstance(found, PodRequest)
    assert (found.cpus, found.memory_mb, found.gpus, found.grace_seconds) == (8, 65536, 4, 30)
    assert found.partition == "gpu"


def test_node_exclusions_and_requirements_of_every_member_are_kept() -> None:
    found = gang_request(
        [
            request(excluded_nodes=("n9",), required_nodes=("n1",)),
            request(excluded_nodes=("n8", "n9"), required_nodes=("n2",)),
        ]
    )
    assert isinstance(found, PodRequest)
    assert found.excluded_nodes == ("n8", "n9")
    assert found.required_nodes == ("n1", "n2")


def test_a_single_members_request_is_the_gangs() -> None:
    one = request(cpus=3, account="a", qos="high")
    assert gang_request([one]) == one


@pytest.mark.parametrize(
    ("field", "a", "b", "shown"),
    [
        ("partition", "gpu", "cpu", "partition"),
        ("account", "a", None, "account"),
        ("qos", "high", "low", "qos"),
        ("user_id", 1000, 1001, "user-id"),
        ("timeout_minutes", 60, 120, "timeout-minutes"),
        ("exclusive", "exclusive", None, "exclusive"),
    ],
)
def test_members_differing_on_a_field_one_job_has_once_are_a_problem_naming_it(
    field: str, a: Any, b: Any, shown: str
) -> None:
    found = gang_request([request(**{field: a}), request(**{field: b})])
    assert isinstance(found, Problem)
    assert found.field == f"the pod group's {shown}"
    assert repr(a) in found.message and repr(b) in found.message


# ---- before a job: wait for the members, then submit ----------------------------------------


def test_fewer_free_members_than_the_gangs_size_wait() -> None:
    members = [member("a"), member("b")]
    assert next_gang_steps(gang(3), members, None) == [WaitForMembers(2, 3)]


def test_no_members_wait_for_all() -> None:
    assert next_gang_steps(gang(3), [], None) == [WaitForMembers(0, 3)]


def test_enough_members_submit_the_oldest_in_creation_order() -> None:
    members = [
        member("d", created="2030-01-01T00:00:04Z"),
        member("b", created="2030-01-01T00:00:02Z"),
        member("c", created="2030-01-01T00:00:03Z"),
        member("a", created="2030-01-01T00:00:02Z"),  # same time as b: by name
    ]
    result = next_gang_steps(gang(3), members, None)
    assert [type(s) for s in result] == [SubmitGang]
    assert names(result[0].pods) == ["a", "b", "c"]


def test_the_same_members_are_chosen_whatever_order_they_are_seen_in() -> None:
    members = [member(n, created=f"2030-01-01T00:00:0{i}Z") for i, n in enumerate("abcd")]
    first = next_gang_steps(gang(2), members, None)
    again = next_gang_steps(gang(2), list(reversed(members)), None)
    assert first == again and names(first[0].pods) == ["a", "b"]


def test_refused_terminating_finished_or_bound_members_are_not_counted() -> None:
    refused = member("r")
    refused["metadata"]["annotations"][wk.ANNOTATION_REJECTED] = fingerprint(refused)
    members = [
        member("a"),
        refused,
        member("t", deleting=True),
        member("f", phase="Failed"),
        member("s", phase="Succeeded"),
        member("x", node="n7", phase="Running"),  # bound by someone else, no job id of ours
    ]
    assert next_gang_steps(gang(2), members, None) == [WaitForMembers(1, 2)]


@pytest.mark.parametrize("state", ["CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", "COMPLETING"])
def test_after_a_pending_job_ended_its_unbound_members_are_submitted_again(state: str) -> None:
    members = [member(n, job=JOB) for n in "abc"]
    result = next_gang_steps(gang(3), members, gang_job(state))
    assert [type(s) for s in result] == [SubmitGang]
    assert names(result[0].pods) == ["a", "b", "c"]


# ---- a pending job --------------------------------------------------------------------------


def test_a_pending_job_holding_all_its_members_waits() -> None:
    members = [member(n, job=JOB) for n in "abc"]
    assert next_gang_steps(gang(3), members, gang_job()) == []


def test_a_pending_job_whose_members_were_never_annotated_adopts_them() -> None:
    # The scheduler stopped between submitting the job and recording it on the Pods.
    members = [member(n, created=f"2030-01-01T00:00:0{i}Z") for i, n in enumerate("cab")]
    result = next_gang_steps(gang(3), members, gang_job())
    assert [type(s) for s in result] == [AdoptMembers]
    assert result[0].job_id == JOB
    assert sorted(names(result[0].pods)) == ["a", "b", "c"]


def test_a_pending_job_adopts_only_the_members_it_is_short_of() -> None:
    members = [
        member("a", job=JOB),
        member("b", job=JOB),
        member("z", created="2030-01-01T00:00:09Z"),
        member("c", created="2030-01-01T00:00:01Z"),
    ]
    result = next_gang_steps(gang(3), members, gang_job())
    assert result == [AdoptMembers(JOB, (members[3],))]


def test_a_pending_job_whose_members_were_deleted_below_its_size_is_cancelled() -> None:
    members = [member("a", job=JOB), member("b", job=JOB)]
    result = next_gang_steps(gang(3), members, gang_job())
    assert result == [CancelGangJob(JOB, "its gang has 2 of 3 Pods")]


def test_a_pending_job_is_sized_by_its_node_count_not_a_changed_min_member() -> None:
    members = [member(n, job=JOB) for n in "abc"]
    assert next_gang_steps(gang(2), members, gang_job(node_count=3)) == []
    result = next_gang_steps(gang(2), members[:2], gang_job(node_count=3))
    assert [type(s) for s in result] == [CancelGangJob]


def test_a_pending_job_with_a_failed_member_is_cancelled_when_none_can_replace_it() -> None:
    members = [member("a", job=JOB), member("b", job=JOB), member("c", job=JOB, phase="Failed")]
    result = next_gang_steps(gang(3), members, gang_job())
    assert [type(s) for s in result] == [CancelGangJob]


# ---- a running job: binding -----------------------------------------------------------------


def test_a_running_job_whose_nodes_are_not_known_yet_is_read_again() -> None:
    members = [member(n, job=JOB) for n in "abc"]
    assert next_gang_steps(gang(3), members, gang_job("RUNNING", "")) == [RefreshJob(JOB)]


def test_a_running_job_known_by_its_batch_host_only_is_read_again() -> None:
    members = [member(n, job=JOB) for n in "abc"]
    assert next_gang_steps(gang(3), members, gang_job("RUNNING", "n2")) == [RefreshJob(JOB)]


def test_a_running_job_binds_every_member_each_to_a_node_of_its_own() -> None:
    members = [member(n, job=JOB) for n in "abc"]
    result = next_gang_steps(gang(3), members, RUNNING)
    assert [type(s) for s in result] == [BindGang]
    bind = result[0]
    assert bind.job_id == JOB
    assert sorted(names(p for p, _ in bind.assignments)) == ["a", "b", "c"]
    assert sorted(node for _, node in bind.assignments) == ["n1", "n2", "n3"]


def test_a_running_job_with_too_few_members_binds_none_and_is_cancelled() -> None:
    members = [member("a", job=JOB), member("b", job=JOB)]
    result = next_gang_steps(gang(3), members, RUNNING)
    assert result == [CancelGangJob(JOB, "its gang has 2 of 3 Pods")]


def test_a_running_job_whose_members_were_never_annotated_binds_free_ones() -> None:
    # Submitted, then the scheduler stopped before recording it; the job started meanwhile.
    members = [member(n) for n in "abc"]
    result = next_gang_steps(gang(3), members, RUNNING)
    assert [type(s) for s in result] == [BindGang]
    assert sorted(node for _, node in result[0].assignments) == ["n1", "n2", "n3"]


def test_binding_that_stopped_half_way_binds_the_rest() -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Running"),
        member("b", job=JOB),
        member("c", job=JOB),
    ]
    for policy in ("restart", "keep-going"):
        result = next_gang_steps(gang(3, policy), members, RUNNING)
        assert [type(s) for s in result] == [BindGang]
        assigned = dict((p["metadata"]["name"], n) for p, n in result[0].assignments)
        assert sorted(assigned) == ["b", "c"]
        assert sorted(assigned.values()) == ["n2", "n3"]


@pytest.mark.parametrize("policy", ["restart", "keep-going"])
def test_a_running_gang_with_every_member_bound_needs_nothing(policy: str) -> None:
    members = [member(n, job=JOB, node=f"n{i}", phase="Running") for i, n in enumerate("abc", 1)]
    assert next_gang_steps(gang(3, policy), members, RUNNING) == []


def test_a_terminating_unbound_member_is_not_bound() -> None:
    members = [
        member("a", job=JOB),
        member("b", job=JOB),
        member("c", job=JOB, deleting=True),  # a finalizer keeps it
    ]
    result = next_gang_steps(gang(3), members, RUNNING)
    bound = [p for step in result if isinstance(step, BindGang) for p, _ in step.assignments]
    assert "c" not in names(bound)


# ---- a running job: failures under the restart policy ---------------------------------------


def test_restart_a_failed_member_deletes_the_live_others() -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Failed"),
        member("b", job=JOB, node="n2", phase="Running"),
        member("c", job=JOB, node="n3", phase="Running"),
    ]
    result = next_gang_steps(gang(3, "restart"), members, RUNNING)
    assert [type(s) for s in result] == [DeleteMembers]
    assert result[0].reason == wk.EVENT_GANG_RESTART
    assert names(result[0].pods) == ["b", "c"]
    assert "a" in result[0].message and "restart" in result[0].message
    assert str(JOB) in result[0].message


def test_restart_waits_while_the_others_terminate() -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Failed"),
        member("b", job=JOB, node="n2", phase="Running", deleting=True),
        member("c", job=JOB, node="n3", phase="Running", deleting=True),
    ]
    assert next_gang_steps(gang(3, "restart"), members, RUNNING) == []


def test_restart_cancels_the_job_once_no_member_is_live() -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Failed"),
        member("b", job=JOB, node="n2", phase="Failed"),
    ]
    result = next_gang_steps(gang(3, "restart"), members, RUNNING)
    assert [type(s) for s in result] == [CancelGangJob]
    assert result[0].job_id == JOB


def test_restart_a_deleted_bound_member_deletes_the_others_not_replaces_it() -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Running"),
        member("b", job=JOB, node="n2", phase="Running"),
        member("new", created="2030-01-01T00:01:00Z"),  # its controller's replacement
    ]
    result = next_gang_steps(gang(3, "restart"), members, RUNNING)
    assert [type(s) for s in result] == [DeleteMembers]
    assert result[0].reason == wk.EVENT_GANG_RESTART
    assert names(result[0].pods) == ["a", "b"]
    assert "n3" in result[0].message


def test_restart_a_terminating_bound_member_counts_as_failed() -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Running", deleting=True),
        member("b", job=JOB, node="n2", phase="Running"),
        member("c", job=JOB, node="n3", phase="Running"),
    ]
    result = next_gang_steps(gang(3, "restart"), members, RUNNING)
    assert [type(s) for s in result] == [DeleteMembers]
    assert names(result[0].pods) == ["b", "c"]


# ---- a running job: failures under the keep-going policy ------------------------------------


def test_keep_going_binds_a_new_member_to_the_node_of_one_that_is_gone() -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Running"),
        member("c", job=JOB, node="n3", phase="Running"),
        member("new", created="2030-01-01T00:01:00Z"),
    ]
    result = next_gang_steps(gang(3, "keep-going"), members, RUNNING)
    assert result == [BindGang(JOB, ((members[2], "n2"),))]


def test_keep_going_binds_a_new_member_to_the_node_of_one_that_failed() -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Failed"),
        member("b", job=JOB, node="n2", phase="Running"),
        member("c", job=JOB, node="n3", phase="Running"),
        member("new", created="2030-01-01T00:01:00Z"),
    ]
    result = next_gang_steps(gang(3, "keep-going"), members, RUNNING)
    assert result == [BindGang(JOB, ((members[3], "n1"),))]


def test_keep_going_without_a_replacement_leaves_the_others_running() -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Failed"),
        member("b", job=JOB, node="n2", phase="Running"),
    ]
    assert next_gang_steps(gang(3, "keep-going"), members, RUNNING) == []


def test_keep_going_does_not_reuse_the_node_of_a_member_still_terminating() -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Running", deleting=True),
        member("b", job=JOB, node="n2", phase="Running"),
        member("c", job=JOB, node="n3", phase="Running"),
        member("new", created="2030-01-01T00:01:00Z"),
    ]
    assert next_gang_steps(gang(3, "keep-going"), members, RUNNING) == []


# ---- a running job: the end -----------------------------------------------------------------


@pytest.mark.parametrize("policy", ["restart", "keep-going"])
def test_a_gang_whose_members_all_succeeded_gives_its_allocation_back(policy: str) -> None:
    members = [member(n, job=JOB, node=f"n{i}", phase="Succeeded") for i, n in enumerate("abc", 1)]
    result = next_gang_steps(gang(3, policy), members, RUNNING)
    assert [type(s) for s in result] == [CancelGangJob]
    assert result[0].job_id == JOB


@pytest.mark.parametrize("policy", ["restart", "keep-going"])
def test_a_gang_some_of_whose_members_succeeded_keeps_running(policy: str) -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Succeeded"),
        member("b", job=JOB, node="n2", phase="Running"),
        member("c", job=JOB, node="n3", phase="Running"),
    ]
    assert next_gang_steps(gang(3, policy), members, RUNNING) == []


@pytest.mark.parametrize("state", ["COMPLETING", "CANCELLED", "TIMEOUT", "NODE_FAIL"])
def test_bound_members_whose_job_ended_are_deleted(state: str) -> None:
    members = [member(n, job=JOB, node=f"n{i}", phase="Running") for i, n in enumerate("abc", 1)]
    result = next_gang_steps(gang(3), members, gang_job(state, "n[1-3]"))
    deletes = [s for s in result if isinstance(s, DeleteMembers)]
    assert len(deletes) == 1
    assert deletes[0].reason == wk.EVENT_SLURM_ENDED
    assert names(deletes[0].pods) == ["a", "b", "c"]
    assert str(JOB) in deletes[0].message
    assert not any(isinstance(s, (SubmitGang, BindGang, CancelGangJob)) for s in result)


def test_bound_members_whose_job_is_gone_from_slurm_are_deleted() -> None:
    members = [member(n, job=JOB, node=f"n{i}", phase="Running") for i, n in enumerate("ab", 1)]
    result = next_gang_steps(gang(2), members, None)
    assert result[0] == DeleteMembers(
        tuple(members), wk.EVENT_SLURM_ENDED, "its gang's job no longer exists"
    )


def test_bound_members_of_an_older_job_are_deleted_while_a_newer_one_runs() -> None:
    old = member("old", job=JOB - 1, node="n9", phase="Running")
    members = [old, *(member(n, job=JOB) for n in "abc")]
    result = next_gang_steps(gang(3), members, RUNNING)
    assert isinstance(result[0], DeleteMembers) and result[0].pods == (old,)
    assert result[0].reason == wk.EVENT_SLURM_ENDED
    assert isinstance(result[1], BindGang)
    assert sorted(names(p for p, _ in result[1].assignments)) == ["a", "b", "c"]


def test_pods_bound_by_someone_else_are_not_ours_to_delete() -> None:
    other = member("x", node="n9", phase="Running")  # bound, but no job id of ours
    result = next_gang_steps(gang(2), [other], None)
    assert result == [WaitForMembers(0, 2)]


def test_finished_or_terminating_bound_members_of_an_ended_job_are_left_alone() -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Succeeded"),
        member("b", job=JOB, node="n2", phase="Failed"),
        member("c", job=JOB, node="n3", phase="Running", deleting=True),
    ]
    result = next_gang_steps(gang(3), members, gang_job("CANCELLED", "n[1-3]"))
    assert not any(isinstance(s, DeleteMembers) for s in result)


@pytest.mark.parametrize("state", ["REQUEUED", "PENDING", "REQUEUE_HOLD", "EXPEDITING"])
def test_bound_members_whose_job_was_requeued_are_deleted_and_the_job_cancelled(
    state: str,
) -> None:
    members = [member(n, job=JOB, node=f"n{i}", phase="Running") for i, n in enumerate("abc", 1)]
    result = next_gang_steps(gang(3), members, gang_job(state))
    deleted = [p for s in result if isinstance(s, DeleteMembers) for p in s.pods]
    assert sorted(names(deleted)) == ["a", "b", "c"]
    assert any(isinstance(s, CancelGangJob) and s.job_id == JOB for s in result)


# ---- purity ---------------------------------------------------------------------------------


def test_deciding_changes_neither_members_nor_job() -> None:
    members = [
        member("a", job=JOB, node="n1", phase="Failed"),
        member("b", job=JOB, node="n2", phase="Running"),
        member("c", job=JOB),
        member("d"),
    ]
    before = copy.deepcopy(members)
    for policy in ("restart", "keep-going"):
        first = next_gang_steps(gang(3, policy), members, RUNNING)
        assert next_gang_steps(gang(3, policy), members, RUNNING) == first
    assert members == before


def test_a_suspended_gang_job_keeps_its_bound_members() -> None:
    pods = [member(f"m{i}", job=JOB, node=f"n{i + 1}", phase="Running") for i in range(3)]
    assert next_gang_steps(gang(), pods, gang_job("SUSPENDED", "n[1-3]")) == []


@pytest.mark.parametrize("name", ["team/x", "a@b", "Train", "-x", ""])
def test_a_group_name_that_is_no_podgroup_name_is_refused(name: str) -> None:
    pods = [member("a", annotations={MIN: "2"}), member("b", annotations={MIN: "2"})]
    problem = gang_from_annotations(NS, name, pods, "restart")
    assert isinstance(problem, Problem) and "is not a valid group name" in problem.message
