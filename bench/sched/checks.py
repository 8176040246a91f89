"""After a phase: every bound Pod (or gang) is where its placeholder job runs."""

from __future__ import annotations

from typing import Any

import hostlist

from bench.harness.loadgen import PodTimes
from bench.sched.common import HOLDING, POD_NAMESPACE
from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.scheduler.decide.gang_decide import gang_key
from reconciler.scheduler.decide.placeholder import pod_uid_of
from reconciler.scheduler.loop import Counters


def check_binds(
    kube: Kube, api: SlurmRestApi, pods: list[PodTimes], settings: Any, gang: int = 0
) -> tuple[list[str], int]:
    """Every bound Pod's placeholder job runs on the Slurm node it was bound for, on that Slurm
    node's Kubernetes Node; one job per Pod. Problems are listed, not raised. Only the jobs of
    these Pods count (those of earlier phases stay in Slurm's list until MinJobAge)."""
    if gang:
        return check_gang_binds(kube, api, pods, settings, gang)
    problems: list[str] = []
    ours = {p.uid for p in pods if p.uid}
    slurmd = {
        p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName")
        for p in kube.list("v1", "Pod", settings.namespace,
                           label_selector=f"{wk.LABEL_NAME}=slurmd").items
    }  # fmt: skip
    jobs: dict[str, list[Any]] = {}
    for job in api.jobs().items:
        uid = pod_uid_of(job.name)
        if uid is not None and uid in ours:
            jobs.setdefault(uid, []).append(job)
    duplicated = [uid for uid, js in jobs.items() if len(js) > 1]
    if duplicated:
        problems.append(f"{len(duplicated)} Pods have more than one placeholder job")
    wrong: list[str] = []
    for pod in pods:
        if pod.bound is None:
            continue
        mine = [j for j in jobs.get(pod.uid, ()) if str(j.job_id) == pod.job_id]
        job = mine[0] if mine else None
        on_node = slurmd.get(pod.slurm_node) == pod.node
        if job is None or job.state != "RUNNING" or job.nodes != pod.slurm_node or not on_node:
            what = f"job {job.job_id} {job.state} on {job.nodes!r}" if job else "no such job"
            wrong.append(
                f"{pod.name} bound to {pod.node} for job {pod.job_id} on {pod.slurm_node!r} "
                f"(slurmd there on {slurmd.get(pod.slurm_node)}), Slurm says {what}"
            )
    if wrong:
        problems.append(
            f"{len(wrong)} bound Pods do not match their job's state or node, e.g. "
            + "; ".join(wrong[:3])
        )
    unbound = [p.name for p in pods if p.bound is None]
    if unbound:
        problems.append(f"{len(unbound)} Pods never bound (e.g. {', '.join(unbound[:5])})")
    return problems, sum(len(js) for js in jobs.values())


def torn_down(counters: Counters, gone: int) -> list[str]:
    """A gang's Pods deleted, or its job cancelled, by the scheduler before the phase's last
    bind: nothing in the benchmark fails them, so the scheduler tore down gangs it had placed."""
    if not (counters.pods_deleted or counters.jobs_cancelled or gone):
        return []
    return [
        f"before the last bind the scheduler deleted {counters.pods_deleted} Pods and "
        f"cancelled {counters.jobs_cancelled} gang jobs ({gone} Pods already gone)"
    ]


def _slurmd_nodes(kube: Kube, settings: Any) -> dict[str, str | None]:
    """Slurm node (slurmd Pod name) -> its Kubernetes Node."""
    return {
        p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName")
        for p in kube.list("v1", "Pod", settings.namespace,
                           label_selector=f"{wk.LABEL_NAME}=slurmd").items
    }  # fmt: skip


def check_gang_binds(
    kube: Kube, api: SlurmRestApi, pods: list[PodTimes], settings: Any, gang: int
) -> tuple[list[str], int]:
    """Every gang has GANG members and one job, RUNNING on GANG nodes; its members are bound for
    that job, each on a distinct node of it, on that Slurm node's Kubernetes Node."""
    problems: list[str] = []
    slurmd = _slurmd_nodes(kube, settings)
    groups: dict[str, list[PodTimes]] = {}
    for pod in pods:
        groups.setdefault(pod.group, []).append(pod)
    keys = {gang_key(POD_NAMESPACE, g): g for g in groups}
    jobs: dict[str, list[Any]] = {}
    for job in api.jobs().items:
        key = pod_uid_of(job.name)
        if key is not None and key in keys:
            jobs.setdefault(keys[key], []).append(job)
    active = {g: [j for j in js if j.state in HOLDING] for g, js in jobs.items()}
    several = [g for g, js in active.items() if len(js) > 1]
    if several:
        problems.append(f"{len(several)} gangs have more than one active job (e.g. {several[0]})")
    wrong: list[str] = []
    for group, members in sorted(groups.items()):
        bound = [p for p in members if p.bound is not None]
        if not bound:
            continue
        ids = {p.job_id for p in bound}
        job = next((j for j in jobs.get(group, ()) if str(j.job_id) in ids), None)
        nodes = set(hostlist.expand_hostlist(job.nodes)) if job and job.nodes else set()
        placed = [p.slurm_node for p in bound]
        bad = (
            len(members) != gang or len(bound) != gang or len(ids) != 1 or job is None
            or job.state != "RUNNING" or len(nodes) != gang or len(set(placed)) != gang
            or not set(placed) <= nodes or any(slurmd.get(p.slurm_node) != p.node for p in bound)
        )  # fmt: skip
        if bad:
            what = f"job {job.job_id} {job.state} on {job.nodes!r}" if job else "no such job"
            wrong.append(f"{group}: {len(bound)}/{len(members)} bound for jobs {sorted(ids)} on "
                         f"{sorted(placed)}, Slurm says {what}")  # fmt: skip
    if wrong:
        problems.append(f"{len(wrong)} gangs do not match their job, e.g. " + "; ".join(wrong[:2]))
    unbound = [p.name for p in pods if p.bound is None]
    if unbound:
        problems.append(f"{len(unbound)} Pods never bound (e.g. {', '.join(unbound[:5])})")
    return problems, sum(len(js) for js in jobs.values())
