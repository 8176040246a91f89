"""The Pod scheduler end to end on the real local stack: kube-apiserver, slurmctld, slurmd,
slurmrestd, and the node agent playing kubelet, from fixtures/config-repo plus one H100 node
(the example Pods of SUNK's "Schedule Kubernetes Pods with Slurm" ask for H100s).

The scheduler runs in this process (as `reconciler run` will run it); the kill -9 test runs it
as `reconciler schedule` subprocesses under another scheduler name, so the two never compete.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.adapters.slurm.model import JobSpec, SlurmJob, SlurmRestApi
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import load_config
from reconciler.local.ports import free_port
from reconciler.local.slurm.cluster import SlurmCluster, current_user
from reconciler.local.slurm.install import slurm_install
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.decide.misnamed_decide import SWEEP_SECONDS
from reconciler.scheduler.decide.placeholder import pod_uid_of
from reconciler.scheduler.loop import PodScheduler
from reconciler.scheduler.pod_policies import PodPolicies, startup_pod_policies
from reconciler.scheduler.settings import settings_from_values
from tests.integration.helpers import assert_up_and_bounded, stop_cleanly, unique, wait_for
from tests.integration.local_up import RunningUp, local_up
from tests.integration.stand_ins import HooksStub

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = ROOT / "fixtures" / "config-repo"
PODS = ROOT / "fixtures" / "pods"
NAMESPACE = "slurm"
ON_SLURM_2205 = slurm_install().release == "22.05"
SCHEDULER = "slurm-slurm-slurm-scheduler"
H100_NODE = "slurm-h100-training-0"
# One H100 node, labelled as the example Pods' node affinity expects.
H100_VALUES = """
compute:
  nodes:
    h100-training:
      enabled: true
      replicas: 1
      maxReplicas: 1
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - {key: gpu.nvidia.com/class, operator: In, values: [H100_NVLINK_80GB]}
                  - {key: gpu.nvidia.com/model, operator: In, values: [H100_NVLINK_80GB]}
"""
PLAIN_JOB = "#!/bin/sh\nsleep 600\n"


@dataclass
class Env:
    running: RunningUp
    kube: Kube
    api: SlurmRestApi
    scheduler: PodScheduler
    work: Path
    new_scheduler: Callable[..., PodScheduler]

    @property
    def slurm(self) -> SlurmCluster:
        return self.running.slurm


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    yield from scheduler_env(H100_VALUES, "sched", "scheduler tests", stack_timings)


def scheduler_env(values: str, short: str, label: str, timings: dict[str, float]) -> Iterator[Env]:
    """fixtures/config-repo plus `values` (a values.d file) on a stack of its own, and the
    scheduler in this process."""
    work = Path(tempfile.mkdtemp(prefix=f"sunk-reconciler-{short}-work-"))
    work.chmod(0o755)
    repo = work / "repo"
    shutil.copytree(FIXTURE_REPO, repo)
    (repo / "values.d" / "50-test.yaml").write_text(values)
    try:
        with local_up(
            repo, work / "up.log", prefix=f"sunk-reconciler-{short}-", timings=timings,
            label=label,
        ) as running:  # fmt: skip
            yield from _with_scheduler(running, repo, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _with_scheduler(running: RunningUp, repo: Path, work: Path) -> Iterator[Env]:
    stack = running.stack
    slurm = stack.slurm
    assert slurm is not None
    kube = Kube.from_kubeconfig(stack.kube_paths.kubeconfig)
    values = yaml.safe_load((repo / "values.yaml").read_text())
    settings = settings_from_values(
        values, release="slurm", namespace=NAMESPACE, hooks_host="127.0.0.1", hooks_port=0,
        poll_seconds=2.0,
    )  # fmt: skip
    assert settings.name == SCHEDULER
    key = slurm.paths.jwt_key
    tokens = MintedTokens(key, current_user())
    scontrol = Scontrol(tokens, env=slurm.env())
    clients = SlurmClients(slurm.rest_url(), tokens, jwt_key=key, scontrol=scontrol)

    def new_scheduler(**overrides: Any) -> PodScheduler:
        scheduler = PodScheduler(kube, clients, replace(settings, **overrides))
        scheduler.start()
        return scheduler

    api = connect(slurm.rest_url(), MintedTokens(key, current_user()))
    env = Env(running, kube, api, new_scheduler(), work, new_scheduler)
    try:
        yield env
    finally:
        env.scheduler.stop()
        clients.close()
        api.close()


# ---- helpers ------------------------------------------------------------------------------


def _manifest(file: str) -> dict[str, Any]:
    return yaml.safe_load((PODS / file).read_text())


def _pod_spec(
    name: str,
    *,
    cpu: str = "1",
    memory: str = "256Mi",
    annotations: dict[str, str] | None = None,
    grace: int | None = 5,
    **spec: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "ubuntu"}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    if requests:
        container["resources"] = {"requests": requests}
    body: dict[str, Any] = {"schedulerName": SCHEDULER, "containers": [container], **spec}
    if grace is not None:
        body["terminationGracePeriodSeconds"] = grace
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations or {}},
        "spec": body,
    }


def _create(env: Env, pods: list[str], manifest: dict[str, Any]) -> dict[str, Any]:
    name = manifest["metadata"]["name"]
    pods.append(name)
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    return env.kube.request_json("POST", path, body=manifest, target=f"Pod {name}")


def _pod(env: Env, name: str) -> dict[str, Any] | None:
    return env.kube.get("v1", "Pod", name, NAMESPACE)


def _wait_bound(env: Env, name: str, timeout: float = 20) -> dict[str, Any]:
    def bound() -> dict[str, Any] | None:
        pod = _pod(env, name)
        return pod if pod and pod["spec"].get("nodeName") else None

    return wait_for(bound, timeout, f"pod {name} to be bound")


def _wait_gone(env: Env, name: str, timeout: float = 30) -> float:
    wait_for(lambda: _pod(env, name) is None, timeout, f"pod {name} to be gone")
    return time.time()


def _events(env: Env, name: str, reason: str | None = None) -> list[dict[str, Any]]:
    listing = env.kube.list("v1", "Event", NAMESPACE, field_selector=f"involvedObject.name={name}")
    return [e for e in listing.items if reason is None or e.get("reason") == reason]


def _show_job(env: Env, job_id: int) -> dict[str, str]:
    """`scontrol show job -o` as key -> value."""
    out = env.slurm.run("scontrol", "show", "job", "-o", str(job_id))
    return {k: v.strip() for k, v in re.findall(r"([\w:/]+)=(.*?)(?= [\w:/]+=|$)", out.strip())}


def _sharing(job: dict[str, str]) -> str:
    """How the job shares its nodes, in 24.11's words (OverSubscribe=NO for a whole node, USER,
    TOPO, YES, OK); 26.05 splits that into OverSubscribe=YES|NO and Exclusive=NODE|USER|TOPO|NO."""
    exclusive = job.get("Exclusive")
    if exclusive is None:
        return job["OverSubscribe"]
    if exclusive == "NODE":
        return "NO"
    if exclusive == "NO":
        return "YES" if job["OverSubscribe"] == "YES" else "OK"
    return exclusive


def _job_id(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["annotations"][wk.ANNOTATION_JOB_ID])


def _placeholders(env: Env) -> list[SlurmJob]:
    return [j for j in env.api.jobs().items if pod_uid_of(j.name)]


def _live_placeholders(env: Env) -> list[SlurmJob]:
    live = ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED")
    return [j for j in _placeholders(env) if j.state in live]


def _jobs_for(env: Env, uid: str) -> list[SlurmJob]:
    return [j for j in _placeholders(env) if pod_uid_of(j.name) == uid]


def _kube_node_of(env: Env, slurm_node: str) -> str:
    slurmd = _pod(env, slurm_node)
    assert slurmd is not None, f"no slurmd Pod {slurm_node}"
    return str(slurmd["spec"]["nodeName"])


def _submit_plain(env: Env, ids: list[int], **fields: Any) -> int:
    spec = JobSpec(
        script=PLAIN_JOB, environment={"PATH": "/usr/bin:/bin"}, standard_output="/dev/null",
        current_working_directory="/", **fields,
    )  # fmt: skip
    job_id = env.api.submit(spec).job_id
    ids.append(job_id)
    return job_id


def _job_state(env: Env, job_id: int) -> str:
    job = env.api.job(job_id)
    return job.state if job else "GONE"


# ---- the example Pods ----------------------------------------------------------------------


@pytest.mark.parametrize("file", sorted(p.name for p in PODS.glob("*.yaml")))
def test_every_example_pod_is_accepted_by_the_api_server(env: Env, file: str) -> None:
    """The README's examples must apply as written (a GPU request without a limit does not)."""
    for manifest in yaml.safe_load_all((PODS / file).read_text()):
        namespace = manifest["metadata"]["namespace"]
        env.kube.request_json(
            "POST", f"/api/v1/namespaces/{namespace}/pods", query=[("dryRun", "All")],
            body=manifest, target=f"{file}: Pod {manifest['metadata']['name']}",
        )  # fmt: skip


# ---- the example Pods of SUNK's "Schedule Kubernetes Pods with Slurm" -------------------


def test_page_full_node_pod_gets_the_whole_h100_node(env: Env, pods: list[str]) -> None:
    manifest = _manifest("full-node-h100.yaml")
    manifest["metadata"]["name"] = unique("full-node")
    pod = _wait_bound(env, _create(env, pods, manifest)["metadata"]["name"])
    annotations = pod["metadata"]["annotations"]
    assert annotations[wk.ANNOTATION_SLURM_NODE] == H100_NODE
    assert pod["spec"]["nodeName"] == _kube_node_of(env, H100_NODE)
    job = _show_job(env, _job_id(pod))
    assert job["JobState"] == "RUNNING"
    assert job["NodeList"] == H100_NODE
    assert _sharing(job) == "NO"  # exclusive "none": the whole node, nobody else
    assert job["Comment"] == "A Kubernetes job"
    assert job["Account"] == "root"
    assert job["NumCPUs"] == "110"
    assert "gpu:8" in job["TresPerNode"]
    assert job["MinMemoryNode"] == "960G"
    assert job["UserId"].startswith("root(0)") and job["GroupId"].startswith("root(0)")
    [scheduled] = _events(env, pod["metadata"]["name"], wk.EVENT_SCHEDULED)
    assert H100_NODE in scheduled["message"] and pod["spec"]["nodeName"] in scheduled["message"]


def test_a_placeholder_says_which_scheduler_made_it(env: Env, pods: list[str]) -> None:
    """Schedulers sharing a Slurm tell their jobs apart by name; where the operator
    submits every job, the admin comment (which only Slurm operators can set) says it too."""
    name = unique("named")
    pod = _wait_bound(env, _create(env, pods, _pod_spec(name))["metadata"]["name"])
    job = env.api.job(_job_id(pod))
    assert job is not None
    expected = f"pod:{NAMESPACE}/{name}@{pod['metadata']['uid']}:{SCHEDULER}"
    assert job.name == expected
    assert job.admin_comment == ("" if ON_SLURM_2205 else expected)


def test_each_pages_name_form_is_bound_and_a_look_alike_is_told(env: Env, pods: list[str]) -> None:
    """SUNK's pages give three forms of the scheduler's default name; a Pod written with any
    of them, for this release and namespace, is bound. One written for another release is told
    within 30 s, once, which names serve this one (it used to wait forever, with no Event)."""
    forms = {
        "run-workloads": "slurm-slurm-slurm-scheduler",  # <namespace>-<release>-slurm-scheduler
        "schedule-pods": "slurm-slurm-scheduler",  # "Formatted as <namespace>-<scheduler-name>"
        "pod-scheduler": "slurm-slurm",  # "SUNK Pod Scheduler": <namespace>-<releaseName>
    }
    made = [_create(env, pods, _pod_spec(unique(form), schedulerName=scheduler_name))
            for form, scheduler_name in forms.items()]  # fmt: skip
    lookalike = _create(
        env, pods, _pod_spec(unique("lookalike"), schedulerName="slurm-other-slurm-scheduler")
    )
    for pod in made:
        _wait_bound(env, pod["metadata"]["name"], timeout=30)
    name = lookalike["metadata"]["name"]
    told = wait_for(lambda: _events(env, name, wk.EVENT_SCHEDULER_NAME_UNKNOWN), 30,
                    f"pod {name} to be told which scheduler names serve")  # fmt: skip
    assert all(n in told[0]["message"] for n in forms.values()), told[0]["message"]
    assert "slurm-other-slurm-scheduler" in told[0]["message"]
    time.sleep(SWEEP_SECONDS * 2)  # later sweeps tell it no more
    assert len(_events(env, name, wk.EVENT_SCHEDULER_NAME_UNKNOWN)) == 1
    still = _pod(env, name)
    assert still is not None and not still["spec"].get("nodeName")
    assert not _jobs_for(env, lookalike["metadata"]["uid"])


def test_page_single_gpu_pod_runs_as_its_user_sharing_by_user(env: Env, pods: list[str]) -> None:
    manifest = _manifest("single-gpu-user.yaml")
    manifest["metadata"]["name"] = unique("single-gpu")
    pod = _wait_bound(env, _create(env, pods, manifest)["metadata"]["name"])
    assert pod["metadata"]["annotations"][wk.ANNOTATION_SLURM_NODE] == H100_NODE
    job = _show_job(env, _job_id(pod))
    assert job["UserId"].endswith("(1001)") and job["GroupId"].endswith("(1001)")
    assert _sharing(job) == "USER"
    assert "gpu:1" in job["TresPerNode"]
    assert job["NumCPUs"] == "8"
    assert job["MinMemoryNode"] == "128G"
    assert job["Comment"] == "A single GPU Pod"


def test_annotation_heavy_pod_sets_every_job_field(env: Env, pods: list[str]) -> None:
    manifest = _manifest("inference-annotated.yaml")
    manifest["metadata"]["name"] = unique("annotated")
    pod = _wait_bound(env, _create(env, pods, manifest)["metadata"]["name"])
    job = _show_job(env, _job_id(pod))
    assert job["Partition"] == "gpu"
    assert job["Comment"] == "inference server"
    # Slurm 22.05 shows a running job's Features as what placed it: its prefer ("gpu") when
    # that could be met. The constraint itself is checked by the "unknown-feature" refusal.
    assert job["Features"] == "gpu"
    assert job["ExcNodeList"] == "slurm-gpu-small-0"
    assert job["NodeList"] == "slurm-gpu-small-1"  # the one gpu node not excluded
    assert job["Priority"] == "100"
    assert job["TimeLimit"] == "01:30:00"  # 90: minutes, as SUNK's "SUNK Pod Scheduler" page says
    assert job["WorkDir"] == "/tmp"
    assert _sharing(job) == "YES"  # exclusive "ok"
    assert job["NumCPUs"] == "1"  # 500m rounds up
    assert pod["spec"]["nodeName"] == _kube_node_of(env, "slurm-gpu-small-1")


def test_annotations_changed_after_binding_leave_the_job_as_it_is(
    env: Env, pods: list[str]
) -> None:
    """SUNK's "Schedule Kubernetes Pods with Slurm": changes to annotations after a Pod is
    scheduled do not affect the job (nor submit another)."""
    name = unique("reannotated")
    first = {wk.ANNOTATION_COMMENT: "as bound", wk.ANNOTATION_TIMEOUT: "30"}
    uid = _create(env, pods, _pod_spec(name, annotations=first))["metadata"]["uid"]
    job_id = _job_id(_wait_bound(env, name))
    before = _show_job(env, job_id)
    assert (before["Comment"], before["TimeLimit"]) == ("as bound", "00:30:00")
    submitted = env.scheduler.counters.submitted
    # As `kubectl annotate --overwrite` writes it: a merge patch of the Pod.
    env.kube.request_json(
        "PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}",
        body={"metadata": {"annotations": {wk.ANNOTATION_COMMENT: "changed",
                                           wk.ANNOTATION_TIMEOUT: "90"}}},
        content_type="application/merge-patch+json", target=f"Pod {name}",
    )  # fmt: skip
    # The scheduler sees the update at once (its watch queues the Pod); give it a few turns.
    time.sleep(3)
    after = _show_job(env, job_id)
    assert (after["Comment"], after["TimeLimit"]) == ("as bound", "00:30:00")
    assert after["JobState"] == "RUNNING"
    assert [j.job_id for j in _jobs_for(env, uid)] == [job_id]
    assert env.scheduler.counters.submitted == submitted
    pod = _pod(env, name)
    assert pod is not None and _job_id(pod) == job_id


def test_reservation_and_required_nodes(env: Env, pods: list[str]) -> None:
    reservation = unique("k8s")
    env.slurm.run(
        "scontrol", "create", "reservation", f"ReservationName={reservation}",
        "Nodes=slurm-cpu-0", "StartTime=now", "Duration=10", "Users=root",
    )  # fmt: skip
    try:
        name = unique("reserved")
        _create(env, pods, _pod_spec(name, annotations={
            wk.ANNOTATION_RESERVATION: reservation,
            wk.ANNOTATION_REQUIRED_NODES: "slurm-cpu-0",
        }))  # fmt: skip
        pod = _wait_bound(env, name)
        job = _show_job(env, _job_id(pod))
        assert job["Reservation"] == reservation
        assert job["ReqNodeList"] == "slurm-cpu-0" and job["NodeList"] == "slurm-cpu-0"
    finally:
        env.kube.delete("v1", "Pod", name, NAMESPACE, grace_period_seconds=0)
        _wait_gone(env, name)
        wait_for(lambda: not _live_placeholders(env), 20, "the reserved job to end")
        env.slurm.run("scontrol", "delete", f"ReservationName={reservation}")


def test_node_affinity_excludes_nodes_instead_of_requiring_them(env: Env, pods: list[str]) -> None:
    name = unique("affinity")
    rtx = {"key": wk.NODE_LABEL_GPU_MODEL, "operator": "In", "values": ["Quadro_RTX_4000"]}
    terms = {"nodeSelectorTerms": [{"matchExpressions": [rtx]}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}
    _create(env, pods, _pod_spec(name, affinity=affinity))
    pod = _wait_bound(env, name)
    job = _show_job(env, _job_id(pod))
    assert job["ReqNodeList"] == "(null)", "a candidate pool must never become required nodes"
    excluded = set(env.slurm.run("scontrol", "show", "hostnames", job["ExcNodeList"]).split())
    assert excluded == {"slurm-cpu-0", H100_NODE}
    assert job["NodeList"] in ("slurm-gpu-small-0", "slurm-gpu-small-1")


def test_a_tainted_node_is_never_chosen_for_a_pod_that_does_not_tolerate_it(
    env: Env, pods: list[str]
) -> None:
    """Taints: the Node of slurm-gpu-small-0 tainted dedicated=infer:NoSchedule. A Pod that
    does not tolerate it has that Slurm node excluded (never a required pool) and lands on the
    other; a Pod that tolerates it may use both."""
    slurmd = env.kube.get("v1", "Pod", "slurm-gpu-small-0", NAMESPACE)
    assert slurmd is not None
    node = slurmd["spec"]["nodeName"]
    taint = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
    _set_taints(env, node, [taint])
    rtx = {"key": wk.NODE_LABEL_GPU_MODEL, "operator": "In", "values": ["Quadro_RTX_4000"]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [rtx]}]}}}  # fmt: skip
    try:
        time.sleep(0.5)  # the scheduler's Node watch sees the taint
        plain, tolerant = unique("untolerated"), unique("tolerant")
        _create(env, pods, _pod_spec(plain, affinity=affinity))
        job = _show_job(env, _job_id(_wait_bound(env, plain)))
        excluded = set(env.slurm.run("scontrol", "show", "hostnames", job["ExcNodeList"]).split())
        assert "slurm-gpu-small-0" in excluded and job["ReqNodeList"] == "(null)"
        assert job["NodeList"] == "slurm-gpu-small-1"
        assert _pod(env, plain)["spec"]["nodeName"] != node

        toleration = {"key": "dedicated", "operator": "Equal", "value": "infer",
                      "effect": "NoSchedule"}  # fmt: skip
        _create(env, pods, _pod_spec(tolerant, affinity=affinity, tolerations=[toleration]))
        job = _show_job(env, _job_id(_wait_bound(env, tolerant)))
        excluded = set(env.slurm.run("scontrol", "show", "hostnames", job["ExcNodeList"]).split())
        assert "slurm-gpu-small-0" not in excluded
    finally:
        _set_taints(env, node, None)


def _set_taints(env: Env, node: str, taints: list[dict[str, str]] | None) -> None:
    env.kube.request_json(
        "PATCH", f"/api/v1/nodes/{node}", body={"spec": {"taints": taints}},
        content_type="application/merge-patch+json",
    )  # fmt: skip


# ---- admission --------------------------------------------------------------------------

REFUSALS = {
    "no-cpu": (dict(cpu=None), "requests.cpu"),
    "zero-memory": (dict(memory="0"), "requests.memory"),
    "grace-25": (dict(grace=25), "terminationGracePeriodSeconds: is 25, must be less than 25"),
    "grace-default": (dict(grace=None), "terminationGracePeriodSeconds: is 30"),
    "priority-word": (
        dict(annotations={wk.ANNOTATION_PRIORITY: "high"}),
        "priority']: must be an integer",
    ),
    "user-id-word": (
        dict(annotations={wk.ANNOTATION_USER_ID: "alice"}),
        "user-id']: must be an integer",
    ),
    "group-id-float": (
        dict(annotations={wk.ANNOTATION_GROUP_ID: "10.5"}),
        "group-id']: must be an integer",
    ),
    "timeout-float": (
        dict(annotations={wk.ANNOTATION_TIMEOUT: "1.5"}),
        "timeout']: must be an integer",
    ),
    "exclusive-word": (
        dict(annotations={wk.ANNOTATION_EXCLUSIVE: "always"}),
        "must be one of none, ok",
    ),
    "bad-hostlist": (
        dict(annotations={wk.ANNOTATION_EXCLUDED_NODES: "node[1-"}),
        "not a list of Slurm node",
    ),
    "unknown-feature": (
        dict(annotations={wk.ANNOTATION_CONSTRAINTS: "no-such-feature"}),
        "Slurm refused the placeholder job",
    ),
    "unknown-partition": (
        dict(annotations={wk.ANNOTATION_PARTITION: "nope"}),
        "Slurm refused the placeholder job",
    ),
}


if ON_SLURM_2205:  # 24.11 takes it: test_exclusive_topo_and_a_group_other_than_the_users
    REFUSALS["exclusive-topo"] = (
        dict(annotations={wk.ANNOTATION_EXCLUSIVE: "topo"}),
        "'topo' needs Slurm 24.11",
    )


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_admission_failure_gives_an_event_and_no_job(env: Env, pods: list[str], case: str) -> None:
    fields, expected = REFUSALS[case]
    name = unique(case)
    uid = _create(env, pods, _pod_spec(name, **fields))["metadata"]["uid"]
    [event] = wait_for(lambda: _events(env, name, wk.EVENT_REJECTED), 15, f"{case} refused")
    assert expected in event["message"], event["message"]
    assert event["type"] == "Warning"
    pod = _pod(env, name)
    assert pod is not None and not pod["spec"].get("nodeName")
    [condition] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert condition["status"] == "False" and expected in condition["message"]
    time.sleep(env.scheduler.settings.poll_seconds + 1)  # a poll and some Pod events later
    assert len(_events(env, name, wk.EVENT_REJECTED)) == 1, "refused again without a change"
    assert not [j for j in _jobs_for(env, uid) if j.state != "CANCELLED"]


@pytest.mark.skipif(not ON_SLURM_2205, reason="Slurm 23.11+ submits with the group asked for")
def test_a_group_slurm_22_05_cannot_give_is_refused_and_its_job_cancelled(
    env: Env, pods: list[str]
) -> None:
    name = unique("group")
    uid = _create(env, pods, _pod_spec(name, annotations={
        wk.ANNOTATION_USER_ID: "1001", wk.ANNOTATION_GROUP_ID: "0",
    }))["metadata"]["uid"]  # fmt: skip
    [event] = wait_for(lambda: _events(env, name, wk.EVENT_REJECTED), 15, "refusal")
    assert "primary group (1001), not 0" in event["message"], event["message"]
    wait_for(lambda: all(j.state in ("CANCELLED", "COMPLETED") for j in _jobs_for(env, uid)),
             15, "its job to be cancelled")  # fmt: skip
    pod = _pod(env, name)
    assert pod is not None and not pod["spec"].get("nodeName")


@pytest.mark.skipif(ON_SLURM_2205, reason="Slurm 22.05's REST API has neither")
def test_exclusive_topo_and_a_group_other_than_the_users(env: Env, pods: list[str]) -> None:
    """v0.0.40+: the operator submits with user_id/group_id (the group-id rule of SUNK's "Schedule
    Kubernetes Pods with Slurm") and shared: topo (Slurm 24.11)."""
    name = unique("group")
    pod = _wait_bound(env, _create(env, pods, _pod_spec(name, annotations={
        wk.ANNOTATION_USER_ID: "1001", wk.ANNOTATION_GROUP_ID: "0",
        wk.ANNOTATION_EXCLUSIVE: "topo",
    }))["metadata"]["name"])  # fmt: skip
    job = _show_job(env, _job_id(pod))
    assert job["UserId"].endswith("(1001)") and job["GroupId"].startswith("root(0)")
    assert _sharing(job) == "TOPO"


def test_a_refused_pod_is_admitted_once_fixed(env: Env, pods: list[str]) -> None:
    name = unique("fixed")
    _create(env, pods, _pod_spec(name, annotations={wk.ANNOTATION_PRIORITY: "high"}))
    wait_for(lambda: _events(env, name, wk.EVENT_REJECTED), 15, "refusal")
    patch = {"metadata": {"annotations": {wk.ANNOTATION_PRIORITY: "50"}}}
    env.kube.request_json(
        "PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", body=patch,
        content_type="application/merge-patch+json",
    )  # fmt: skip
    pod = _wait_bound(env, name)
    assert _show_job(env, _job_id(pod))["Priority"] == "50"


# ---- policies (CEL) -----------------------------------------------------------------------


def test_repo_pod_policies_deny_with_an_event_and_warn_without_stopping_the_job(
    env: Env, pods: list[str]
) -> None:
    """The fixture repo's inference-no-root-user (Deny, on the namespace's label) and the
    shipped pod-static-cpu-pinning (Warn), as the daemon hands them to the scheduler."""
    config = load_config(read_repo(env.work / "repo"), read_library())
    label = {"metadata": {"labels": {"workload": "inference"}}}
    env.kube.request_json("PATCH", f"/api/v1/namespaces/{NAMESPACE}", body=label,
                          content_type="application/merge-patch+json")  # fmt: skip
    env.scheduler.set_policies(startup_pod_policies(config))
    try:
        root, pinned = unique("root"), unique("pinned")
        _create(env, pods, _pod_spec(root, annotations={wk.ANNOTATION_USER_ID: "0"}))
        [event] = wait_for(lambda: _events(env, root, wk.EVENT_REJECTED), 15, "the refusal")
        assert event["type"] == "Warning"
        assert "denied by policy inference-no-root-user" in event["message"]
        assert "may not run as user-id 0" in event["message"]
        condition = next(c for c in _pod(env, root)["status"]["conditions"]
                         if c["type"] == "PodScheduled")  # fmt: skip
        assert condition["status"] == "False" and "inference-no-root-user" in condition["message"]
        assert not [j for j in _placeholders(env) if root in j.name], "a denied Pod got a job"

        guaranteed = _pod_spec(pinned)
        guaranteed["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "1", "memory": "256Mi"}
        _create(env, pods, guaranteed)
        _wait_bound(env, pinned)
        [warning] = wait_for(lambda: _events(env, pinned, wk.EVENT_POLICY_WARNING), 10,
                             "the policy warning")  # fmt: skip
        assert warning["type"] == "Warning" and "pod-static-cpu-pinning" in warning["message"]
    finally:
        env.scheduler.set_policies(PodPolicies())
        unlabel = {"metadata": {"labels": {"workload": None}}}
        env.kube.request_json("PATCH", f"/api/v1/namespaces/{NAMESPACE}", body=unlabel,
                              content_type="application/merge-patch+json")  # fmt: skip


# ---- binding on the allocation --------------------------------------------------------------


def test_a_pod_is_bound_when_slurm_allocates_not_when_its_script_calls(
    env: Env, pods: list[str]
) -> None:
    """The script calls no hook when it starts (a stub takes any call) and the safety-net poll
    is ten minutes away: only the scheduler's look at Slurm's job states can bind it. The
    Binding carries the job id (no patch before it) and one Scheduled Event says what was
    submitted."""
    env.scheduler.stop()  # one scheduler at a time
    hooks = HooksStub()
    try:
        env.scheduler = env.new_scheduler(hooks_url=hooks.url, poll_seconds=600.0)
        name = unique("alloc")
        _create(env, pods, _pod_spec(name, cpu="100m", memory="64Mi"))
        pod = _wait_bound(env, name, timeout=15)
        job_id = _job_id(pod)
        assert _job_state(env, job_id) == "RUNNING"
        assert env.scheduler.counters.starts_seen >= 1
        assert env.scheduler.counters.api_writes["annotation"] == 0
        scheduled = wait_for(lambda: _events(env, name, "Scheduled"), 10, "the Scheduled Event")
        assert len(scheduled) == 1
        assert f"Slurm job {job_id} (default partition, 1 CPUs, 64 MB)" in scheduled[0]["message"]
        assert not _events(env, name, wk.EVENT_SUBMITTED)
        env.kube.delete("v1", "Pod", name, NAMESPACE)
        _wait_gone(env, name)
        ended = ("CANCELLED", "COMPLETED")
        wait_for(lambda: _job_state(env, job_id) in ended, 20, "its job to end with the Pod")
        assert hooks.calls["started"] == 0  # bound without it: the script no longer calls
    finally:
        env.scheduler.stop()
        hooks.close()
        env.scheduler = env.new_scheduler()


# ---- teardown, both ways ------------------------------------------------------------------


def test_pod_delete_ends_the_job_only_after_the_pod_is_gone(env: Env, pods: list[str]) -> None:
    name = unique("delete")
    _create(env, pods, _pod_spec(name, annotations={wk.ANNOTATION_LOCAL_STOP_SECONDS: "3"}))
    job_id = _job_id(_wait_bound(env, name))
    env.kube.delete("v1", "Pod", name, NAMESPACE)
    time.sleep(1.5)  # the Pod is still stopping (3 s): its job must hold on
    assert _pod(env, name) is not None
    assert _job_state(env, job_id) == "RUNNING"
    gone_at = _wait_gone(env, name)
    wait_for(lambda: _job_state(env, job_id) in ("CANCELLED", "COMPLETED"), 10, "job to end")
    job = env.api.job(job_id)
    assert job is not None and job.end_time >= int(gone_at) - 1


def test_slurm_cancel_deletes_the_pod_before_reusing_its_node(
    env: Env, pods: list[str], plain_jobs: list[int]
) -> None:
    name = unique("scancel")
    _create(env, pods, _pod_spec(name, annotations={
        wk.ANNOTATION_REQUIRED_NODES: "slurm-cpu-0", wk.ANNOTATION_EXCLUSIVE: "none",
        wk.ANNOTATION_LOCAL_STOP_SECONDS: "3",
    }))  # fmt: skip
    job_id = _job_id(_wait_bound(env, name))
    waiting = _submit_plain(env, plain_jobs, required_nodes="slurm-cpu-0", shared="none")
    env.slurm.run("scancel", str(job_id))
    gone_at = _wait_gone(env, name)
    [ended] = _events(env, name, wk.EVENT_SLURM_ENDED)
    assert str(job_id) in ended["message"]
    wait_for(lambda: _job_state(env, waiting) == "RUNNING", 30, "the waiting job to start")
    started = env.api.job(waiting)
    assert started is not None and started.start_time >= int(gone_at) - 1, (
        "Slurm gave the node to another job while the Pod still held it"
    )


def test_a_pod_that_completes_releases_its_job(env: Env, pods: list[str]) -> None:
    name = unique("done")
    _create(env, pods, _pod_spec(name))
    job_id = _job_id(_wait_bound(env, name))
    wait_for(lambda: (_pod(env, name) or {}).get("status", {}).get("phase") == "Running", 10,
             "Running")  # fmt: skip
    env.kube.apply(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
         "status": {"phase": "Succeeded"}},
        field_manager="test-kubelet", force=True, subresource="status",
    )  # fmt: skip
    wait_for(lambda: _job_state(env, job_id) in ("CANCELLED", "COMPLETED"), 15, "job release")
    assert _pod(env, name) is not None, "a completed Pod stays (its logs are wanted)"


# ---- preemption, both ways -------------------------------------------------------------


def test_a_higher_tier_slurm_job_preempts_a_pod(
    env: Env, pods: list[str], plain_jobs: list[int]
) -> None:
    name = unique("preempted")
    _create(env, pods, _pod_spec(name, annotations={
        wk.ANNOTATION_PARTITION: "all", wk.ANNOTATION_REQUIRED_NODES: "slurm-gpu-small-1",
        wk.ANNOTATION_EXCLUSIVE: "none",
    }))  # fmt: skip
    job_id = _job_id(_wait_bound(env, name))
    high = _submit_plain(
        env, plain_jobs, partition="gpu", required_nodes="slurm-gpu-small-1", shared="none"
    )
    _wait_gone(env, name, timeout=60)
    [ended] = _events(env, name, wk.EVENT_SLURM_ENDED)
    assert str(job_id) in ended["message"]
    wait_for(lambda: _job_state(env, high) == "RUNNING", 60, "the high-tier job to run")


def test_a_high_priority_pod_preempts_a_slurm_job(
    env: Env, pods: list[str], plain_jobs: list[int]
) -> None:
    low = _submit_plain(
        env, plain_jobs, partition="all", required_nodes="slurm-gpu-small-0", shared="none"
    )
    wait_for(lambda: _job_state(env, low) == "RUNNING", 30, "the low-tier job to run")
    name = unique("preempting")
    _create(env, pods, _pod_spec(name, annotations={
        wk.ANNOTATION_PARTITION: "gpu", wk.ANNOTATION_REQUIRED_NODES: "slurm-gpu-small-0",
    }))  # fmt: skip
    pod = _wait_bound(env, name, timeout=60)
    assert pod["metadata"]["annotations"][wk.ANNOTATION_SLURM_NODE] == "slurm-gpu-small-0"
    assert _job_state(env, low) in ("PREEMPTED", "PENDING", "REQUEUED", "CANCELLED")


# ---- crash safety ---------------------------------------------------------------------------


def test_kill_9_mid_flight_then_restart_gives_no_duplicate_or_orphan(
    env: Env, pods: list[str]
) -> None:
    """`reconciler schedule` subprocesses in place of the in-process scheduler: killed while
    it submits, then restarted: every Pod ends with exactly one job. Killed again, and half the
    Pods deleted while it is down: the next one cancels exactly their jobs (no orphans)."""
    env.scheduler.stop()  # one scheduler at a time, as in production
    started: list[subprocess.Popen[bytes]] = []
    try:
        _crash_and_restart(env, pods, env.work / "schedule.log", started)
    finally:
        for process in started:  # a failure midway must not leave one running
            if process.poll() is None:
                _kill_9(process)
        env.scheduler = env.new_scheduler()


def _crash_and_restart(
    env: Env, pods: list[str], log: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    other = "crash-test-scheduler"
    # One hooks address for all three runs, as a Service gives in a cluster: jobs made by a
    # killed scheduler reach the next one.
    port = free_port()
    first = _schedule_process(env, other, log, port, started)
    uids = {}
    # These run as 1001, which the repo's values allow in namespace slurm: pod-user-id-allowed
    # admits only the uids values list for a Pod's namespace (without a repo, none).
    as_1001 = {wk.ANNOTATION_USER_ID: "1001"}
    for name in [unique(f"crash-{i}") for i in range(20)]:
        manifest = _pod_spec(name, cpu="100m", memory="64Mi", schedulerName=other,
                             annotations=as_1001)  # fmt: skip
        uids[name] = _create(env, pods, manifest)["metadata"]["uid"]
    wait_for(lambda: len({pod_uid_of(j.name) for j in _placeholders(env)} & set(uids.values()))
             >= 3, 30, "a few submits")  # fmt: skip
    _kill_9(first)
    second = _schedule_process(env, other, log, port, started)
    for name in uids:
        _wait_bound(env, name, timeout=60)
    for name, uid in uids.items():
        jobs = _jobs_for(env, uid)
        assert len(jobs) == 1, f"pod {name}: jobs {[(j.job_id, j.state) for j in jobs]}"
        assert jobs[0].state == "RUNNING"
    _kill_9(second)
    deleted = sorted(uids)[::2]
    for name in deleted:
        env.kube.delete("v1", "Pod", name, NAMESPACE, grace_period_seconds=0)
    for name in deleted:
        _wait_gone(env, name)
    time.sleep(3)  # nobody watches: their jobs run on
    assert all(_jobs_for(env, uids[n])[0].state == "RUNNING" for n in deleted)
    third = _schedule_process(env, other, log, port, started)
    try:
        ended = ("CANCELLED", "COMPLETED")
        wait_for(lambda: all(_jobs_for(env, uids[n])[0].state in ended for n in deleted), 30,
                 "the orphaned jobs to be cancelled")  # fmt: skip
        kept = [n for n in uids if n not in deleted]
        assert all(_jobs_for(env, uids[n])[0].state == "RUNNING" for n in kept)
        for name in kept:
            env.kube.delete("v1", "Pod", name, NAMESPACE, grace_period_seconds=0)
        wait_for(lambda: all(_jobs_for(env, uids[n])[0].state in ended for n in kept), 30,
                 "every job to end with its Pod")  # fmt: skip
    finally:
        stop_cleanly(third, log)


def _kill_9(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()


def _schedule_process(
    env: Env, name: str, log: Path, port: int, started: list[subprocess.Popen[bytes]]
) -> subprocess.Popen[bytes]:
    offset = log.stat().st_size if log.exists() else 0
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "schedule", str(env.work / "repo"),
             "--runtime-dir", str(env.running.runtime), "--scheduler-name", name,
             "--watch-namespace", NAMESPACE,
             "--hooks-api-bind-address", f"127.0.0.1:{port}", "--poll-interval", "1"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    started.append(process)
    wait_for(lambda: "scheduling Pods" in log.read_text()[offset:] or process.poll() is not None,
             30, "the scheduler to start")  # fmt: skip
    assert process.poll() is None, log.read_text()
    return process


# ---- hostile Pods: the scheduler stays able to see and bind -------------------------------

# What a Pod author can write that once blinded or bloated the scheduler: a uid of 4,301
# digits (past Python's int() limit), Pods of 1.2 MiB each (an env var: the cache kept it all),
# and 15,000 required anti-affinity terms (a Pod LIST per term). The scheduler's peak RSS
# under them, start-up included, stays under HOSTILE_SCHEDULER_RSS.
HOSTILE_SCHEDULER_RSS = 300 * 2**20
BIG_PODS = 30


def test_hostile_pods_get_events_and_a_plain_pod_is_still_bound(env: Env, pods: list[str]) -> None:
    """`reconciler schedule` under the Pods above: each gets an Event within 20 s, the log has
    no traceback, its peak RSS stays under 300 MiB, and a plain Pod is bound within 30 s."""
    other = "hostile-slurm-scheduler"
    log = env.work / "hostile.log"
    started: list[subprocess.Popen[bytes]] = []
    as_1001 = {wk.ANNOTATION_USER_ID: "1001"}
    try:
        process = _schedule_process(env, other, log, free_port(), started)
        hostile = {
            unique("uid-4301"): _pod_spec(
                "", schedulerName=other, annotations={wk.ANNOTATION_USER_ID: "9" * 4301}),
            unique("anti-15000"): _pod_spec(
                "", schedulerName=other, annotations=as_1001, affinity=_anti_affinity(15_000)),
        }  # fmt: skip
        # Nodes nobody has: the big Pods wait (with an Event) instead of taking Slurm's nodes.
        nowhere = {"sunk.test/nowhere": "true"}
        for i in range(BIG_PODS):
            big = _pod_spec("", schedulerName=other, annotations=as_1001, nodeSelector=nowhere)
            big["spec"]["containers"][0]["env"] = [{"name": "PAYLOAD", "value": "x" * (1200 << 10)}]
            hostile[unique(f"big-{i}")] = big
        # Labels no slimming can drop: refused for its size.
        labels = {f"example.com/l{i}": "v" * 60 for i in range(5000)}
        too_big = _pod_spec("", schedulerName=other, annotations=as_1001)
        too_big["metadata"]["labels"] = labels
        hostile[unique("labels-5000")] = too_big
        for name, manifest in hostile.items():
            manifest["metadata"]["name"] = name
            _create(env, pods, manifest)
        created = time.monotonic()
        for name in hostile:
            left = max(1.0, 20 - (time.monotonic() - created))
            wait_for(lambda n=name: _events(env, n), left, f"an Event for {name}: "
                     + log.read_text()[-3000:])  # fmt: skip
        plain = unique("plain-after-hostile")
        _create(env, pods, _pod_spec(plain, schedulerName=other, annotations=as_1001))
        _wait_bound(env, plain, timeout=30)
        assert_up_and_bounded(process, log, HOSTILE_SCHEDULER_RSS,
                              "scheduler peak RSS under hostile Pods")  # fmt: skip
    finally:
        # Its Pods go while it runs, so it ends their jobs (the fixture's wait needs that).
        for name in pods:
            env.kube.delete("v1", "Pod", name, NAMESPACE, grace_period_seconds=0)
        wait_for(lambda: not _live_placeholders(env), 30, "the plain Pod's job to end")
        for process in started:
            if process.poll() is None:
                stop_cleanly(process, log)


def _anti_affinity(terms: int) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": f"a{i}"}},
         "topologyKey": "kubernetes.io/hostname"} for i in range(terms)]}}  # fmt: skip


# ---- a daemon that runs for months: what it holds per Pod goes with the Pod ------------------

# (how many Pods, what they carry): refused by admission, refused by Slurm, waiting for a Node
# nobody has (with pod rules), in gangs of 2 waiting for a PodGroup nobody made, plain ones
# that Slurm allocates or queues, and plain ones deleted as soon as made (while the scheduler
# submits their jobs).
CHURN: list[tuple[int, dict[str, Any]]] = [
    (80, dict(annotations={wk.ANNOTATION_USER_ID: "alice"})),
    (20, dict(annotations={wk.ANNOTATION_PARTITION: "nope"})),
    (30, dict(affinity=_anti_affinity(1), nodeSelector={"sunk.test/nowhere": "true"})),
    (20, dict(gang=True)),
    (20, dict(cpu="100m", memory="16Mi")),
    (30, dict(cpu="100m", memory="16Mi", at_once=True)),
]
# Held past the Pod, for a bounded time the test does not wait out: until Slurm purges its
# ended job (MinJobAge, 300 s), the job index and the jobs cancelled to refuse a Pod (what they
# keep of the churned Pods must be ended jobs); `learned`, a note per key for LEARNED_SECONDS
# (60 s); the timer heap, a look again once (up to kill-wait, 30 s) that finds the Pod gone.
NOT_AT_ONCE = ("jobs", "abandoned", "learned", "queue delayed")
# Kept while the scheduler runs: a watch per namespace whose Pods an inter-Pod rule read (at
# most placed_pods.MAX_FOLLOWED), made by the churn's first such Pod.
PER_NAMESPACE = ("placed watches",)
ENDED = (
    "COMPLETING",
    "CANCELLED",
    "COMPLETED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "OUT_OF_MEMORY",
)  # COMPLETING: cancelled, its processes ending (KillWait)


def test_a_churn_of_pods_leaves_each_structure_as_it_was(env: Env, pods: list[str]) -> None:
    """200 Pods created and deleted through the scheduler: each per-Pod and per-job structure
    (stage marks, trust notes, Event notes, the work queue, gangs, PodGroups read) is back to
    its size before them; the job index keeps only their ended jobs, until Slurm purges them."""
    scheduler = env.scheduler
    before = scheduler.retained()
    churn, uids, kept = unique("churn"), set(), 0
    for count, fields in CHURN:
        shape = {k: v for k, v in fields.items() if k not in ("gang", "at_once")}
        for i in range(count):
            manifest = _pod_spec(f"{churn}-{len(pods)}", **shape)
            if fields.get("gang"):
                manifest["metadata"]["labels"] = {wk.LABEL_POD_GROUP: f"{churn}-{i // 2}"}
            uids.add(_create(env, pods, manifest)["metadata"]["uid"])
            if fields.get("at_once"):
                env.kube.delete("v1", "Pod", pods[-1], NAMESPACE, grace_period_seconds=0)
            else:
                kept += 1
    wait_for(lambda: _handled(scheduler.retained(), kept), 60,
             "the scheduler to handle every Pod once")  # fmt: skip
    held = scheduler.retained()
    for name in pods:
        env.kube.delete("v1", "Pod", name, NAMESPACE, grace_period_seconds=0)

    def grown() -> dict[str, tuple[int, int]]:
        now = scheduler.retained()
        return {k: (before[k], n) for k, n in now.items()
                if n > before[k] and k not in NOT_AT_ONCE + PER_NAMESPACE}  # fmt: skip

    try:
        wait_for(lambda: not grown(), 30, "each structure to drop the churned Pods")
    except AssertionError:
        raise AssertionError(
            f"held after the churn (before, now): {grown()}; while the Pods were there: {held}"
        ) from None

    def live() -> dict[str, str]:
        jobs = scheduler.known_jobs().items()
        return {uid: job.state for uid, job in jobs if uid in uids and job.state not in ENDED}

    wait_for(lambda: not live(), 10, f"the job index to hold only ended jobs: {live()}")


def _handled(sizes: dict[str, int], pods: int) -> bool:
    """At least `pods` Pods seen, and nothing queued or being handled."""
    idle = sizes["queue queued"] + sizes["queue processing"] + sizes["queue dirty"] == 0
    return sizes["pods"] >= pods and idle
