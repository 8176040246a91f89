"""The placeholder Slurm job of a Pod: its name, its script and its JobSpec. Pure.

The job holds the Pod's resources in Slurm for as long as the Pod exists. Its script tells the
scheduler's hooks API when Slurm signals it (cancel, time limit, preemption: the scheduler
deletes the Pod), then stays alive until the Pod is gone, so Slurm never hands the Pod's CPUs,
memory or GPUs to another job while the Pod still runs (Slurm waits for the script through
KillWait, and the Pod's grace period is below KillWait minus 5 s).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import hostlist

from reconciler import wellknown as wk
from reconciler.adapters.slurm.model import JobSpec, Shared
from reconciler.scheduler.decide.admission import PodRequest

ROOT_USER = "root"
_SHARED: dict[str, Shared] = {
    "none": "none", "ok": "oversubscribe", "user": "user", "mcs": "mcs", "topo": "topo",
}  # fmt: skip
JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# POSIX sh and curl, which slurmd images carry. Every call is retried: the scheduler may be
# restarting or failing over, and the job must not end while its Pod exists. No call when the
# job starts: the start watch sees that in Slurm (starts.py), and a curl per job start made
# Slurm start a burst's jobs a quarter slower on a 2-core machine (bench/README.md).
PLACEHOLDER_SCRIPT = r"""#!/bin/sh
# Placeholder for Kubernetes Pod $SUNK_POD (uid $SUNK_POD_UID), created by the sunk-reconciler
# Pod scheduler. It holds this allocation while the Pod runs; do not cancel it by hand unless
# you mean to delete the Pod.
hook() {
  curl -fsS -m 10 -X POST -H "Authorization: Bearer $SUNK_HOOK_TOKEN" \
    "$SUNK_HOOKS_URL/hooks/v1/pods/$SUNK_POD_UID/$1?job=$SLURM_JOB_ID&node=$SLURMD_NODENAME"
}
signalled=0
# SIGTERM is how Slurm ends a job (cancel, time limit, preemption); other signals sent with
# scancel --signal must not end it while the Pod runs.
trap 'signalled=1' TERM
trap '' HUP INT USR1 USR2
while [ $signalled = 0 ]; do sleep 3600 & wait $!; done
# Slurm is ending this job: the Pod goes first (its grace period), then this script.
while :; do
  case "$(hook signalled 2>/dev/null)" in gone*) exit 0 ;; esac
  sleep 1
done
"""


@dataclass(frozen=True)
class HookCredentials:
    """Where placeholder jobs reach the hooks API, and the key their per-Pod tokens derive from."""

    url: str
    key: bytes

    def __repr__(self) -> str:
        return f"HookCredentials(url={self.url!r}, key=***)"

    def token_for(self, pod_uid: str) -> str:
        return hmac.new(self.key, pod_uid.encode(), hashlib.sha256).hexdigest()

    def verify(self, pod_uid: str, token: str) -> bool:
        # As bytes: compare_digest refuses str with non-ASCII (a header can carry any).
        return hmac.compare_digest(self.token_for(pod_uid).encode(), token.encode())


@dataclass(frozen=True)
class JobName:
    """What a placeholder's name says: whom it holds resources for (a Pod UID or a gang's
    key) and which scheduler made it (None in names from before they said so)."""

    key: str
    scheduler: str | None


def job_name_for(pod: Mapping[str, Any], scheduler: str) -> str:
    """`pod:<namespace>/<name>@<uid>:<scheduler>`: readable in squeue, unique per Pod UID."""
    meta = pod["metadata"]
    return placeholder_name(
        wk.PLACEHOLDER_JOB_PREFIX, meta["namespace"], meta["name"], meta["uid"], scheduler
    )


def placeholder_name(prefix: str, namespace: str, name: str, key: str, scheduler: str) -> str:
    return f"{prefix}{namespace}/{name}@{key}{wk.JOB_NAME_SCHEDULER_SEPARATOR}{scheduler}"


def parse_job_name(text: str) -> JobName | None:
    """A placeholder's name read back; None for any other job's."""
    if not text.startswith((wk.PLACEHOLDER_JOB_PREFIX, wk.GANG_JOB_PREFIX)) or "@" not in text:
        return None
    key, separator, scheduler = text.rsplit("@", 1)[1].partition(wk.JOB_NAME_SCHEDULER_SEPARATOR)
    if not key:
        return None
    return JobName(key, scheduler if separator else None)


def pod_uid_of(job_name: str) -> str | None:
    """The key a placeholder job's name carries (a Pod UID, or a gang's key), whichever
    scheduler made it; None for any other job."""
    parsed = parse_job_name(job_name)
    return parsed.key if parsed is not None else None


def submit_user(request: PodRequest) -> str:
    """Whom the job runs as. slurmctld takes a numeric user name as that uid, so no passwd
    lookup is needed here (the user must exist on the Slurm nodes, as for any job)."""
    return str(request.user_id) if request.user_id is not None else ROOT_USER


def placeholder_job_for(
    pod: Mapping[str, Any],
    request: PodRequest,
    hooks: HookCredentials,
    *,
    scheduler: str,
    excluded_nodes: Sequence[str] = (),
) -> JobSpec:
    """The JobSpec for a Pod, named for `scheduler`. `excluded_nodes` adds Slurm nodes whose
    Kubernetes Node does not satisfy the Pod's node affinity; a candidate pool is never turned
    into required nodes."""
    meta = pod["metadata"]
    name = job_name_for(pod, scheduler)
    holder = JobHolder(meta["uid"], name, f"{meta['namespace']}/{meta['name']}")
    return _job_spec(holder, request, hooks, excluded_nodes=excluded_nodes, nodes=1)


def gang_job_for(
    holder: JobHolder,
    request: PodRequest,
    hooks: HookCredentials,
    *,
    nodes: int,
    excluded_nodes: Sequence[str] = (),
) -> JobSpec:
    """One job for a gang: `nodes` nodes, one task each, every node sized as `request` (the
    largest member), so Slurm allocates all of them or none."""
    return _job_spec(holder, request, hooks, excluded_nodes=excluded_nodes, nodes=nodes)


@dataclass(frozen=True)
class JobHolder:
    """Whom a job holds resources for: the key its hooks speak for (a Pod UID, or a gang's
    key), its job name, and what its script's comment shows."""

    key: str
    job_name: str
    display: str


def _job_spec(
    holder: JobHolder,
    request: PodRequest,
    hooks: HookCredentials,
    *,
    excluded_nodes: Sequence[str],
    nodes: int,
) -> JobSpec:
    excluded = sorted({*request.excluded_nodes, *excluded_nodes})
    as_root = submit_user(request) == ROOT_USER
    return JobSpec(
        script=PLACEHOLDER_SCRIPT,
        environment={
            "PATH": JOB_PATH,
            wk.ENV_HOOKS_URL: hooks.url,
            wk.ENV_POD_UID: holder.key,
            wk.ENV_POD: holder.display,
            wk.ENV_HOOK_TOKEN: hooks.token_for(holder.key),
        },
        name=holder.job_name,
        partition=request.partition,
        account=request.account,
        comment=request.comment,
        qos=request.qos,
        reservation=request.reservation,
        constraints=request.constraints,
        prefer=request.prefer,
        # Only an operator may set a priority at submit; a job submitted as another user gets
        # it by an update from the operator right after (see priority_update_needed).
        priority=request.priority if as_root else None,
        time_limit_minutes=request.timeout_minutes,
        nodes=nodes,
        tasks=nodes,  # one per node: the job holds each node for one Pod
        required_nodes=_hostlist(request.required_nodes),
        excluded_nodes=_hostlist(excluded),
        gres=f"gpu:{request.gpus}" if request.gpus else None,
        cpus_per_task=request.cpus,
        memory_per_node=request.memory_mb,
        current_working_directory=request.working_dir or "/",
        standard_output="/dev/null",
        shared=_shared(request),
    )


def describe_job(spec: JobSpec) -> str:
    """A JobSpec in a few words, for Events."""
    parts = [f"partition {spec.partition}" if spec.partition else "default partition"]
    parts.append(f"{spec.cpus_per_task} CPUs, {spec.memory_per_node} MB")
    if spec.gres:
        parts.append(spec.gres)
    for label, value in (
        ("sharing", spec.shared), ("excluding", spec.excluded_nodes),
        ("on", spec.required_nodes),
    ):  # fmt: skip
        if value:
            parts.append(f"{label} {value}")
    if spec.gres and not spec.shared:
        # SUNK's older "Schedule Kubernetes Pods with Slurm" text (in "Run Workloads") gave a GPU
        # Pod the whole node by default; SUNK's newer "Schedule Kubernetes Pods with Slurm" and
        # "SUNK Pod Scheduler" pages do not.
        parts.append(
            f"sharing: the partition's default (set {wk.ANNOTATION_EXCLUSIVE}: none "
            "for the whole node)"
        )
    return ", ".join(parts)


def priority_update_needed(request: PodRequest) -> bool:
    return request.priority is not None and submit_user(request) != ROOT_USER


def _shared(request: PodRequest) -> Shared | None:
    """SUNK's exclusive annotation in Slurm's words: none = JOB_SHARED_NONE (--exclusive, the
    whole node), ok = JOB_SHARED_OK (--oversubscribe), user/mcs/topo = --exclusive=MODE."""
    return _SHARED.get(request.exclusive) if request.exclusive else None


def _hostlist(nodes: Sequence[str]) -> str | None:
    return hostlist.collect_hostlist(list(nodes)) if nodes else None
