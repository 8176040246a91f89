"""Placeholder jobs: the Slurm job a Pod's request becomes, its name, and its hook credentials."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import hostlist
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from reconciler import wellknown as wk
from reconciler.adapters.slurm.model import JobSpec
from reconciler.kuberules.node_affinity import has_node_constraints, node_matches
from reconciler.scheduler.decide.admission import PodRequest, admit
from reconciler.scheduler.decide.placeholder import (
    ROOT_USER,
    HookCredentials,
    JobName,
    describe_job,
    job_name_for,
    parse_job_name,
    placeholder_job_for,
    pod_uid_of,
    priority_update_needed,
    submit_user,
)

PODS = Path(__file__).resolve().parents[2] / "fixtures" / "pods"
HOOKS = HookCredentials("http://hooks.example:8000", b"a-secret-key-of-the-scheduler")
UID = "6f1c2d3e-0000-4000-8000-000000000001"
SCHEDULER = "tenant-slurm-staging-slurm-scheduler"
H100 = {wk.NODE_LABEL_GPU_MODEL: "H100_NVLINK_80GB", "kubernetes.io/hostname": "gpu-1"}


def page_pod(name: str, uid: str = UID) -> dict[str, Any]:
    pod = yaml.safe_load((PODS / f"{name}.yaml").read_text())
    pod["metadata"]["uid"] = uid
    return pod


def request_of(pod: dict[str, Any]) -> PodRequest:
    result = admit(pod, kill_wait_seconds=30)
    assert isinstance(result, PodRequest), result
    return result


def request(**fields: Any) -> PodRequest:
    return dataclasses.replace(
        PodRequest(cpus=1, memory_mb=1024, gpus=0, grace_seconds=5), **fields
    )


def job_for(req: PodRequest, pod: dict[str, Any] | None = None, **kw: Any) -> JobSpec:
    return placeholder_job_for(
        pod or page_pod("full-node-h100"), req, HOOKS, scheduler=SCHEDULER, **kw
    )


# ---- the example Pods of SUNK's "Schedule Kubernetes Pods with Slurm" -------------------------


def test_full_node_page_pod_becomes_an_exclusive_8_gpu_job() -> None:
    pod = page_pod("full-node-h100")
    spec = placeholder_job_for(pod, request_of(pod), HOOKS, scheduler=SCHEDULER)
    assert spec.name == f"pod:slurm/slurm-test@{UID}:{SCHEDULER}"
    assert spec.shared == "none"
    assert (spec.cpus_per_task, spec.memory_per_node, spec.gres) == (110, 960 * 1024, "gpu:8")
    assert (spec.nodes, spec.tasks) == (1, 1)
    assert spec.account == "root"
    assert spec.comment == "A Kubernetes job"
    assert spec.current_working_directory == "/"
    assert spec.required_nodes is None
    assert spec.excluded_nodes is None


def test_single_gpu_page_pod_is_submitted_as_user_1001_sharing_with_that_user() -> None:
    pod = page_pod("single-gpu-user")
    req = request_of(pod)
    spec = placeholder_job_for(pod, req, HOOKS, scheduler=SCHEDULER)
    assert submit_user(req) == "1001"
    assert spec.shared == "user"
    assert spec.gres == "gpu:1"


def test_annotated_page_pod_carries_its_annotations_into_the_job() -> None:
    pod = page_pod("inference-annotated")
    spec = placeholder_job_for(pod, request_of(pod), HOOKS, scheduler=SCHEDULER)
    assert spec.partition == "gpu"
    assert (spec.constraints, spec.prefer) == ("inference", "gpu")
    assert spec.time_limit_minutes == 90
    assert spec.priority == 100  # submitted as root: set at submit
    assert spec.current_working_directory == "/tmp"
    assert spec.shared == "oversubscribe"
    assert spec.excluded_nodes == "slurm-gpu-small-0"


# ---- sharing modes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "shared"),
    [
        ("none", "none"),
        ("ok", "oversubscribe"),
        ("user", "user"),
        ("mcs", "mcs"),
        ("topo", "topo"),
        (None, None),
    ],
)
def test_sharing_mode_maps_to_slurm(mode: str | None, shared: Any) -> None:
    assert job_for(request(exclusive=mode)).shared == shared


def test_a_gpu_pod_without_exclusive_is_told_it_does_not_get_the_whole_node() -> None:
    """SUNK's "SUNK Pod Scheduler" page: "Pod needs the entire Node (all GPUs, or full CPU Node) |
    exclusive: "none""; "Full Node (Default): Pod takes the whole node if it requests GPUs" is
    from SUNK's older "Schedule Kubernetes Pods with Slurm" text (in "Run Workloads"). The
    SlurmJobSubmitted Event's text (describe_job) says so where the user looks."""
    shared_by_default = describe_job(job_for(request(gpus=1)))
    assert shared_by_default.endswith(
        "gpu:1, sharing: the partition's default (set sunk.coreweave.com/exclusive: none for "
        "the whole node)"
    )
    assert "whole node" not in describe_job(job_for(request(gpus=8, exclusive="none")))
    assert "whole node" not in describe_job(job_for(request(gpus=0)))


def test_no_gpus_asks_for_no_gres() -> None:
    assert job_for(request(gpus=0)).gres is None


def test_timeout_becomes_the_time_limit() -> None:
    assert job_for(request(timeout_minutes=45)).time_limit_minutes == 45
    assert job_for(request()).time_limit_minutes is None


# ---- user and priority ----------------------------------------------------------------------


def test_root_job_gets_its_priority_at_submit() -> None:
    req = request(priority=50)
    assert submit_user(req) == ROOT_USER
    assert job_for(req).priority == 50
    assert not priority_update_needed(req)


def test_other_users_job_gets_its_priority_by_an_update_after_submit() -> None:
    req = request(priority=50, user_id=1001)
    assert submit_user(req) == "1001"
    assert job_for(req).priority is None
    assert priority_update_needed(req)


def test_no_priority_needs_no_update() -> None:
    assert not priority_update_needed(request(user_id=1001))
    assert job_for(request()).priority is None


def test_user_id_zero_is_submitted_as_uid_zero() -> None:
    assert submit_user(request(user_id=0)) == "0"


# ---- node lists -----------------------------------------------------------------------------


def test_excluded_nodes_from_annotation_and_affinity_merge_into_one_hostlist() -> None:
    spec = job_for(request(excluded_nodes=("gpu-1", "gpu-2")), excluded_nodes=["gpu-3", "gpu-1"])
    assert spec.excluded_nodes is not None
    assert hostlist.expand_hostlist(spec.excluded_nodes) == ["gpu-1", "gpu-2", "gpu-3"]
    assert spec.excluded_nodes == "gpu-[1-3]"


def test_affinity_excluded_nodes_alone() -> None:
    assert job_for(request(), excluded_nodes=["cpu-a"]).excluded_nodes == "cpu-a"


def test_required_nodes_come_only_from_the_annotation() -> None:
    spec = job_for(request(required_nodes=("gpu-7",)), excluded_nodes=["gpu-1"])
    assert spec.required_nodes == "gpu-7"
    assert job_for(request(), excluded_nodes=["gpu-1"]).required_nodes is None


@given(
    st.sets(st.integers(min_value=0, max_value=40), max_size=8),
    st.sets(st.integers(min_value=0, max_value=40), max_size=8),
)
def test_excluded_hostlist_is_exactly_the_union(annotated: set[int], derived: set[int]) -> None:
    spec = job_for(
        request(excluded_nodes=tuple(f"n{i}" for i in annotated)),
        excluded_nodes=[f"n{i}" for i in derived],
    )
    expected = {f"n{i}" for i in annotated | derived}
    got = set(hostlist.expand_hostlist(spec.excluded_nodes)) if spec.excluded_nodes else set()
    assert got == expected


# ---- environment and hook credentials -------------------------------------------------------


def test_environment_tells_the_job_how_to_reach_the_hooks_for_its_pod() -> None:
    env = job_for(request()).environment
    assert env[wk.ENV_HOOKS_URL] == "http://hooks.example:8000"
    assert env[wk.ENV_POD_UID] == UID
    assert env[wk.ENV_POD] == "slurm/slurm-test"
    assert env["PATH"]


def test_job_token_speaks_for_its_own_pod_only() -> None:
    token = job_for(request()).environment[wk.ENV_HOOK_TOKEN]
    assert HOOKS.verify(UID, token)
    assert not HOOKS.verify("another-uid", token)


def test_token_from_another_key_is_refused() -> None:
    other = HookCredentials(HOOKS.url, b"another key")
    assert not HOOKS.verify(UID, other.token_for(UID))


def test_non_ascii_token_is_refused_not_an_error() -> None:
    assert not HOOKS.verify(UID, "caf\u00e9")


def test_credentials_repr_hides_the_key() -> None:
    text = repr(HOOKS)
    assert "a-secret-key" not in text
    assert HOOKS.url in text
    assert "a-secret-key" not in str(HOOKS)


def test_script_calls_the_signalled_hook_with_the_token_and_nothing_at_start() -> None:
    """A start is seen in Slurm; a curl per job start slowed a burst's starts."""
    script = job_for(request()).script
    assert script.startswith("#!/bin/sh")
    for word in ("hook signalled", "$SUNK_HOOK_TOKEN", wk.HOOKS_PATH_PREFIX):
        assert word in script
    assert "hook started" not in script


# ---- job names ------------------------------------------------------------------------------


def test_job_name_carries_the_pod_uid_back() -> None:
    assert pod_uid_of(job_name_for(page_pod("single-gpu-user"), SCHEDULER)) == UID


@pytest.mark.parametrize(
    "name", ["train-llm", "pod-like", "pod:ns/name", "pod:ns/name@", "pod:ns/name@:s", ""]
)
def test_ordinary_job_names_carry_no_pod_uid(name: str) -> None:
    assert pod_uid_of(name) is None
    assert parse_job_name(name) is None


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        (f"pod:ns/p@{UID}:{SCHEDULER}", JobName(UID, SCHEDULER)),
        (f"pod:ns/p@{UID}:other-scheduler", JobName(UID, "other-scheduler")),
        (f"pod:ns/p@{UID}", JobName(UID, None)),  # made before names said whose they are
        ("pod-group:ns/g@gang_ns_g:s", JobName("gang_ns_g", "s")),
    ],
)
def test_a_job_name_says_whose_placeholder_it_is(name: str, parsed: JobName) -> None:
    """Two schedulers on one Slurm tell their jobs apart by name."""
    assert parse_job_name(name) == parsed
    assert pod_uid_of(name) == parsed.key


@given(
    st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,30}[a-z0-9])?", fullmatch=True),
    st.uuids(),
)
def test_job_name_round_trips_any_pod(namespace: str, name: str, uid: Any) -> None:
    pod = {"metadata": {"namespace": namespace, "name": name, "uid": str(uid)}}
    assert parse_job_name(job_name_for(pod, SCHEDULER)) == JobName(str(uid), SCHEDULER)


# ---- node affinity (which Slurm nodes get excluded) -----------------------------------------


def test_page_pod_affinity_matches_h100_nodes_only() -> None:
    pod = page_pod("full-node-h100")
    assert has_node_constraints(pod)
    assert node_matches(pod, H100)
    assert not node_matches(pod, {wk.NODE_LABEL_GPU_MODEL: "A100"})
    assert not node_matches(pod, {})


def test_pod_without_constraints_matches_every_node() -> None:
    pod = page_pod("inference-annotated")
    assert not has_node_constraints(pod)
    assert node_matches(pod, {})


def test_node_selector_must_match_exactly() -> None:
    pod = {"spec": {"nodeSelector": {"zone": "a"}}}
    assert node_matches(pod, {"zone": "a", "other": "x"})
    assert not node_matches(pod, {"zone": "b"})


def affinity_pod(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    required = {"nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}
    return {
        "spec": {
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
            }
        }
    }


@pytest.mark.parametrize(
    ("expression", "labels", "matches"),
    [
        ({"key": "k", "operator": "NotIn", "values": ["a"]}, {"k": "b"}, True),
        ({"key": "k", "operator": "NotIn", "values": ["a"]}, {}, True),
        ({"key": "k", "operator": "NotIn", "values": ["a"]}, {"k": "a"}, False),
        ({"key": "k", "operator": "Exists"}, {"k": ""}, True),
        ({"key": "k", "operator": "DoesNotExist"}, {"k": ""}, False),
        ({"key": "k", "operator": "Gt", "values": ["4"]}, {"k": "8"}, True),
        ({"key": "k", "operator": "Lt", "values": ["4"]}, {"k": "8"}, False),
        ({"key": "k", "operator": "Gt", "values": ["4"]}, {"k": "eight"}, False),
        ({"key": "k", "operator": "Sometimes"}, {"k": "a"}, False),
    ],
)
def test_affinity_operators(expression: dict[str, Any], labels: dict, matches: bool) -> None:
    assert node_matches(affinity_pod([expression]), labels) is matches


def test_affinity_terms_are_ored_and_expressions_anded() -> None:
    a = {"key": "a", "operator": "Exists"}
    b = {"key": "b", "operator": "Exists"}
    assert node_matches(affinity_pod([a], [b]), {"b": "1"})
    assert not node_matches(affinity_pod([a, b]), {"b": "1"})
