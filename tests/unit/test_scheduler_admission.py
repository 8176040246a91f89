"""Admission: which Pods the scheduler takes, what it asks Slurm for, and how it says no."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from reconciler import wellknown as wk
from reconciler.config.defaults import default_scheduler_name
from reconciler.errors import ConfigTypeError
from reconciler.scheduler.decide.admission import PodRequest, Rejection, admit, fingerprint
from reconciler.scheduler.settings import DEFAULT_KILL_WAIT_SECONDS, settings_from_values

PODS = Path(__file__).resolve().parents[2] / "fixtures" / "pods"
MIB = 1024 * 1024


def page_pod(name: str) -> dict[str, Any]:
    return yaml.safe_load((PODS / f"{name}.yaml").read_text())


def pod(
    *containers: dict[str, Any],
    annotations: dict[str, str] | None = None,
    grace: int | None = 5,
    init: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers) or [container()]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    if init is not None:
        spec["initContainers"] = init
    return {"metadata": {"name": "p", "annotations": annotations or {}}, "spec": spec}


def container(
    name: str = "main", limits: dict[str, Any] | None = None, gpus: Any = None, **requests: Any
) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "1Gi", **requests, wk.RESOURCE_NVIDIA_GPU: gpus}
    requests = {k: v for k, v in requests.items() if v is not None}
    resources: dict[str, Any] = {"requests": requests}
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "resources": resources}


def admitted(p: dict[str, Any], **kw: Any) -> PodRequest:
    result = admit(p, kill_wait_seconds=kw.pop("kill_wait_seconds", 30), **kw)
    assert isinstance(result, PodRequest), result
    return result


def refused(p: dict[str, Any], **kw: Any) -> Rejection:
    result = admit(p, kill_wait_seconds=kw.pop("kill_wait_seconds", 30), **kw)
    assert isinstance(result, Rejection), result
    return result


def fields_of(rejection: Rejection) -> list[str]:
    return [problem.field for problem in rejection.problems]


def annotation_field(key: str) -> str:
    return f"metadata.annotations[{key!r}]"


# ---- the example Pods of SUNK's "Schedule Kubernetes Pods with Slurm" -------------------------


def test_full_node_page_pod_asks_for_the_whole_h100_node() -> None:
    request = admitted(page_pod("full-node-h100"))
    assert (request.cpus, request.memory_mb, request.gpus) == (110, 960 * 1024, 8)
    assert request.account == "root"
    assert request.comment == "A Kubernetes job"
    assert request.exclusive == "none"
    assert request.grace_seconds == 5
    assert request.user_id is None


def test_single_gpu_page_pod_runs_as_user_1001_sharing_only_with_that_user() -> None:
    request = admitted(page_pod("single-gpu-user"))
    assert (request.cpus, request.memory_mb, request.gpus) == (8, 128 * 1024, 1)
    assert request.exclusive == "user"
    assert request.user_id == 1001


def test_annotated_page_pod_carries_every_annotation_typed() -> None:
    request = admitted(page_pod("inference-annotated"))
    assert request.cpus == 1  # 500m rounds up
    assert request.memory_mb == 512
    assert request.partition == "gpu"
    assert request.constraints == "inference"
    assert request.prefer == "gpu"
    assert request.excluded_nodes == ("slurm-gpu-small-0",)
    assert request.priority == 100
    assert request.timeout_minutes == 90
    assert request.working_dir == "/tmp"
    assert request.exclusive == "ok"


# ---- resources ------------------------------------------------------------------------------


def test_half_a_cpu_asks_slurm_for_one() -> None:
    assert admitted(pod(container(cpu="500m"))).cpus == 1


def test_cpus_are_the_ceiling_of_the_sum_over_containers() -> None:
    assert admitted(pod(container("a", cpu="1.5"), container("b", cpu="1"))).cpus == 3


def test_memory_is_in_mib_rounded_up() -> None:
    assert admitted(pod(container(memory="1Gi"))).memory_mb == 1024
    assert admitted(pod(container(memory="1M"))).memory_mb == 1  # 10^6 bytes < 1 MiB
    assert admitted(pod(container(memory=str(MIB + 1)))).memory_mb == 2


def test_gpus_come_from_requests() -> None:
    assert admitted(pod(container(gpus="2"))).gpus == 2


def test_gpu_limit_alone_implies_the_request() -> None:
    assert admitted(pod(container(limits={wk.RESOURCE_NVIDIA_GPU: "4"}))).gpus == 4


def test_no_gpu_asks_for_none() -> None:
    assert admitted(pod()).gpus == 0


def test_init_containers_count_as_their_largest() -> None:
    init = [container("i1", cpu="4", memory="1Mi"), container("i2", cpu="1", memory="8Gi")]
    request = admitted(pod(container(cpu="2", memory="1Gi"), init=init))
    assert (request.cpus, request.memory_mb) == (4, 8 * 1024)


def test_init_container_smaller_than_the_sum_changes_nothing() -> None:
    init = [container("i", cpu="1", memory="1Gi")]
    request = admitted(pod(container("a", cpu="2"), container("b", cpu="2"), init=init))
    assert (request.cpus, request.memory_mb) == (4, 2048)


def test_init_container_need_not_request_anything() -> None:
    assert admitted(pod(init=[{"name": "setup"}])).cpus == 1


@given(st.lists(st.integers(min_value=1, max_value=200_000), min_size=1, max_size=5))
def test_cpus_property_ceiling_of_summed_millicores(millis: list[int]) -> None:
    containers = [container(f"c{i}", cpu=f"{m}m") for i, m in enumerate(millis)]
    assert admitted(pod(*containers)).cpus == math.ceil(sum(millis) / 1000)


@given(st.lists(st.integers(min_value=1, max_value=10**12), min_size=1, max_size=5))
def test_memory_property_mib_rounded_up(sizes: list[int]) -> None:
    containers = [container(f"c{i}", memory=str(b)) for i, b in enumerate(sizes)]
    assert admitted(pod(*containers)).memory_mb == math.ceil(sum(sizes) / MIB)


@pytest.mark.parametrize("resource", ["cpu", "memory"])
@pytest.mark.parametrize("value", [None, "0", 0, "0Mi"])
def test_missing_or_zero_request_is_refused(resource: str, value: Any) -> None:
    rejection = refused(pod(container(**{resource: value})))
    assert fields_of(rejection) == [f"spec.containers[0].resources.requests.{resource}"]
    assert "non-zero" in rejection.message()
    assert "main" in rejection.message()  # names the container


def test_a_request_missing_in_any_container_is_refused() -> None:
    rejection = refused(pod(container("ok"), container("sidecar", cpu=None)))
    assert fields_of(rejection) == ["spec.containers[1].resources.requests.cpu"]
    assert "'sidecar'" in rejection.message()


def test_container_without_resources_gets_both_problems() -> None:
    rejection = refused(pod({"name": "bare"}))
    assert fields_of(rejection) == [
        "spec.containers[0].resources.requests.cpu",
        "spec.containers[0].resources.requests.memory",
    ]


def test_a_limit_without_a_request_is_the_request_as_the_api_server_defaults_it() -> None:
    # SetDefaults_Pod copies limits into missing requests, so a Pod read from the API server
    # never has a limit alone; a manifest checked before it is applied is counted the same.
    bare = {"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}
    request = admitted(pod(bare))
    assert (request.cpus, request.memory_mb) == (2, 1024)


def test_no_request_and_no_limit_is_refused_naming_both_fields() -> None:
    bare = {"name": "c", "resources": {"limits": {wk.RESOURCE_NVIDIA_GPU: "1"}}}
    assert fields_of(refused(pod(bare))) == [
        "spec.containers[0].resources.requests.cpu",
        "spec.containers[0].resources.requests.memory",
    ]


def sidecar(cpu: str, memory: str = "1Gi") -> dict[str, Any]:
    return {**container("sidecar", cpu=cpu, memory=memory), "restartPolicy": "Always"}


# What Slurm is asked for is Kubernetes' PodRequests (component-helpers resource.PodRequests):
# (containers, init containers, overhead) -> (cpus, memory MiB).
POD_REQUESTS_ROWS = [
    ("a sidecar runs beside a later init container: max(100 + 10, 200 + 10) = 210",
     [container(cpu="100")], [sidecar("10"), container("init", cpu="200")], None, (210, 2048)),
    ("an ordinary init container larger than the containers wins",
     [container(cpu="1")], [container("init", cpu="4")], None, (4, 1024)),
    ("containers larger than the init container",
     [container(cpu="2"), container("b", cpu="3")], [container("init", cpu="2")], None,
     (5, 2048)),
    ("overhead is added to the larger of the two",
     [container(cpu="2"), container("b", cpu="3")], [container("init", cpu="2")],
     {"cpu": "1", "memory": "1Gi"}, (6, 3072)),
    ("a sidecar started after an init container does not run beside it",
     [container(cpu="1")], [container("init", cpu="4"), sidecar("2")], None, (4, 2048)),
    ("sidecars run beside the containers and each other",
     [container(cpu="1")], [sidecar("2"), sidecar("3")], None, (6, 3072)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "containers", "init", "overhead", "expected"),
    POD_REQUESTS_ROWS,
    ids=[row[0] for row in POD_REQUESTS_ROWS],
)
def test_slurm_is_asked_for_what_kubernetes_counts(
    case: str,
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]],
    overhead: dict[str, str] | None,
    expected: tuple[int, int],
) -> None:
    p = pod(*containers, init=init)
    if overhead:
        p["spec"]["overhead"] = overhead
    request = admitted(p)
    assert (request.cpus, request.memory_mb) == expected


def test_a_bad_overhead_quantity_is_refused_naming_the_field() -> None:
    p = pod(container())
    p["spec"]["overhead"] = {"cpu": "lots"}
    assert fields_of(refused(p)) == ["spec.overhead.cpu"]


def test_pod_without_containers_is_refused() -> None:
    p = pod()
    p["spec"]["containers"] = []
    assert "spec.containers" in fields_of(refused(p))


def test_bad_quantity_is_refused_naming_the_field() -> None:
    rejection = refused(pod(container(memory="16GB")))
    assert "spec.containers[0].resources.requests.memory" in fields_of(rejection)
    assert "quantity" in rejection.message()


def test_fractional_gpus_are_refused() -> None:
    rejection = refused(pod(container(gpus="500m")))
    assert fields_of(rejection) == [
        f"spec.containers[0].resources.requests.{wk.RESOURCE_NVIDIA_GPU}"
    ]
    assert "whole GPUs" in rejection.message()


# ---- grace period against KillWait ------------------------------------------------------------


def test_grace_just_below_kill_wait_minus_five_passes() -> None:
    assert admitted(pod(grace=24), kill_wait_seconds=30).grace_seconds == 24


def test_grace_at_kill_wait_minus_five_is_refused_and_says_what_to_set() -> None:
    rejection = refused(pod(grace=25), kill_wait_seconds=30)
    assert fields_of(rejection) == ["spec.terminationGracePeriodSeconds"]
    assert "24 or less" in rejection.message()


def test_absent_grace_is_the_api_default_of_30_seconds() -> None:
    refused(pod(grace=None), kill_wait_seconds=30)
    assert admitted(pod(grace=None), kill_wait_seconds=36).grace_seconds == 30
    refused(pod(grace=None), kill_wait_seconds=35)


def test_zero_grace_passes() -> None:
    assert admitted(pod(grace=0)).grace_seconds == 0


@given(st.integers(min_value=0, max_value=600), st.integers(min_value=0, max_value=700))
def test_grace_property_admitted_iff_below_kill_wait_minus_five(kill_wait: int, grace: int) -> None:
    result = admit(pod(grace=grace), kill_wait_seconds=kill_wait)
    assert isinstance(result, PodRequest) == (grace < kill_wait - 5)


# ---- annotations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", [wk.ANNOTATION_PRIORITY, wk.ANNOTATION_USER_ID, wk.ANNOTATION_GROUP_ID,
            wk.ANNOTATION_TIMEOUT],
)  # fmt: skip
@pytest.mark.parametrize("value", ["high", "1.5", "", "12abc"])
def test_non_integer_annotation_is_refused(key: str, value: str) -> None:
    rejection = refused(pod(annotations={key: value}))
    assert fields_of(rejection) == [annotation_field(key)]
    assert "integer" in rejection.message()


def test_integer_annotations_are_typed() -> None:
    request = admitted(
        pod(annotations={wk.ANNOTATION_USER_ID: "1001", wk.ANNOTATION_GROUP_ID: " 2002 ",
                         wk.ANNOTATION_TIMEOUT: "60", wk.ANNOTATION_PRIORITY: "1"})
    )  # fmt: skip
    assert (request.user_id, request.group_id, request.timeout_minutes) == (1001, 2002, 60)
    assert request.priority == 1


@pytest.mark.parametrize(
    ("key", "value"),
    [(wk.ANNOTATION_TIMEOUT, "0"), (wk.ANNOTATION_USER_ID, "-1"), (wk.ANNOTATION_PRIORITY, "0")],
)
def test_integer_annotation_below_its_minimum_is_refused(key: str, value: str) -> None:
    rejection = refused(pod(annotations={key: value}))
    assert fields_of(rejection) == [annotation_field(key)]
    assert "or more" in rejection.message()


@pytest.mark.parametrize("mode", ["none", "ok", "user", "mcs"])
def test_exclusive_modes_pass_through(mode: str) -> None:
    assert admitted(pod(annotations={wk.ANNOTATION_EXCLUSIVE: mode})).exclusive == mode


def test_exclusive_is_case_and_space_insensitive() -> None:
    assert admitted(pod(annotations={wk.ANNOTATION_EXCLUSIVE: " User "})).exclusive == "user"


def test_legacy_exclusive_true_means_whole_node() -> None:
    assert admitted(pod(annotations={wk.ANNOTATION_EXCLUSIVE: "true"})).exclusive == "none"


def test_legacy_exclusive_false_means_the_partition_default() -> None:
    assert admitted(pod(annotations={wk.ANNOTATION_EXCLUSIVE: "false"})).exclusive is None


def test_no_exclusive_annotation_means_the_partition_default() -> None:
    assert admitted(pod()).exclusive is None


@pytest.mark.parametrize("value", ["yes", "whole", "", "exclusive"])
def test_unknown_exclusive_mode_is_refused_listing_the_modes(value: str) -> None:
    rejection = refused(pod(annotations={wk.ANNOTATION_EXCLUSIVE: value}))
    assert fields_of(rejection) == [annotation_field(wk.ANNOTATION_EXCLUSIVE)]
    for mode in ("none", "ok", "user", "mcs", "topo"):
        assert mode in rejection.message()


def test_topo_on_slurm_22_05_is_refused_naming_the_version_needed() -> None:
    rejection = refused(pod(annotations={wk.ANNOTATION_EXCLUSIVE: "topo"}), slurm_version=(22, 5))
    assert fields_of(rejection) == [annotation_field(wk.ANNOTATION_EXCLUSIVE)]
    assert "24.11" in rejection.message()
    assert "22.05" in rejection.message()


def test_topo_on_slurm_24_11_passes() -> None:
    p = pod(annotations={wk.ANNOTATION_EXCLUSIVE: "topo"})
    assert admitted(p, slurm_version=(24, 11)).exclusive == "topo"


def test_node_lists_expand_hostlists_and_drop_duplicates() -> None:
    request = admitted(
        pod(annotations={wk.ANNOTATION_EXCLUDED_NODES: "gpu-[1-3], gpu-2,cpu-a",
                         wk.ANNOTATION_REQUIRED_NODES: "gpu-9"})
    )  # fmt: skip
    assert request.excluded_nodes == ("gpu-1", "gpu-2", "gpu-3", "cpu-a")
    assert request.required_nodes == ("gpu-9",)


@pytest.mark.parametrize("key", [wk.ANNOTATION_EXCLUDED_NODES, wk.ANNOTATION_REQUIRED_NODES])
@pytest.mark.parametrize("value", ["gpu-[1-", "gpu-[3-1]"])
def test_invalid_hostlist_is_refused(key: str, value: str) -> None:
    rejection = refused(pod(annotations={key: value}))
    assert fields_of(rejection) == [annotation_field(key)]
    assert value in rejection.message()


def test_relative_working_dir_is_refused() -> None:
    rejection = refused(pod(annotations={wk.ANNOTATION_CWD: "data/run"}))
    assert fields_of(rejection) == [annotation_field(wk.ANNOTATION_CWD)]
    assert "absolute" in rejection.message()


def test_string_annotations_are_stripped_and_blank_ones_ignored() -> None:
    request = admitted(pod(annotations={wk.ANNOTATION_QOS: " high ", wk.ANNOTATION_ACCOUNT: " "}))
    assert request.qos == "high"
    assert request.account is None


def test_other_annotations_are_ignored() -> None:
    assert admitted(pod(annotations={"example.com/priority": "high"})).priority is None


def test_every_problem_is_reported_at_once() -> None:
    p = pod(
        container("a", cpu=None),
        container("b", memory="0"),
        grace=60,
        annotations={
            wk.ANNOTATION_PRIORITY: "high",
            wk.ANNOTATION_USER_ID: "bob",
            wk.ANNOTATION_EXCLUSIVE: "sometimes",
            wk.ANNOTATION_EXCLUDED_NODES: "n[",
            wk.ANNOTATION_CWD: "relative",
        },
    )
    assert sorted(fields_of(refused(p))) == sorted(
        [
            "spec.containers[0].resources.requests.cpu",
            "spec.containers[1].resources.requests.memory",
            "spec.terminationGracePeriodSeconds",
            annotation_field(wk.ANNOTATION_PRIORITY),
            annotation_field(wk.ANNOTATION_USER_ID),
            annotation_field(wk.ANNOTATION_EXCLUSIVE),
            annotation_field(wk.ANNOTATION_EXCLUDED_NODES),
            annotation_field(wk.ANNOTATION_CWD),
        ]
    )


def test_rejection_message_joins_field_and_advice() -> None:
    message = refused(pod(annotations={wk.ANNOTATION_TIMEOUT: "soon"})).message()
    assert message.startswith(f"{annotation_field(wk.ANNOTATION_TIMEOUT)}: ")


# ---- fingerprint ----------------------------------------------------------------------------


def test_fingerprint_ignores_what_the_scheduler_writes_on_the_pod() -> None:
    p = page_pod("full-node-h100")
    marked = copy.deepcopy(p)
    marked["metadata"]["annotations"][wk.ANNOTATION_REJECTED] = fingerprint(p)
    marked["metadata"]["annotations"][wk.ANNOTATION_JOB_ID] = "12"
    assert fingerprint(marked) == fingerprint(p)


def test_fingerprint_changes_with_a_user_annotation_or_the_spec() -> None:
    p = page_pod("full-node-h100")
    annotated = copy.deepcopy(p)
    annotated["metadata"]["annotations"][wk.ANNOTATION_EXCLUSIVE] = "user"
    regraced = copy.deepcopy(p)
    regraced["spec"]["terminationGracePeriodSeconds"] = 4
    assert len({fingerprint(p), fingerprint(annotated), fingerprint(regraced)}) == 3


def test_fingerprint_does_not_depend_on_key_order() -> None:
    a = pod(annotations={wk.ANNOTATION_QOS: "q", wk.ANNOTATION_ACCOUNT: "a"})
    b = pod(annotations={wk.ANNOTATION_ACCOUNT: "a", wk.ANNOTATION_QOS: "q"})
    assert fingerprint(a) == fingerprint(b)


# ---- settings: where kill-wait and the scheduler name come from -----------------------------


def test_scheduler_name_defaults_to_namespace_release_slurm_scheduler() -> None:
    assert (
        default_scheduler_name("tenant-slurm", "staging") == "tenant-slurm-staging-slurm-scheduler"
    )
    settings = settings_from_values({}, release="staging", namespace="tenant-slurm")
    assert settings.name == "tenant-slurm-staging-slurm-scheduler"


def test_settings_default_to_slurms_kill_wait_and_the_own_namespace() -> None:
    settings = settings_from_values({}, release="r", namespace="ns")
    assert settings.kill_wait_seconds == DEFAULT_KILL_WAIT_SECONDS == 30
    assert settings.watch_namespaces == ("ns",)
    assert settings.hooks_secret_name == f"r{wk.HOOKS_SECRET_SUFFIX}"


def test_settings_kill_wait_from_scheduler_then_slurm_config() -> None:
    slurm_only = {"slurmConfig": {"killWait": 60}}
    both = {"scheduler": {"killWait": 90}, "slurmConfig": {"killWait": 60}}
    assert settings_from_values(slurm_only, release="r", namespace="n").kill_wait_seconds == 60
    assert settings_from_values(both, release="r", namespace="n").kill_wait_seconds == 90


def test_settings_scope() -> None:
    cluster = {"scheduler": {"scope": {"type": "cluster"}}}
    listed = {"scheduler": {"scope": {"type": "namespace", "namespaces": "a, b,a,"}}}
    as_list = {"scheduler": {"scope": {"namespaces": ["x", "y"]}}}
    assert settings_from_values(cluster, release="r", namespace="n").watch_namespaces is None
    assert settings_from_values(listed, release="r", namespace="n").watch_namespaces == ("a", "b")
    assert settings_from_values(as_list, release="r", namespace="n").watch_namespaces == ("x", "y")


def test_settings_overrides_win_unless_none() -> None:
    values = {"scheduler": {"name": "custom"}}
    settings = settings_from_values(values, release="r", namespace="n", workers=2, name=None)
    assert (settings.name, settings.workers) == ("custom", 2)


@pytest.mark.parametrize("value", ["+5", "1_000", "\u0661\u0662", "0x10", "1e3"])
def test_integer_annotations_take_plain_decimal_digits_only(value: str) -> None:
    rejection = refused(pod(annotations={wk.ANNOTATION_TIMEOUT: value}))
    assert "must be an integer" in rejection.message()


def test_node_lists_ignore_all_whitespace() -> None:
    request = admitted(pod(annotations={wk.ANNOTATION_EXCLUDED_NODES: "a-1,\n a-2\t"}))
    assert request.excluded_nodes == ("a-1", "a-2")


def test_settings_gang_policy_and_bin_packed_partitions() -> None:
    default = settings_from_values({}, release="r", namespace="n")
    assert (default.gang_failure_policy, default.bin_pack_partitions) == ("restart", ())
    values = {"scheduler": {"gangFailurePolicy": "keep-going", "binPackPartitions": "gpu, all"}}
    settings = settings_from_values(values, release="r", namespace="n")
    assert settings.gang_failure_policy == "keep-going"
    assert settings.bin_pack_partitions == ("gpu", "all")


def test_an_unknown_gang_policy_names_the_key_and_the_choices() -> None:
    with pytest.raises(
        ConfigTypeError, match=r"scheduler.gangFailurePolicy: must be one of restart"
    ):
        settings_from_values(
            {"scheduler": {"gangFailurePolicy": "retry"}}, release="r", namespace="n"
        )


def test_gang_annotations_count_in_the_refusal_fingerprint() -> None:
    """A gang member refused for its min-member annotation is looked at again once fixed."""
    member = pod(annotations={wk.ANNOTATION_POD_GROUP_MIN_MEMBER: "x"})
    fixed = copy.deepcopy(member)
    fixed["metadata"]["annotations"][wk.ANNOTATION_POD_GROUP_MIN_MEMBER] = "2"
    assert fingerprint(member) != fingerprint(fixed)
    status = copy.deepcopy(member)
    status["metadata"]["annotations"][wk.ANNOTATION_JOB_ID] = "12"
    assert fingerprint(member) == fingerprint(status)
