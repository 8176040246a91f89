"""Gangs: Pods that run all together or not at all, as ONE multi-node Slurm job. Pure.

Slurm's allocation is all-or-nothing for a job, so the gang's job (one task per node, each node
sized for the largest member) either gets every node or none; each member is then bound to one
node of it. Membership lives on the objects, as for single Pods: the Pods a job holds carry its
id (`slurm-job-id`), and the job's name carries the gang's key. So `next_gang_steps` looks at
the members and the job as they are now, and a restart picks up where the last run stopped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import hostlist

from reconciler import hostlists
from reconciler import wellknown as wk
from reconciler.adapters.slurm.model import SlurmJob
from reconciler.kuberules.integers import Bounds, shown
from reconciler.kuberules.pod_phase import TERMINAL_PHASES
from reconciler.kuberules.problem import Problem
from reconciler.objects import ReadObj as Obj
from reconciler.scheduler.decide.admission import NODE_LIST_ANNOTATIONS, PodRequest
from reconciler.scheduler.decide.placeholder import placeholder_name
from reconciler.scheduler.decide.pod_decide import (
    ACTIVE_STATES,
    QUEUED_STATES,
    ended_message,
    is_refused,
    recorded_job_id,
)

FailurePolicy = Literal["restart", "keep-going"]
FAILURE_POLICIES: tuple[FailurePolicy, ...] = wk.GANG_FAILURE_POLICIES
# A job back in the queue no longer holds the nodes its bound members run on.
REQUEUE_STATES = QUEUED_STATES
# A gang's job has a node per member, and no node list may name more (hostlists.py).
MAX_GANG_MEMBERS = hostlists.MAX_NAMES
_SIZES = Bounds(1, MAX_GANG_MEMBERS, " (a whole number of Pods)", " (one node a member)")
# A PodGroup's name rules (DNS-1123 subdomain): it ends up in job names and hook paths.
_GROUP_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# What every member must ask for alike: one job has one partition, account, QOS, user...
SHARED_FIELDS = (
    "account", "partition", "qos", "reservation", "constraints", "prefer", "exclusive",
    "user_id", "group_id", "priority", "timeout_minutes", "working_dir", "comment",
)  # fmt: skip


@dataclass(frozen=True)
class Gang:
    """A group's identity and rule, from its PodGroup or its members' annotations."""

    namespace: str
    name: str
    min_member: int
    policy: FailurePolicy

    @property
    def key(self) -> str:
        return gang_key(self.namespace, self.name)

    def job_name(self, scheduler: str) -> str:
        return placeholder_name(wk.GANG_JOB_PREFIX, self.namespace, self.name, self.key, scheduler)


# ---- steps --------------------------------------------------------------------------------


@dataclass(frozen=True)
class WaitForMembers:
    present: int
    needed: int


@dataclass(frozen=True)
class SubmitGang:
    pods: tuple[Obj, ...]


@dataclass(frozen=True)
class AdoptMembers:
    """A pending job holds these Pods (recorded on them), so no other job takes them."""

    job_id: int
    pods: tuple[Obj, ...]


@dataclass(frozen=True)
class RefreshJob:
    """The job runs but we do not know all its nodes yet (a hook names only the batch host)."""

    job_id: int


@dataclass(frozen=True)
class BindGang:
    job_id: int
    assignments: tuple[tuple[Obj, str], ...]  # (Pod, Slurm node)


@dataclass(frozen=True)
class DeleteMembers:
    pods: tuple[Obj, ...]
    reason: str
    message: str


@dataclass(frozen=True)
class CancelGangJob:
    job_id: int
    message: str


GangStep = (
    WaitForMembers
    | SubmitGang
    | AdoptMembers
    | RefreshJob
    | BindGang
    | DeleteMembers
    | CancelGangJob
)


# ---- membership ---------------------------------------------------------------------------


def gang_key(namespace: str, name: str) -> str:
    return f"{wk.GANG_KEY_PREFIX}{namespace}_{name}"


def is_gang_key(key: str) -> bool:
    return key.startswith(wk.GANG_KEY_PREFIX)


def group_of(pod: Obj) -> str | None:
    """The Pod's group name: the coscheduling label, else our annotation."""
    meta = pod.get("metadata") or {}
    name = (meta.get("labels") or {}).get(wk.LABEL_POD_GROUP) or (
        meta.get("annotations") or {}
    ).get(wk.ANNOTATION_POD_GROUP)
    return str(name).strip() or None if name else None


def gang_key_of(pod: Obj) -> str | None:
    group = group_of(pod)
    return gang_key(pod["metadata"]["namespace"], group) if group else None


def uses_pod_group_crd(pod: Obj) -> bool:
    return bool(((pod.get("metadata") or {}).get("labels") or {}).get(wk.LABEL_POD_GROUP))


def gang_from_pod_group(
    namespace: str, name: str, pod_group: Obj, default_policy: FailurePolicy
) -> Gang | Problem:
    """A coscheduling PodGroup: `spec.minMember` members run together."""
    raw = (pod_group.get("spec") or {}).get("minMember")
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_GANG_MEMBERS:
        return Problem(
            f"PodGroup {namespace}/{name} spec.minMember",
            f"must be a whole number of Pods, 1 to {MAX_GANG_MEMBERS}; got {shown(str(raw))}",
        )
    policy = _policy((pod_group.get("metadata") or {}).get("annotations") or {}, default_policy)
    if isinstance(policy, Problem):
        return policy
    return Gang(namespace, name, raw, policy)


def gang_from_annotations(
    namespace: str, name: str, members: Sequence[Obj], default_policy: FailurePolicy
) -> Gang | Problem:
    """Our annotations: every member says the same `pod-group-min-member` (and policy)."""
    if not _GROUP_NAME.fullmatch(name) or len(name) > 253:
        return Problem(
            f"metadata.annotations[{wk.ANNOTATION_POD_GROUP!r}]",
            f"{name!r} is not a valid group name: lower-case letters, digits, '-' and '.', "
            "as a PodGroup's name",
        )
    field = f"metadata.annotations[{wk.ANNOTATION_POD_GROUP_MIN_MEMBER!r}]"
    values = {_annotations(p).get(wk.ANNOTATION_POD_GROUP_MIN_MEMBER) for p in members}
    values.discard(None)
    if len(values) != 1:
        seen = ", ".join(sorted(shown(str(v)) for v in values)) or "none"
        return Problem(
            field, f"the members of pod group {name!r} must all set it alike (seen: {seen})"
        )
    size = _SIZES.read(field, values.pop())
    if isinstance(size, Problem):
        return size
    policies = {v for p in members if (v := _annotations(p).get(wk.ANNOTATION_GANG_POLICY))
                is not None}  # fmt: skip
    if len(policies) > 1:
        field = f"metadata.annotations[{wk.ANNOTATION_GANG_POLICY!r}]"
        seen = ", ".join(sorted(shown(str(p)) for p in policies))
        return Problem(field, f"the members of pod group {name!r} disagree: {seen}")
    policy = _policy({wk.ANNOTATION_GANG_POLICY: next(iter(policies))} if policies else {},
                     default_policy)  # fmt: skip
    if isinstance(policy, Problem):
        return policy
    return Gang(namespace, name, size, policy)


def _policy(annotations: Mapping[str, str], default: FailurePolicy) -> FailurePolicy | Problem:
    raw = annotations.get(wk.ANNOTATION_GANG_POLICY)
    if raw is None:
        return default
    value = str(raw).strip()
    if value not in FAILURE_POLICIES:
        return Problem(
            f"metadata.annotations[{wk.ANNOTATION_GANG_POLICY!r}]",
            f"must be one of {', '.join(FAILURE_POLICIES)}, got {shown(str(raw))}",
        )
    return value


def _annotations(pod: Obj) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("annotations") or {}


# ---- one request for the gang -------------------------------------------------------------


def capped_requests(requests: Iterable[PodRequest | None]) -> list[PodRequest] | Problem | None:
    """Every member's request, taken one at a time; None when one is refused (the caller said
    why). The gang's job is built from all of them at once, so the node lists the members
    name together are capped as one Pod's are: past hostlists.MAX_NAMES the gang is refused
    before the members left are expanded (50 members of 40,000 names each held 289 MB)."""
    held: list[PodRequest] = []
    totals = dict.fromkeys(NODE_LIST_ANNOTATIONS, 0)
    for request in requests:
        if request is None:
            return None
        for key, field in NODE_LIST_ANNOTATIONS.items():
            totals[key] += len(getattr(request, field))
            if totals[key] > hostlists.MAX_NAMES:
                return Problem(
                    f"metadata.annotations[{key!r}]",
                    f"the pod group's members name {totals[key]:,} nodes together; the limit "
                    f"is {hostlists.MAX_NAMES:,}",
                )
        held.append(request)
    return held


def gang_request(requests: Sequence[PodRequest]) -> PodRequest | Problem:
    """One per-node request for the whole gang: the largest member's CPUs, memory and GPUs on
    every node (Slurm gives each node of a job the same), and the fields a job has once."""
    first = requests[0]
    for field in SHARED_FIELDS:
        values = {getattr(r, field) for r in requests}
        if len(values) > 1:
            shown = ", ".join(sorted(repr(v) for v in values))
            return Problem(
                f"the pod group's {field.replace('_', '-')}",
                f"its members ask for different values ({shown}); one Slurm job has one",
            )
    return replace(
        first,
        cpus=max(r.cpus for r in requests),
        memory_mb=max(r.memory_mb for r in requests),
        gpus=max(r.gpus for r in requests),
        grace_seconds=max(r.grace_seconds for r in requests),
        excluded_nodes=tuple(sorted({n for r in requests for n in r.excluded_nodes})),
        required_nodes=tuple(sorted({n for r in requests for n in r.required_nodes})),
    )


# ---- the next steps -----------------------------------------------------------------------


def next_gang_steps(gang: Gang, members: Sequence[Obj], job: SlurmJob | None) -> list[GangStep]:
    """What to do for a gang, from its members (the group's Pods we see) and its newest job."""
    steps: list[GangStep] = []
    orphans = [
        p for p in members
        if _bound(p) and _live(p) and not _deleting(p) and not _held_by_active(p, job)
    ]  # fmt: skip
    if orphans:  # bound to a job that ended: their resources are gone
        message = ended_message(job) if job is not None else "its gang's job no longer exists"
        steps.append(DeleteMembers(tuple(orphans), wk.EVENT_SLURM_ENDED, message))
    if job is None or job.state not in ACTIVE_STATES:
        return steps + _without_job(gang, members)
    return steps + _with_job(gang, members, job)


def _without_job(gang: Gang, members: Sequence[Obj]) -> list[GangStep]:
    free = _free(members, None)
    if len(free) < gang.min_member:
        return [WaitForMembers(len(free), gang.min_member)]
    return [SubmitGang(tuple(free[: gang.min_member]))]


def _with_job(gang: Gang, members: Sequence[Obj], job: SlurmJob) -> list[GangStep]:
    holders = [p for p in members if recorded_job_id(p) == job.job_id]
    live = [p for p in holders if _live(p)]
    free = _free(members, job.job_id)
    if job.state in REQUEUE_STATES:
        requeued = [p for p in live if _bound(p)]
        if requeued:  # Slurm took the nodes back (e.g. preempted with PreemptMode=REQUEUE)
            message = f"Slurm requeued gang job {job.job_id}; bound Pods cannot move"
            return [
                DeleteMembers(tuple(requeued), wk.EVENT_SLURM_ENDED, message),
                CancelGangJob(job.job_id, message),
            ]
        return _pending(gang, job, live, free)
    if job.state != "RUNNING":  # suspended, configuring...: its nodes stay its own
        return []
    slots = _slots(job)
    if not slots:
        return [RefreshJob(job.job_id)]
    placed = {_slurm_node(p): p for p in holders if _bound(p)}
    waiting = [p for p in live if not _bound(p) and not _deleting(p)]
    if not placed:  # nothing bound yet: all members at once, or none
        fill = waiting + free
        if len(fill) < len(slots):
            return [CancelGangJob(job.job_id, f"its gang has {len(fill)} of {len(slots)} Pods")]
        return [BindGang(job.job_id, tuple(zip(fill, slots, strict=False)))]
    failed = [p for p in holders if _phase(p) == "Failed" or (_bound(p) and _deleting(p))]
    gone = [n for n in slots if n not in placed]  # its bound member was deleted
    if gang.policy == "restart" and (failed or (gone and not waiting)):
        return _restart(gang, job, live, failed, gone)
    open_slots = [n for n in slots if n not in placed or not _live(placed[n])]
    fill = waiting + (free if gang.policy == "keep-going" else [])
    assignments = tuple(zip(fill, open_slots, strict=False))
    if assignments:
        return [BindGang(job.job_id, assignments)]
    if not live:
        return [CancelGangJob(job.job_id, "every Pod of its gang finished or was deleted")]
    return []


def _pending(gang: Gang, job: SlurmJob, live: Sequence[Obj], free: Sequence[Obj]) -> list[GangStep]:
    """A pending job holds the Pods it was submitted for; it is cancelled, not run half
    empty, if the gang falls below its size."""
    size = job.node_count if job.node_count > 1 else gang.min_member
    missing = size - len(live)
    if missing <= 0:
        return []
    if len(free) < missing:
        return [CancelGangJob(job.job_id, f"its gang has {len(live) + len(free)} of {size} Pods")]
    return [AdoptMembers(job.job_id, tuple(free[:missing]))]


def _restart(
    gang: Gang, job: SlurmJob, live: Sequence[Obj], failed: Sequence[Obj], gone: Sequence[str]
) -> list[GangStep]:
    """Every member goes (its controller makes new ones, a new gang); the job ends once they
    are gone, as a single Pod's does."""
    who = ", ".join(_name(p) for p in failed) or f"the member on {', '.join(gone)}"
    message = (
        f"gang {gang.namespace}/{gang.name}: {who} failed or was deleted; restarting the whole "
        f"gang (policy restart): its Pods are deleted and Slurm job {job.job_id} ends"
    )
    doomed = tuple(p for p in live if not _deleting(p))
    if doomed:
        return [DeleteMembers(doomed, wk.EVENT_GANG_RESTART, message)]
    if not live:
        return [CancelGangJob(job.job_id, message)]
    return []


def _free(members: Sequence[Obj], job_id: int | None) -> list[Obj]:
    """Members no job holds: unbound, alive, not refused; oldest first, so the same Pods are
    chosen again after a restart."""
    free = [
        p
        for p in members
        if not _bound(p) and _live(p) and not _deleting(p) and not is_refused(p)
        and (job_id is None or recorded_job_id(p) != job_id)
    ]  # fmt: skip
    return sorted(free, key=_age_order)


def _slots(job: SlurmJob) -> list[str]:
    nodes = [str(n) for n in hostlist.expand_hostlist(job.nodes)] if job.nodes else []
    return nodes if len(nodes) >= max(job.node_count, 1) else []


def _held_by_active(pod: Obj, job: SlurmJob | None) -> bool:
    held = recorded_job_id(pod)
    if held is None:
        return True  # bound by someone else: not ours to judge
    return job is not None and job.job_id == held and job.state in ACTIVE_STATES


def _age_order(pod: Obj) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _live(pod: Obj) -> bool:
    return _phase(pod) not in TERMINAL_PHASES


def _bound(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _deleting(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _slurm_node(pod: Obj) -> str:
    return str(_annotations(pod).get(wk.ANNOTATION_SLURM_NODE) or "")


def _name(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("name"))
