"""The scheduler's next step for one Pod, from the Pod and its placeholder job as they are now.

Level-triggered and pure: no journal, no clock of its own. A restart at any point looks at the
same two objects and picks up where the last run stopped; the only memory is on the objects
(the job's name carries the Pod UID, the Pod's annotations the job id and a refusal).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import hostlist

from reconciler import wellknown as wk
from reconciler.adapters.slurm.model import SlurmJob
from reconciler.kuberules.integers import parse_int
from reconciler.kuberules.pod_phase import TERMINAL_PHASES
from reconciler.objects import ReadObj as Obj
from reconciler.scheduler.decide.admission import fingerprint

# Job states in which the job holds, or waits for, resources. COMPLETING is not among them:
# Slurm is already ending the job (its script is still running, holding the resources).
# EXPEDITING (REST v0.0.44+) is a requeued job whose requeue Slurm expedites.
ACTIVE_STATES = frozenset(
    {"PENDING", "RUNNING", "CONFIGURING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD", "RESIZING",
     "SIGNALING", "STAGE_OUT", "EXPEDITING"}
)  # fmt: skip
# Active states of a job without nodes: pending, or back in the queue.
QUEUED_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "EXPEDITING"})
# A Pod bound within this long of its job's submit learns its job id from its Binding: two
# writes on the happy path (binding, Event). One that waits longer is told (annotation, Event).
# Counted from Slurm's submit time, in whole seconds: 10 to 11 s after the submit. At 3 s, a
# burst of 500 on 2 CPUs (binds 3 to 7 s after the create) announced most Pods for nothing.
ANNOUNCE_AFTER_SECONDS = 10.0
# Slurm's job ids are uint32s, NO_VAL (0xfffffffe) and INFINITE (0xffffffff) excepted.
MAX_JOB_ID = 0xFFFFFFFD


@dataclass(frozen=True)
class Admit:
    """Run admission; submit a placeholder job if the Pod passes, refuse it if not."""


@dataclass(frozen=True)
class Bind:
    job_id: int
    slurm_node: str


@dataclass(frozen=True)
class Announce:
    """Record the job id on a Pod that still waits for its job to start, and say so."""

    job_id: int


@dataclass(frozen=True)
class DeletePod:
    reason: str
    message: str


@dataclass(frozen=True)
class CancelJob:
    job_id: int
    message: str


@dataclass(frozen=True)
class RecheckAt:
    """Nothing to do yet; look again at this time (epoch seconds)."""

    when: float


Step = Admit | Announce | Bind | DeletePod | CancelJob | RecheckAt


def next_steps(
    pod: Obj | None, job: SlurmJob | None, *, now: float, kill_wait_seconds: int
) -> list[Step]:
    """What to do for a Pod (None: it is gone) and its placeholder job (None: none exists)."""
    active = job is not None and job.state in ACTIVE_STATES
    if pod is None:
        return [CancelJob(job.job_id, "its Pod was deleted")] if active and job else []
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase", "Pending")
    if phase in TERMINAL_PHASES:
        return [CancelJob(job.job_id, f"its Pod {phase.lower()}")] if active and job else []
    if meta.get("deletionTimestamp"):
        return _while_deleting(meta, job, now=now, kill_wait=kill_wait_seconds)
    if job is None:
        return _without_job(pod)
    if not spec.get("nodeName") and is_refused(pod):
        # Refused after a submit (group-id, a node the affinity rules out): no job may hold
        # resources for it; it stays refused until it changes.
        return [CancelJob(job.job_id, "its Pod was refused")] if job.state in ACTIVE_STATES else []
    if spec.get("nodeName"):
        return _bound(job)
    return _unbound(pod, job, now)


def recorded_job_id(pod: Obj) -> int | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(wk.ANNOTATION_JOB_ID)
    found = parse_int(str(raw or ""), 0, MAX_JOB_ID)  # counted first: a Pod's author can write it
    return found if isinstance(found, int) else None


def is_refused(pod: Obj) -> bool:
    """Admission refused this Pod as it is now: no retry until it changes."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get(wk.ANNOTATION_REJECTED) == fingerprint(pod)


def ended_message(job: SlurmJob) -> str:
    if job.state == "COMPLETING":  # v0.0.38 hides the end state until the job has ended
        return (
            f"Slurm is ending placeholder job {job.job_id} (cancelled, preempted or past its "
            "time limit)"
        )
    reason = f", reason {job.state_reason}" if job.state_reason not in ("", "None") else ""
    return f"Slurm ended placeholder job {job.job_id} ({job.state}{reason})"


def _while_deleting(meta: Obj, job: SlurmJob | None, *, now: float, kill_wait: int) -> list[Step]:
    """The job outlives the Pod (it holds the Pod's resources), but not by more than kill-wait
    after the delete was asked for, in case the Pod never finishes terminating."""
    if job is None or job.state not in ACTIVE_STATES:
        return []
    grace = int(meta.get("deletionGracePeriodSeconds") or 0)
    asked = _epoch(meta["deletionTimestamp"]) - grace
    deadline = asked + kill_wait
    if now >= deadline:
        return [CancelJob(job.job_id, f"its Pod is still terminating {kill_wait} s after delete")]
    return [RecheckAt(deadline)]


def _without_job(pod: Obj) -> list[Step]:
    job_id = recorded_job_id(pod)
    if job_id is not None:
        # We submitted one, and Slurm no longer knows it: it ended and was purged.
        return [
            DeletePod(
                wk.EVENT_SLURM_ENDED,
                f"placeholder job {job_id} no longer exists in Slurm (ended and purged)",
            )
        ]
    if (pod.get("spec") or {}).get("nodeName"):
        return []  # bound by someone else: not ours to judge
    if is_refused(pod):
        return []
    return [Admit()]


def _unbound(pod: Obj, job: SlurmJob, now: float) -> list[Step]:
    if job.state == "RUNNING" and job.nodes:
        return [Bind(job.job_id, _first_node(job.nodes))]
    if job.state in ACTIVE_STATES:  # pending, or its node is booting
        if recorded_job_id(pod) == job.job_id:
            return []
        due = job.submit_time + ANNOUNCE_AFTER_SECONDS
        return [Announce(job.job_id)] if now >= due else [RecheckAt(due)]
    return [DeletePod(wk.EVENT_SLURM_ENDED, ended_message(job))]


def _bound(job: SlurmJob) -> list[Step]:
    if job.state in ACTIVE_STATES - QUEUED_STATES:
        return []
    if job.state in ACTIVE_STATES:  # requeued (e.g. preempted with PreemptMode=REQUEUE)
        message = f"Slurm requeued placeholder job {job.job_id}; a bound Pod cannot move"
        return [DeletePod(wk.EVENT_SLURM_ENDED, message), CancelJob(job.job_id, message)]
    return [DeletePod(wk.EVENT_SLURM_ENDED, ended_message(job))]


def _first_node(nodes: str) -> str:
    return str(hostlist.expand_hostlist(nodes)[0])


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
