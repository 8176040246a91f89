"""Placement end to end: gangs, pod anti-affinity and topology spread, and bin-packing, on the
real local stack with four identical GPU nodes (4 GPUs and 4 CPUs each), so that where Slurm
puts each job is what is being tested.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from reconciler import wellknown as wk
from reconciler.local.slurm.install import slurm_install
from reconciler.scheduler.decide.packing_decide import Fragmentation, fragmentation
from reconciler.slurm_release import maybe_release
from tests.integration.helpers import create_pod_group, install_pod_group_crd, unique, wait_for
from tests.integration.test_scheduler import (
    NAMESPACE,
    ON_SLURM_2205,
    SCHEDULER,
    Env,
    _create,
    _events,
    _kube_node_of,
    _live_placeholders,
    _pod,
    _pod_spec,
    _show_job,
    _submit_plain,
    _wait_bound,
    _wait_gone,
    scheduler_env,
)

pytestmark = pytest.mark.integration

GPU_NODES = [f"slurm-gpu-small-{i}" for i in range(4)]
FOUR_GPU_NODES = """
compute:
  nodes:
    gpu-small:
      replicas: 4
      maxReplicas: 4
      gresGpu: quadro_rtx_4000:4
    cpu:
      enabled: false
  # LLN: Slurm alone spreads small jobs over the least loaded nodes, as a SUNK cluster does.
  partitions: |
    PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP LLN=YES
    PartitionName=gpu Nodes=gpu-small MaxTime=INFINITE State=UP PriorityTier=10
"""


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    yield from scheduler_env(FOUR_GPU_NODES, "place", "placement tests", stack_timings)


def _gpu_pod(name: str, **extra: Any) -> dict[str, Any]:
    manifest = _pod_spec(name, **extra)
    manifest["spec"]["containers"][0]["resources"]["limits"] = {wk.RESOURCE_NVIDIA_GPU: "1"}
    return manifest


def _gang(env: Env, pods: list[str], size: int, min_member: int, **extra: str) -> list[str]:
    group = unique("gang")
    annotations = {
        wk.ANNOTATION_POD_GROUP: group,
        wk.ANNOTATION_POD_GROUP_MIN_MEMBER: str(min_member),
        **extra,
    }
    names = [f"{group}-{i}" for i in range(size)]
    for name in names:
        _create(env, pods, _gpu_pod(name, annotations=annotations))
    return names


def _node_of(env: Env, name: str) -> str | None:
    pod = _pod(env, name)
    return (pod or {}).get("spec", {}).get("nodeName")


def _hold_nodes(env: Env, jobs: list[int], nodes: list[str]) -> list[int]:
    """Plain Slurm jobs that take these whole nodes."""
    held = [_submit_plain(env, jobs, required_nodes=node, nodes=1, shared="none") for node in nodes]
    wait_for(lambda: all(env.api.job(j).state == "RUNNING" for j in held), 20, "the node holders")
    return held


def test_a_gang_waits_for_all_its_nodes_then_binds_every_pod_at_once(
    env: Env, pods: list[str], plain_jobs: list[int]
) -> None:
    """Two of four nodes taken by Slurm jobs: a 3-Pod gang stays pending with no Pod bound;
    when a third node frees, all three are bound, each on its own node of ONE Slurm job."""
    held = _hold_nodes(env, plain_jobs, GPU_NODES[2:])
    names = _gang(env, pods, 3, 3)
    job_id = wait_for(lambda: _gang_job_id(env, names), 20, "the gang's job id on every member")
    assert len({_job_of(env, n) for n in names}) == 1, "one Slurm job for the whole gang"
    job = _show_job(env, job_id)
    assert job["NumNodes"].startswith("3") and job["JobState"] == "PENDING", job
    time.sleep(4)  # several scheduling cycles: Slurm must not start it on two nodes
    assert env.api.job(job_id).state == "PENDING"
    assert [n for n in names if _node_of(env, n)] == [], "no Pod of a partial gang is bound"

    env.api.cancel(held[0])
    bound = [_wait_bound(env, n, 30) for n in names]
    slurm_nodes = {p["metadata"]["annotations"][wk.ANNOTATION_SLURM_NODE] for p in bound}
    assert len(slurm_nodes) == 3, "each member on its own node"
    assert slurm_nodes == set(env.slurm.run("scontrol", "show", "hostnames", _show_job(
        env, job_id)["NodeList"]).split())  # fmt: skip
    assert {_job_of(env, n) for n in names} == {job_id}


def _job_of(env: Env, name: str) -> int | None:
    raw = ((_pod(env, name) or {}).get("metadata", {}).get("annotations") or {}).get(
        wk.ANNOTATION_JOB_ID
    )
    return int(raw) if raw else None


def _gang_job_id(env: Env, names: list[str]) -> int | None:
    ids = {_job_of(env, n) for n in names}
    return ids.pop() if len(ids) == 1 and None not in ids else None


def test_a_gang_job_says_which_scheduler_made_it(env: Env, pods: list[str]) -> None:
    """Another scheduler on the same Slurm never takes this gang's job for its own
    (it used to cancel it: no member of its own)."""
    names = _gang(env, pods, 2, 2)
    for name in names:
        _wait_bound(env, name, 30)
    job_id = _job_of(env, names[0])
    job = env.api.job(job_id) if job_id is not None else None
    assert job is not None
    group = names[0].rsplit("-", 1)[0]
    expected = f"pod-group:{NAMESPACE}/{group}@gang_{NAMESPACE}_{group}:{SCHEDULER}"
    assert job.name == expected
    assert job.admin_comment == ("" if ON_SLURM_2205 else expected)


def test_restart_policy_ends_the_whole_gang_when_a_member_is_deleted(
    env: Env, pods: list[str]
) -> None:
    names = _gang(env, pods, 2, 2)
    for name in names:
        _wait_bound(env, name, 30)
    job_id = _job_of(env, names[0])
    assert job_id is not None
    env.kube.delete("v1", "Pod", names[0], NAMESPACE, grace_period_seconds=0)
    _wait_gone(env, names[1], 30)
    wait_for(lambda: env.api.job(job_id).state != "RUNNING", 30, "the gang's job to end")
    assert _events(env, names[1], wk.EVENT_GANG_RESTART)


def test_keep_going_policy_gives_the_free_node_to_a_new_member(env: Env, pods: list[str]) -> None:
    policy = {wk.ANNOTATION_GANG_POLICY: "keep-going"}
    names = _gang(env, pods, 2, 2, **policy)
    bound = {n: _wait_bound(env, n, 30)["spec"]["nodeName"] for n in names}
    job_id = _job_of(env, names[0])
    env.kube.delete("v1", "Pod", names[0], NAMESPACE, grace_period_seconds=0)
    _wait_gone(env, names[0])
    time.sleep(1)
    assert _node_of(env, names[1]) == bound[names[1]], "the other member keeps running"
    assert env.api.job(job_id).state == "RUNNING"
    group = names[0].rsplit("-", 1)[0]
    replacement = f"{group}-new"
    annotations = {
        wk.ANNOTATION_POD_GROUP: group, wk.ANNOTATION_POD_GROUP_MIN_MEMBER: "2", **policy
    }  # fmt: skip
    _create(env, pods, _gpu_pod(replacement, annotations=annotations))
    assert _wait_bound(env, replacement, 30)["spec"]["nodeName"] == bound[names[0]]
    assert _job_of(env, replacement) == job_id


def test_a_gang_of_pod_group_crd_members_runs_as_one_job(env: Env, pods: list[str]) -> None:
    install_pod_group_crd(env.kube, NAMESPACE)
    group = unique("pg")
    create_pod_group(env.kube, NAMESPACE, group, 2)
    names = [f"{group}-{i}" for i in range(2)]
    for name in names:
        manifest = _gpu_pod(name)
        manifest["metadata"]["labels"] = {wk.LABEL_POD_GROUP: group}
        _create(env, pods, manifest)
    bound = [_wait_bound(env, n, 30) for n in names]
    assert len({p["spec"]["nodeName"] for p in bound}) == 2
    assert len({_job_of(env, n) for n in names}) == 1


def _place_one_gpu_pods(env: Env, pods: list[str], count: int) -> list[str]:
    """Slurm nodes of `count` single-GPU Pods created at once."""
    names = [unique("one-gpu") for _ in range(count)]
    for name in names:
        _create(env, pods, _gpu_pod(name))
    bound = [_wait_bound(env, n, 60) for n in names]
    return [p["metadata"]["annotations"][wk.ANNOTATION_SLURM_NODE] for p in bound]


def _gpu_fragmentation(env: Env) -> Fragmentation:
    return fragmentation([n for n in env.api.nodes().items if n.name in GPU_NODES])


def _delete_all(env: Env, pods: list[str]) -> None:
    for name in pods:
        env.kube.delete("v1", "Pod", name, NAMESPACE, grace_period_seconds=0)
    for name in pods:
        _wait_gone(env, name)
    pods.clear()
    try:
        # A job cancelled to be submitted again (a bind-time check refused its node) whose
        # script has not heard "gone" ends at the latest when Slurm kills it, KillWait (30 s
        # in the fixture) after the cancel: a 30 s wait raced that bound once in CI.
        wait_for(lambda: not _live_placeholders(env), 60, "placeholder jobs to end")
    except AssertionError as exc:  # which jobs, and what the scheduler holds of them
        live = [(j.job_id, j.name, j.state, j.nodes) for j in _live_placeholders(env)]
        held = {k: (j.job_id, j.state) for k, j in env.scheduler.known_jobs().items()}
        raise AssertionError(f"{exc}: live {live}; the scheduler holds {held}") from None


def test_bin_packing_fills_two_nodes_where_slurm_alone_spreads_over_four(
    env: Env, pods: list[str]
) -> None:
    """8 single-GPU Pods on 4 idle 4-GPU nodes: Slurm's own choice (an LLN partition) puts
    2 on each node and strands 8 GPUs; with the partition bin-packed they fill 2 nodes and
    leave 2 whole nodes for a full-node job."""
    spread = _place_one_gpu_pods(env, pods, 8)
    spread_figure = _gpu_fragmentation(env)
    _delete_all(env, pods)

    with _bin_packing(env, pods):
        packed = _place_one_gpu_pods(env, pods, 8)
        packed_figure = _gpu_fragmentation(env)
        weights = {n.name: n.weight for n in env.api.nodes().items if n.name in GPU_NODES}
    print(f"\nbin-packing off: {spread_figure}\nbin-packing on:  {packed_figure}")
    print(f"weights with 8 Pods placed: {weights}")
    assert len(set(packed)) == 2, f"bin-packing fills whole nodes first: {sorted(packed)}"
    assert packed_figure.idle_nodes == 2 and packed_figure.stranded_gpus == 0
    release = maybe_release(slurm_install().version)
    if release is None or not release.at_least(26, 5):
        # 26.05's fast path for one-node jobs (select/cons_tres job_test.c, _get_one_res)
        # orders nodes by weight alone and ignores LLN=YES: Slurm alone no longer spreads.
        assert len(set(spread)) == 4, f"Slurm alone (LLN) spreads: {sorted(spread)}"
        assert spread_figure.idle_nodes == 0 and spread_figure.stranded_gpus == 8


def test_a_partly_used_node_is_filled_before_an_idle_one(
    env: Env, pods: list[str], plain_jobs: list[int]
) -> None:
    """A Slurm job holds 2 GPUs of the last node: with bin-packing a one-GPU Pod goes there,
    not to the idle first node."""
    last = GPU_NODES[-1]
    _submit_plain(env, plain_jobs, required_nodes=last, nodes=1, gres="gpu:2", cpus_per_task=1)
    wait_for(lambda: env.api.job(plain_jobs[-1]).state == "RUNNING", 20, "the plain job")
    with _bin_packing(env, pods):
        assert _place_one_gpu_pods(env, pods, 1) == [last]


@contextlib.contextmanager
def _bin_packing(env: Env, pods: list[str]) -> Iterator[None]:
    """The scheduler with the `all` partition bin-packed; after it, the test's Pods are gone
    and the plain scheduler and weights are back."""
    env.scheduler.stop()
    env.scheduler = env.new_scheduler(bin_pack_partitions=("all",))
    try:
        yield
    finally:
        _delete_all(env, pods)
        env.scheduler.stop()
        env.slurm.run("scontrol", "update", f"NodeName={','.join(GPU_NODES)}", "Weight=1")
        env.scheduler = env.new_scheduler()


# ---- pod anti-affinity and topology spread (bin-packed, so without the rules the Pods would
# share the first node) ------------------------------------------------------------------------


def _labelled_pod(name: str, app: str, **spec: Any) -> dict[str, Any]:
    manifest = _gpu_pod(name, **spec)
    manifest["metadata"]["labels"] = {"app": app}
    return manifest


def test_required_anti_affinity_on_hostname_keeps_replicas_on_distinct_nodes(
    env: Env, pods: list[str]
) -> None:
    app = unique("apart")
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    with _bin_packing(env, pods):
        names = [f"{app}-{i}" for i in range(3)]
        for name in names:  # all at once: their jobs race, the bind-time check must hold
            _create(env, pods, _labelled_pod(name, app, affinity=affinity))
        nodes = [_wait_bound(env, n, 60)["spec"]["nodeName"] for n in names]
        assert len(set(nodes)) == 3, nodes
        last = _show_job(env, _job_id_of(env, names[-1]))
        assert last["ReqNodeList"] == "(null)", "exclusions, never a required pool"


def test_a_bound_pods_anti_affinity_keeps_pods_it_selects_away(env: Env, pods: list[str]) -> None:
    """kube-scheduler's symmetric check: a bound Pod's required anti-affinity selects the new
    Pod, which has no rule of its own, so the new Pod may not join it (bin-packing would put
    it there otherwise)."""
    web = unique("web")
    term = {"labelSelector": {"matchLabels": {"app": web}}, "topologyKey": "kubernetes.io/hostname"}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    with _bin_packing(env, pods):
        loner = unique("loner")
        _create(env, pods, _labelled_pod(loner, loner, affinity=affinity))
        lonely_node = _wait_bound(env, loner, 60)["spec"]["nodeName"]
        newcomer = f"{web}-0"
        _create(env, pods, _labelled_pod(newcomer, web))
        assert _wait_bound(env, newcomer, 60)["spec"]["nodeName"] != lonely_node


def test_topology_spread_on_zone_balances_the_zones(env: Env, pods: list[str]) -> None:
    zones = {node: ("zone-a" if i < 2 else "zone-b") for i, node in enumerate(GPU_NODES)}
    kube_nodes = {slurm: _kube_node_of(env, slurm) for slurm in GPU_NODES}
    for slurm, zone in zones.items():
        _label_node(env, kube_nodes[slurm], {"topology.kubernetes.io/zone": zone})
    app = unique("spread")
    constraint = {
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": app}},
    }  # fmt: skip
    try:
        with _bin_packing(env, pods):
            names = [f"{app}-{i}" for i in range(4)]
            for name in names:  # one by one: each sees the ones before it placed
                _create(env, pods, _labelled_pod(name, app, topologySpreadConstraints=[constraint]))
                _wait_bound(env, name, 60)
            slurm_nodes = [
                _pod(env, n)["metadata"]["annotations"][wk.ANNOTATION_SLURM_NODE] for n in names
            ]
            per_zone = Counter(zones[n] for n in slurm_nodes)
            assert per_zone == {"zone-a": 2, "zone-b": 2}, slurm_nodes
    finally:
        for node in kube_nodes.values():
            _label_node(env, node, {"topology.kubernetes.io/zone": None})


def test_a_topology_key_no_node_carries_is_refused_with_the_reason(
    env: Env, pods: list[str]
) -> None:
    name = unique("rack")
    constraint = {
        "maxSkew": 1, "topologyKey": "example.com/rack", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": name}},
    }  # fmt: skip
    _create(env, pods, _labelled_pod(name, name, topologySpreadConstraints=[constraint]))
    event = wait_for(lambda: _events(env, name, wk.EVENT_REJECTED), 20, "the refusal")[0]
    assert "topologyKey 'example.com/rack' is a label of none of the Nodes" in event["message"]
    assert _job_of(env, name) is None


def _job_id_of(env: Env, name: str) -> int:
    job_id = _job_of(env, name)
    assert job_id is not None
    return job_id


def _label_node(env: Env, node: str, labels: dict[str, str | None]) -> None:
    env.kube.request_json(
        "PATCH", f"/api/v1/nodes/{node}", body={"metadata": {"labels": labels}},
        content_type="application/merge-patch+json",
    )  # fmt: skip
