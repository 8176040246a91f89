"""What the scheduler checks before it believes anything about a Pod's Slurm job (a Pod's
annotations are anyone's to write), over the cache in state.py.

- Which listed jobs are ours: ownership.py (by name, record and admin comment).
- A job that vanished from a list, or one a Pod records that nothing lists, is confirmed gone
  by a GET of that job before its Pod is touched, at most PassBudget of them per interval.
- A hook call acts only as Slurm describes the job it names (id, name, node).
- A submit that failed without Slurm's verdict may still have made a job (a timeout after
  slurmctld took it): the key's next submit waits for a job list asked for after the failure,
  which adopts the job if there is one; a duplicate found later is cancelled.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace

import hostlist

from reconciler.adapters.slurm.model import JobSpec, SlurmJob
from reconciler.errors import SlurmApiError
from reconciler.kuberules.integers import shown
from reconciler.objects import ReadObj as Obj
from reconciler.scheduler.budget import PassBudget
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.counters import Counters
from reconciler.scheduler.decide.ownership import Ownership, hook_refusal, run_as_users
from reconciler.scheduler.decide.pod_decide import ACTIVE_STATES
from reconciler.scheduler.hook_server import HookCall
from reconciler.scheduler.settings import SchedulerSettings
from reconciler.scheduler.state import SchedulerState
from reconciler.scheduler.workqueue import WorkQueue

log = logging.getLogger(__name__)

ERR_INVALID_JOB_ID = 2017
# Vanished jobs confirmed with Slurm (each may end in a Pod's deletion) per poll interval.
CONFIRMS_PER_PASS = 10


class JobTrust:
    def __init__(
        self,
        state: SchedulerState,
        slurm: SlurmClients,
        settings: SchedulerSettings,
        queue: WorkQueue,
        counters: Counters,
    ) -> None:
        self._state = state
        self._slurm = slurm
        self.settings = settings
        self._queue = queue
        self.counters = counters
        self._confirm_budget = PassBudget(CONFIRMS_PER_PASS, settings.poll_seconds)
        self._unreadable: set[tuple[str, ...]] = set()  # Pods said to be unreadable, as they were
        self._unreadable_lock = threading.Lock()

    # ---- whose jobs -------------------------------------------------------------------

    def ownership(self) -> Ownership:
        marked = self._slurm.submits_as_user
        users = {} if marked else self._pod_users()
        return Ownership(self.settings.name, self._slurm.operator_user, marked, users)

    def _pod_users(self) -> dict[str, frozenset[str]]:
        """Each key's users (servers without admin comments): a job runs as its own Pod's
        user, so only that user (or the operator) vouches for a job named for the Pod.

        Every job poll and hook call asks this, so a Pod it cannot read is skipped (and said
        once), not raised: one Pod's author must not stop every tenant's scheduling."""
        with self._state.lock:
            pods = list(self._state.pods.values())
        found: dict[str, frozenset[str]] = {}
        unreadable: dict[tuple[str, ...], str] = {}
        for pod in pods:
            try:
                users = run_as_users([pod], self.settings.default_user_id)
            except Exception as exc:  # whatever it is, the next Pod is read all the same
                unreadable[_pod_id(pod)] = f"{type(exc).__name__}: {shown(str(exc))}"
                continue
            for key, more in users.items():
                found[key] = found.get(key, frozenset()) | more
        self._note_unreadable(unreadable)
        return found

    def _note_unreadable(self, unreadable: dict[tuple[str, ...], str]) -> None:
        """A warning for each Pod newly unreadable; one that stays so is not said again."""
        with self._unreadable_lock:
            new = {pod: why for pod, why in unreadable.items() if pod not in self._unreadable}
            self._unreadable = set(unreadable)
        for (namespace, name, uid, _), why in new.items():
            log.warning(
                "scheduler: skipping pod %s/%s (uid %s), which cannot be read: %s",
                namespace, name, uid, why,
                extra={"pod": f"{namespace}/{name}", "pod_uid": uid, "reason": why},
            )  # fmt: skip

    def marked(self, spec: JobSpec) -> JobSpec:
        """Where the operator submits every job, its name goes in the admin comment too: only
        an operator can write there, so no user's job can pass for it."""
        return replace(spec, admin_comment=spec.name) if self._slurm.submits_as_user else spec

    def cancel_extras(self, extras: Iterable[SlurmJob]) -> None:
        """Duplicates of our placeholders (a submit that timed out after Slurm took it): the
        one their key records, or the first, stays."""
        for job in extras:
            with self._state.lock:
                if job.job_id in self._state.abandoned:
                    continue
                self._state.abandoned.add(job.job_id)
            try:
                self._slurm.operator.cancel(job.job_id)
            except SlurmApiError as exc:
                if exc.error_number != ERR_INVALID_JOB_ID:
                    with self._state.lock:
                        self._state.abandoned.discard(job.job_id)  # the next list tries again
                    log.warning(
                        "scheduler: cancelling duplicate job %d failed: %s", job.job_id, exc
                    )
                    continue
            self.counters.jobs_cancelled += 1
            log.warning(
                "scheduler: cancelled job %d (%s): a second placeholder for the same Pod",
                job.job_id, job.name,
            )  # fmt: skip

    # ---- vanished jobs ----------------------------------------------------------------

    def settled(self, key: str, job: SlurmJob | None, recorded: int | None) -> bool:
        """Whether the key's job is known as Slurm has it. Not while a job that vanished from a
        list, or that its Pods record and no list showed, is unconfirmed: it is confirmed now
        (within the budget), and the key looked at again."""
        state = self._state
        with state.lock:
            if recorded is not None and state.disowned.get(key) == recorded:
                return False
            job_id = state.vanished.get(key)
            unlisted = job is None and recorded is not None and recorded not in state.abandoned
            if job_id is None and unlisted and state.gone.get(key) != recorded:
                job_id = recorded
        if job_id is None:
            return True
        self._confirm(key, job_id)
        return False

    def _confirm(self, key: str, job_id: int) -> None:
        if not self._confirm_budget.take():
            self._queue.add_after(key, self.settings.poll_seconds)
            return
        found = self._slurm.operator.job(job_id)  # an error leaves it unconfirmed: a retry
        owner = self.ownership() if found is not None else None
        with self._state.lock:
            self._state.vanished.pop(key, None)
            known = self._state.jobs.get(key)
            ours = known is not None and known.job_id == job_id  # we took it for ours before
            if found is None:
                self._state.gone[key] = job_id
                if ours:
                    self._state.jobs.pop(key)
                    self._state.learned[key] = time.monotonic()
            elif ours or _claims(owner, found, key):
                self._state.record_locked(key, found)
            else:
                self._state.disowned[key] = job_id
        _log_confirmed(key, job_id, found, key in self._state.disowned)
        self._queue.add(key)

    # ---- hooks --------------------------------------------------------------------------

    def take_hook(self, call: HookCall, known: SlurmJob | None) -> None:
        """Note what a hook call tells of its job, once Slurm agrees; while the key's submit is
        in flight, keep it for the submit's answer, which says whether it is our job."""
        job = self._hook_job(call, known)
        if job is None:
            return
        with self._state.lock:
            if call.pod_uid in self._state.submitting:
                self._state.early[call.pod_uid] = job
                return
            current = self._state.jobs.get(call.pod_uid)
            if current is not None and current.job_id == job.job_id:
                self._state.record_locked(call.pod_uid, job)

    def _hook_job(self, call: HookCall, known: SlurmJob | None) -> SlurmJob | None:
        """The job a hook call is about, as Slurm has it (a GET, unless what we know of it
        already says the same), or None if the call does not hold."""
        if known is not None and known.job_id == call.job_id and hook_agrees(known, call):
            return _after_hook(known, call)
        found = self._slurm.operator.job(call.job_id)  # an error: 503, and the job calls again
        with self._state.lock:
            submitting = call.pod_uid in self._state.submitting
            recorded = set() if submitting else self._state.records_locked(call.pod_uid)
            if known is not None and not submitting:
                recorded.add(known.job_id)
            recorded -= self._state.abandoned
        refusal = hook_refusal(
            call.kind, call.pod_uid, call.slurm_node, found, self.ownership(), recorded
        )
        if refusal is not None:
            log.warning(
                "scheduler: ignored a %s call for %s naming job %d and node %r: %s",
                call.kind, call.pod_uid, call.job_id, call.slurm_node, refusal,
            )  # fmt: skip
            return None
        assert found is not None
        return _after_hook(found, call)

    # ---- submits whose outcome is unknown ---------------------------------------------

    def may_submit(self, key: str) -> bool:
        """After a failed submit, no new one until a job list asked for after the failure has
        been read: had Slurm taken the job, the list brought it (the Pod then has its job)."""
        with self._state.lock:
            failed = self._state.uncertain.get(key)
            if failed is None:
                return True
            if self._state.listed_at > failed:
                del self._state.uncertain[key]
                if key not in self._state.jobs:
                    return True
        self._queue.add_after(key, self.settings.poll_seconds)
        return False

    def submit_failed(self, key: str) -> None:
        with self._state.lock:
            self._state.uncertain[key] = time.monotonic()


def _pod_id(pod: Obj) -> tuple[str, ...]:
    """The Pod as it is now (its resourceVersion too: a change is read, and said, anew)."""
    meta = pod.get("metadata") if isinstance(pod, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    keys = ("namespace", "name", "uid", "resourceVersion")
    return tuple(str(meta.get(k, "?"))[:253] for k in keys)  # a name's most: the API server's


def _claims(owner: Ownership | None, job: SlurmJob, key: str) -> bool:
    claim = owner.claim(job) if owner is not None else None
    return claim is not None and claim.key == key


def hook_agrees(known: SlurmJob, call: HookCall) -> bool:
    """What we know of the job already vouches for the call: any signal ends it, and a start
    on one of the nodes Slurm gave it."""
    if call.kind == "signalled":
        return True
    nodes = {str(n) for n in hostlist.expand_hostlist(known.nodes)} if known.nodes else set()
    return known.state != "PENDING" and call.slurm_node in nodes


def _after_hook(job: SlurmJob, call: HookCall) -> SlurmJob:
    """A `signalled` call tells that Slurm is ending the job (v0.0.38 may still say RUNNING)."""
    if call.kind == "signalled" and job.state in ACTIVE_STATES:
        return replace(job, state="COMPLETING")
    return job


def _log_confirmed(key: str, job_id: int, found: SlurmJob | None, disowned: bool) -> None:
    if found is None:
        log.warning("scheduler: job %d of %s is gone from Slurm (a GET confirmed it)", job_id, key)
    elif disowned:
        log.warning(
            "scheduler: %s records job %d, which is not its placeholder (%s); leaving it alone",
            key, job_id, found.name,
        )  # fmt: skip
    else:
        log.info("scheduler: job %d of %s is in Slurm after all (%s)", job_id, key, found.state)
