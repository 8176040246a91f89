"""A single Pod's steps: what `pod_decide.next_steps` says for the Pod and its job as they are now,
done through Effects. Gangs (gang_effects.py) are this path's peer, over the same cache and effects.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from reconciler import wellknown as wk
from reconciler.adapters.slurm.model import SlurmJob
from reconciler.kuberules.node_fit import node_fit
from reconciler.objects import Obj
from reconciler.scheduler.decide.placeholder import (
    describe_job,
    parse_job_name,
    placeholder_job_for,
)
from reconciler.scheduler.decide.pod_decide import (
    ANNOUNCE_AFTER_SECONDS,
    Admit,
    Announce,
    Bind,
    CancelJob,
    DeletePod,
    RecheckAt,
    Step,
    next_steps,
    recorded_job_id,
)
from reconciler.scheduler.parts import Parts
from reconciler.scheduler.settings import UNRESOLVED_NODE_RECHECK_SECONDS

log = logging.getLogger(__name__)


class PodSteps:
    def __init__(self, parts: Parts) -> None:
        self._state, self._effects, self._queue = parts.state, parts.effects, parts.queue
        self._intake, self._placement, self._trust = parts.intake, parts.placement, parts.trust
        self.settings, self._clock = parts.settings, parts.clock

    def sync(self, uid: str) -> None:
        """One level-triggered step for one Pod UID."""
        state = self._state
        with state.lock:
            pod = state.pods.get(uid)
            job = state.jobs.get(uid)
            gang = state.gang_key_locked(pod) if pod is not None else None
        if gang is not None:
            self._queue.add(gang)
            return
        if pod is not None and job is None and recorded_job_id(pod) in state.abandoned:
            # We cancelled that job to submit again (our annotation's removal may not have
            # reached the watch yet): the Pod has no job, it did not lose one.
            pod = _without_job_id(pod)
        if pod is not None and not self._trust.settled(uid, job, recorded_job_id(pod)):
            return  # its job went missing: confirmed with Slurm first
        steps = next_steps(
            pod, job, now=self._clock(), kill_wait_seconds=self.settings.kill_wait_seconds
        )
        for step in steps:
            self._execute(uid, pod, job, step)

    def _execute(self, uid: str, pod: Obj | None, job: SlurmJob | None, step: Step) -> None:
        if isinstance(step, Admit) and pod is not None:
            self._admit(pod)
        elif isinstance(step, Announce) and pod is not None:
            self._announce(pod, step)
        elif isinstance(step, Bind) and pod is not None:
            self.bind(pod, step)
        elif isinstance(step, DeletePod) and pod is not None:
            self._effects.delete_pod(pod, step)
        elif isinstance(step, CancelJob):
            self._cancel(uid, pod, step)
        elif isinstance(step, RecheckAt):
            self._queue.add_after(uid, step.when - self._clock())

    def _admit(self, pod: Obj) -> None:
        request = self._intake.request_of(pod)
        if request is None:
            return
        credentials = self._effects.credentials
        assert credentials is not None
        spec = placeholder_job_for(
            pod, request, credentials, scheduler=self.settings.name,
            excluded_nodes=self._placement.excluded_nodes(pod),
        )  # fmt: skip
        uid = pod["metadata"]["uid"]
        job_id = self._effects.submit_job(uid, spec, request, [pod], "placeholder")
        if job_id is None:
            return
        # Nothing written on the Pod yet: if Slurm starts the job soon, the Binding carries its
        # id and the bind's Event says all this (pod_decide.Announce).
        with self._state.lock:
            if uid in self._state.pods:  # deleted meanwhile: nothing would drop the note
                self._state.described[uid] = describe_job(spec)
        self._queue.add_after(uid, ANNOUNCE_AFTER_SECONDS)

    def _announce(self, pod: Obj, step: Announce) -> None:
        """The Pod waits for its job to start: record the job on it, and say what it asked."""
        uid = pod["metadata"]["uid"]
        recorded = {wk.ANNOTATION_JOB_ID: str(step.job_id)}
        self._state.note_annotations(pod, recorded)  # announced once, whatever the watch lags
        pods_out = self._effects.pods_out
        pods_out.annotate_later(pod, recorded)
        with self._state.lock:
            described = self._state.described.get(uid)
        pods_out.event(
            pod, wk.EVENT_SUBMITTED, "Submit",
            f"submitted placeholder Slurm job {step.job_id}"
            + (f" ({described})" if described else "") + "; waiting for Slurm to start it; "
            + self.settings.served,
        )  # fmt: skip

    # ---- bind -------------------------------------------------------------------------

    def bind(self, pod: Obj, step: Bind) -> None:
        with self._effects.serialised():
            node = self._checked_node(pod, step)
            if node is not None:
                self._effects.bind(pod, step, node)

    def _checked_node(self, pod: Obj, step: Bind) -> str | None:
        """The Kubernetes Node of the job's Slurm node, if the Pod may go there now."""
        uid = pod["metadata"]["uid"]
        state = self._state
        with state.lock:
            node = state.kube_node_of.get(step.slurm_node)
            facts = state.facts_locked(node or "")
        if node is None:
            log.warning(
                "scheduler: job %d runs on Slurm node %s, which has no slurmd Pod on a Node yet",
                step.job_id, step.slurm_node,
            )  # fmt: skip
            self._queue.add_after(uid, UNRESOLVED_NODE_RECHECK_SECONDS)
            return None
        if node_fit(pod, facts) or not self._placement.topology_allows(pod, node):
            # The Node changed after submit (a label, a taint, a cordon), or a Pod its rules
            # are about was bound there meanwhile: its job goes elsewhere.
            self._resubmit_elsewhere(pod, step, node)
            return None
        return node

    def _resubmit_elsewhere(self, pod: Obj, step: Bind, node: str) -> None:
        """Slurm chose a node the Pod's node affinity or tolerations rule out (it joined, or was
        labelled, tainted or cordoned, after submit): give the allocation back and submit again
        with it excluded."""
        self._effects.abandon(pod["metadata"]["uid"], step.job_id)
        pods_out = self._effects.pods_out
        pods_out.event(
            pod, wk.EVENT_BIND_FAILED, "Binding",
            f"Slurm job {step.job_id} got Slurm node {step.slurm_node} on Node {node}, which "
            "the Pod's node affinity, tolerations or pod (anti-)affinity and spread rules rule "
            "out now; submitting again without it",
            type="Warning",
        )  # fmt: skip
        pods_out.annotate(pod, {wk.ANNOTATION_JOB_ID: None})
        self._queue.add(pod["metadata"]["uid"])

    # ---- release ----------------------------------------------------------------------

    def _cancel(self, uid: str, pod: Obj | None, step: CancelJob) -> None:
        if pod is None and not self._pod_is_gone(uid):
            return
        self._effects.cancel_job(uid, step.job_id)
        log.info("scheduler: cancelled placeholder job %d: %s", step.job_id, step.message)
        if pod is not None:
            self._effects.pods_out.event(
                pod, wk.EVENT_RELEASED, "Release",
                f"cancelled placeholder Slurm job {step.job_id}: {step.message}",
            )  # fmt: skip

    def _pod_is_gone(self, uid: str) -> bool:
        """Before cancelling a job whose Pod we do not see: ask the API server. A Pod outside
        our watch, or a watch that lags, must not lose its job."""
        job = self._state.job_of(uid)
        if job is None:
            return True
        pod = self._pod_for_job(job)
        if pod is not None and pod["metadata"].get("uid") == uid:
            log.info(
                "scheduler: job %d belongs to Pod %s/%s, which exists but is not watched here",
                job.job_id, pod["metadata"]["namespace"], pod["metadata"]["name"],
            )  # fmt: skip
            return False
        return True

    def _pod_for_job(self, job: SlurmJob) -> Mapping[str, Any] | None:
        # Its user may rename it, not re-comment it: the comment, where it names a placeholder.
        named = job.admin_comment if parse_job_name(job.admin_comment) else job.name
        reference = named.removeprefix(wk.PLACEHOLDER_JOB_PREFIX).rsplit("@", 1)[0]
        namespace, _, name = reference.partition("/")
        if not namespace or not name:
            return None
        return self._effects.pods_out.get(namespace, name)


def _without_job_id(pod: Obj) -> Obj:
    meta = dict(pod["metadata"])
    meta["annotations"] = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k != wk.ANNOTATION_JOB_ID
    }
    return {**pod, "metadata": meta}
