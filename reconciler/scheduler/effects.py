"""What the scheduler does to the world: Slurm submits and cancels, and its writes to the API
server (bindings, deletes, refusals). The single-Pod path (pod_effects.py) and the gang path
(gang_effects.py) both act through one Effects, so a submit, cancel or bind behaves the same, and is
counted and noted in the cache the same, whichever decided it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

from reconciler import wellknown as wk
from reconciler.adapters.slurm.model import JobSpec, JobUpdate
from reconciler.errors import SlurmApiError, SlurmUnavailableError
from reconciler.objects import Obj
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.counters import Counters
from reconciler.scheduler.decide.admission import PodRequest, fingerprint
from reconciler.scheduler.decide.jobindex import pending_job
from reconciler.scheduler.decide.placeholder import HookCredentials, priority_update_needed
from reconciler.scheduler.decide.pod_decide import Bind, DeletePod
from reconciler.scheduler.decide.verdicts import is_verdict
from reconciler.scheduler.job_trust import JobTrust
from reconciler.scheduler.pod_writer import PodWriter
from reconciler.scheduler.stages import StageClock, created_at
from reconciler.scheduler.state import SchedulerState

log = logging.getLogger(__name__)

# Told, for each Pod this scheduler binds, the seconds from the Pod's creationTimestamp to the
# successful binding. Runs on a worker thread: keep it cheap, and it must not raise.
BindObserver = Callable[[float], None]


class Effects:
    def __init__(
        self,
        state: SchedulerState,
        slurm: SlurmClients,
        pods_out: PodWriter,
        trust: JobTrust,
        counters: Counters,
        clock: Callable[[], float],
    ) -> None:
        self._state = state
        self._slurm = slurm
        self.pods_out = pods_out
        self._trust = trust
        self.counters = counters
        self._clock = clock
        self.on_bind: BindObserver | None = None
        self.credentials: HookCredentials | None = None  # set by PodScheduler.start
        self.on_submitted: Callable[[], None] = lambda: None  # a job is pending: look soon
        self._bind_lock = threading.Lock()

    @property
    def stages(self) -> StageClock:
        """Where each waiting Pod's time goes (stages.py)."""
        return self._state.stages

    # ---- Slurm --------------------------------------------------------------------------

    def submit_job(
        self, key: str, spec: JobSpec, request: PodRequest, pods: list[Obj], what: str
    ) -> int | None:
        """Submit as the Pods' user and record the job under `key` (a Pod UID or a gang's
        key); None after refusing `pods` (Slurm's verdict on the job, or a group Slurm cannot
        give), or while an earlier submit's outcome is unknown."""
        state = self._state
        if not self._trust.may_submit(key):
            return None
        with state.lock:
            state.submitting.add(key)
        try:
            submitted = self._slurm.submit(
                self._trust.marked(spec), user_id=request.user_id, group_id=request.group_id,
                priority=request.priority,
            )  # fmt: skip
        except SlurmApiError as exc:
            names_nodes = bool(request.required_nodes or request.excluded_nodes)
            if isinstance(exc, SlurmUnavailableError) or not is_verdict(
                exc.error_number, pod_names_nodes=names_nodes
            ):
                self._trust.submit_failed(key)  # Slurm may have taken it all the same
                raise  # ours to retry (a controller restarting), not the Pods' fault
            for pod in pods:
                self.refuse(pod, f"Slurm refused the {what} job: {exc.message}")
            return None
        finally:
            with state.lock:
                state.submitting.discard(key)
                early = state.early.pop(key, None)
        self.stages.mark([p["metadata"]["uid"] for p in pods], "submitted", self._clock())
        job = replace(
            pending_job(submitted.job_id, spec.name or "", self._clock()),
            node_count=int(spec.nodes or 1),
        )
        if early is not None and early.job_id == job.job_id:
            job = early  # it started before the submit returned: bound without a poll
        with state.lock:
            known = state.jobs.get(key)
            if known is None or known.job_id != job.job_id:  # a hook may have told us more
                state.record_locked(key, job)
        self.counters.submitted += 1
        self.on_submitted()
        if self._slurm.submits_as_user:  # user, group and priority went with the submit
            return job.job_id
        if priority_update_needed(request):
            self._slurm.operator.update_job(job.job_id, JobUpdate(priority=request.priority))
        if request.group_id is not None and not self._group_matches(key, job.job_id, request, pods):
            return None
        return job.job_id

    def _group_matches(self, key: str, job_id: int, request: PodRequest, pods: list[Obj]) -> bool:
        """slurmrestd 22.05 cannot set a job's group: it is the user's primary group. Pods
        that ask for another one are refused rather than run with the wrong group."""
        job = self._slurm.operator.job(job_id)
        if job is None or job.group_id in (None, request.group_id):
            return True
        self.abandon(key, job_id)
        for pod in pods:
            self.refuse(
                pod,
                f"metadata.annotations['{wk.ANNOTATION_GROUP_ID}']: Slurm 22.05's REST API runs "
                f"the job with its user's primary group ({job.group_id}), not "
                f"{request.group_id}; remove the annotation or set it to {job.group_id}",
            )
        return False

    def abandon(self, key: str, job_id: int) -> None:
        """Cancel the key's job to submit again (or to refuse its Pods): neither a poll nor a
        late hook of it may bring it back."""
        self._slurm.operator.cancel(job_id)
        with self._state.lock:
            self._state.forget_locked(key, job_id)

    def cancel_job(self, key: str, job_id: int) -> None:
        """Cancel, and note it at once: a later sync must not see the job active still."""
        try:
            self._slurm.operator.cancel(job_id)
        except SlurmApiError as exc:
            if exc.error_number != 2017:  # unknown job: it is gone already
                raise
        self.counters.jobs_cancelled += 1
        with self._state.lock:
            job = self._state.jobs.get(key)
            if job is not None and job.job_id == job_id:
                self._state.record_locked(key, replace(job, state="CANCELLED"))

    # ---- the API server -----------------------------------------------------------------

    def serialised(self) -> AbstractContextManager[Any]:
        """Held around a bind's check and write while any Pod has pod (anti-)affinity or
        spread rules, so a rule's check sees every Pod bound before it."""
        return self._bind_lock if self._state.rule_pods else contextlib.nullcontext()

    def bind(self, pod: Obj, step: Bind, node: str) -> None:
        """Bind to `node`, checked by the caller (inside serialised())."""
        meta = pod["metadata"]
        recorded = {
            wk.ANNOTATION_JOB_ID: str(step.job_id),
            wk.ANNOTATION_SLURM_NODE: step.slurm_node,
        }
        if not self.pods_out.bind(pod, node, recorded):
            return
        # Our cache says what we just wrote, before the watch does: a gang's next look must
        # see this member placed, not missing (its restart policy would take it for dead).
        self._state.note_annotations(pod, recorded, node=node)
        self.counters.bound += 1
        self.stages.bound(meta["uid"], self._clock())
        on_bind = self.on_bind
        if on_bind is not None:
            waited = seconds_since_created(pod, self._clock())
            if waited is not None:
                on_bind(waited)
        with self._state.lock:
            described = self._state.described.pop(meta["uid"], None)
        self.pods_out.event(
            pod, wk.EVENT_SCHEDULED, "Binding",
            f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}: Slurm job "
            f"{step.job_id}" + (f" ({described})" if described else "")
            + f" runs on Slurm node {step.slurm_node}",
        )  # fmt: skip

    def delete_pod(self, pod: Obj, step: DeletePod) -> None:
        message = f"{step.message}; deleting the Pod"
        self.pods_out.event(pod, step.reason, "Delete", message, "Warning")
        self.pods_out.delete(pod)
        self._state.note_deleting(pod, self._clock())
        self.counters.pods_deleted += 1

    def warn_once(self, pod: Obj, reason: str, message: str) -> None:
        """A Warning Event with `reason` on the Pod, the first time only (a retried submit, a
        restarted gang or a new watch event do not repeat it; a restarted scheduler does)."""
        uid = pod["metadata"]["uid"]
        with self._state.lock:
            told = self._state.told_once.setdefault(uid, set())
            if reason in told:
                return
            told.add(reason)
        self.pods_out.event(pod, reason, "Scheduling", message, "Warning")

    def refuse(self, pod: Obj, message: str) -> None:
        self.counters.refused += 1
        self.pods_out.refuse(pod, message)
        # Seen at once, not when the watch brings it: the next look must not refuse again.
        self._state.note_annotations(pod, {wk.ANNOTATION_REJECTED: fingerprint(pod)})
        log.info("scheduler: refused pod %s: %s", _key(pod), message)


def seconds_since_created(pod: Obj, now: float) -> float | None:
    """From the Pod's creationTimestamp to `now` (epoch seconds), at least 0 (clocks differ);
    None without a timestamp. The API server writes whole seconds, so this reads up to 1 s
    more than the true wait."""
    created = created_at(pod)
    return None if created is None else max(0.0, now - created)


def _key(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace')}/{pod['metadata'].get('name')}"
