"""What the scheduler knows: our Pods, their placeholder jobs, the Nodes, and the notes about
jobs that job_trust.py checks with Slurm. One lock guards the Pods, jobs, Nodes and
the trust notes; nothing here does I/O.

Every other part reads and writes through this object, so a change to what is cached, or to
how a gang's members are indexed, is made in one place.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection
from datetime import UTC, datetime

from reconciler.adapters.slurm.model import SlurmJob
from reconciler.kuberules.node_fit import NodeFacts, node_facts
from reconciler.kuberules.pod_phase import finished
from reconciler.kuberules.pod_rules import needs_placed_pods
from reconciler.objects import Obj
from reconciler.scheduler.decide.gang_decide import gang_key_of, is_gang_key
from reconciler.scheduler.decide.jobindex import Merged
from reconciler.scheduler.decide.pod_decide import recorded_job_id
from reconciler.scheduler.stages import StageClock, created_at


class SchedulerState:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pod_changed = threading.Condition(self.lock)
        self.pods: dict[str, Obj] = {}  # uid -> Pod
        self.jobs: dict[str, SlurmJob] = {}  # Pod uid -> its placeholder job
        self.learned: dict[str, float] = {}  # Pod uid -> when a hook/submit/cancel updated it
        self.abandoned: set[int] = set()  # jobs we cancelled to submit again or to refuse
        self.kube_node_of: dict[str, str] = {}  # Slurm node -> Kubernetes Node (slurmd Pods)
        self.node_labels: dict[str, dict[str, str]] = {}
        self.node_facts: dict[str, NodeFacts] = {}  # Node -> what node_fit reads of it
        self.gang_members: dict[str, set[str]] = {}  # gang key -> Pod uids
        self.told_waiting: dict[str, str] = {}  # Pod uid -> what it was told it waits for
        self.told_once: dict[str, set[str]] = {}  # Pod uid -> reasons of Events said once
        self.gang_admitted: set[str] = set()  # gang members admitted for their job
        self.rule_pods: set[str] = set()  # uids of our Pods with pod (anti-)affinity rules
        # What is checked with Slurm before it is believed (job_trust.py: a Pod's job id can be
        # forged).
        self.vanished: dict[str, int] = {}  # key -> its job, missing from the last list
        self.gone: dict[str, int] = {}  # key -> its job, which Slurm confirmed is gone
        self.disowned: dict[str, int] = {}  # key -> the job it records, which is not ours
        self.submitting: set[str] = set()  # keys with a submit in flight
        self.early: dict[str, SlurmJob] = {}  # key -> its job, started before the submit returned
        self.uncertain: dict[str, float] = {}  # key -> when a submit failed without a verdict
        self.listed_at = 0.0  # when the last job list read was asked for (monotonic)
        # key -> its job as submitted, in a few words: said by the Event of its bind, or of
        # its announce if it waits (pod_decide.Announce); in memory only, as Events are.
        self.described: dict[str, str] = {}
        self.stages = StageClock()  # where each waiting Pod's time goes; its own lock

    # ---- what the watches bring -------------------------------------------------------

    def on_pod(self, event: str, pod: Obj) -> list[str]:
        """Take the event; the keys to look at again, in order (a gang's Pods are handled
        together, under its key)."""
        uid = pod["metadata"]["uid"]
        with self.pod_changed:
            gang = self.gang_key_locked(pod)
            before = self.pods.get(uid)
            if event == "DELETED":
                self.pods.pop(uid, None)
                self.forget_key_locked(uid)
            else:
                self.pods[uid] = pod
            if event == "DELETED":
                self.stages.drop(uid)
            elif not (pod.get("spec") or {}).get("nodeName"):  # our bind hands its marks on
                self.stages.seen(uid, time.time(), created_at(pod))
            keys = self._index_gang_locked(uid, before, None if event == "DELETED" else pod)
            if event != "DELETED" and needs_placed_pods(pod) and not finished(pod):
                self.rule_pods.add(uid)
            else:
                self.rule_pods.discard(uid)
            self.pod_changed.notify_all()
        return [*keys, gang or uid]

    def gang_key_locked(self, pod: Obj) -> str | None:
        """The Pod's gang, unless it has a placeholder job of its own: a group label added
        after it was scheduled alone does not move it (its job would leak)."""
        if pod["metadata"]["uid"] in self.jobs:
            return None
        return gang_key_of(pod)

    def _index_gang_locked(self, uid: str, before: Obj | None, after: Obj | None) -> list[str]:
        old = self.gang_key_locked(before) if before is not None else None
        new = self.gang_key_locked(after) if after is not None else None
        left: list[str] = []
        if old and old != new:
            members = self.gang_members.get(old, set())
            members.discard(uid)
            if not members:
                self.gang_members.pop(old, None)
            left.append(old)
        if new:
            self.gang_members.setdefault(new, set()).add(uid)
        if after is None:
            self.told_waiting.pop(uid, None)
            self.told_once.pop(uid, None)
            self.gang_admitted.discard(uid)
        return left

    def on_slurmd_pod(self, event: str, pod: Obj) -> None:
        """A slurmd Pod is a Slurm node (slurmd -N <pod name>) on its Kubernetes Node."""
        name, node = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
        with self.lock:
            if event == "DELETED" or not node:
                self.kube_node_of.pop(name, None)
            else:
                self.kube_node_of[name] = node

    def on_node(self, event: str, node: Obj) -> None:
        name = node["metadata"]["name"]
        with self.lock:
            if event == "DELETED":
                self.node_labels.pop(name, None)
                self.node_facts.pop(name, None)
            else:
                self.node_labels[name] = node["metadata"].get("labels") or {}
                self.node_facts[name] = node_facts(node)

    def note_annotations(
        self, pod: Obj, annotations: dict[str, str], *, node: str | None = None
    ) -> None:
        uid = pod["metadata"]["uid"]
        with self.pod_changed:
            cached = self.pods.get(uid)
            if cached is None or (node and (cached.get("spec") or {}).get("nodeName")):
                return
            meta = dict(cached["metadata"])
            meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
            spec = {**cached["spec"], "nodeName": node} if node else cached["spec"]
            self.pods[uid] = {**cached, "metadata": meta, "spec": spec}

    def note_deleting(self, pod: Obj, now: float) -> None:
        """A delete we asked for, seen at once as the API server records it (deletionTimestamp
        = now + the Pod's grace): a sync of the same Pod before the watch brings the delete
        (a job read, a hook, a poll) must not delete it, and tell its Event, a second time."""
        uid = pod["metadata"]["uid"]
        with self.pod_changed:
            cached = self.pods.get(uid)
            if cached is None or cached["metadata"].get("deletionTimestamp"):
                return
            grace = (cached.get("spec") or {}).get("terminationGracePeriodSeconds")
            grace = 30 if grace is None else int(grace)  # Kubernetes' default
            stamp = datetime.fromtimestamp(now + grace, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            meta = {**cached["metadata"], "deletionTimestamp": stamp,
                    "deletionGracePeriodSeconds": grace}  # fmt: skip
            self.pods[uid] = {**cached, "metadata": meta}

    # ---- jobs -------------------------------------------------------------------------

    def record_locked(self, uid: str, job: SlurmJob) -> None:
        self.jobs[uid] = job
        self.learned[uid] = time.monotonic()
        self._allocated_locked(uid, job)

    def _allocated_locked(self, key: str, job: SlurmJob) -> None:
        """The key's Pods' stages: Slurm allocated the job (its start time), and we know."""
        if job.state not in ("RUNNING", "CONFIGURING") or not job.nodes:
            return
        uids = self.gang_members.get(key, ()) if is_gang_key(key) else (key,)
        if job.start_time > 0:
            self.stages.mark(uids, "allocated", float(job.start_time))
        self.stages.mark(uids, "seen allocated", time.time())

    def forget_locked(self, uid: str, job_id: int) -> None:
        """The Pod has no job now (we cancelled it to submit again, or to refuse the Pod):
        neither a poll nor a late hook of the old job may bring it back."""
        self.jobs.pop(uid, None)
        self.learned[uid] = time.monotonic()
        self.abandoned.add(job_id)

    def records_locked(self, key: str) -> set[int]:
        """The job ids the key's Pods record (the Pod, or a gang's members)."""
        uids = self.gang_members.get(key, ()) if is_gang_key(key) else (key,)
        pods = [p for u in uids if (p := self.pods.get(u)) is not None]
        return {i for p in pods if (i := recorded_job_id(p)) is not None}

    def take_listing_locked(self, merged: Merged, sent: float) -> None:
        self.jobs, self.learned = merged.jobs, merged.learned
        for key in merged.changed:
            if (job := self.jobs.get(key)) is not None:
                self._allocated_locked(key, job)
        self.vanished = dict(merged.vanished)
        self.listed_at = sent

    def prune_locked(self, before: float, listed: Collection[int]) -> None:
        """What a whole list would have pruned, for a poll that reads none: notes of when a
        key learned something, older than `before` (no read in flight began that early), and
        abandoned jobs Slurm no longer lists though it lists later ones (purged: no list or
        hook can bring them back; one newer than the list may not be in it yet)."""
        self.learned = {key: at for key, at in self.learned.items() if at >= before}
        newest = max(listed, default=0)
        self.abandoned = {i for i in self.abandoned if i in listed or i > newest}

    def forget_key_locked(self, key: str) -> None:
        """The key's Pod is gone: what was noted about its job goes with it."""
        for notes in (self.gone, self.disowned, self.uncertain, self.described):
            notes.pop(key, None)

    # ---- what a signalled job waits for -----------------------------------------------

    def pod_released_locked(self, uid: str) -> bool:
        pod = self.pods.get(uid)
        return pod is None or finished(pod)

    def gang_released_locked(self, key: str, job_id: int) -> bool:
        """No Pod the gang's job holds is left running."""
        return not any(
            recorded_job_id(pod) == job_id and not finished(pod)
            for uid in self.gang_members.get(key, ())
            if (pod := self.pods.get(uid)) is not None
        )

    # ---- views --------------------------------------------------------------------------

    def retained(self) -> dict[str, int]:
        """How many entries each per-Pod and per-job structure holds: each drops a Pod's entry
        when the Pod is gone; the job index and the abandoned jobs drop a job's when Slurm no
        longer lists it (its MinJobAge), `learned` a note once it is 60 s old
        (job_reads_effects.LEARNED_SECONDS)."""
        with self.lock:
            sizes = {name: len(getattr(self, name)) for name in (
                "pods", "jobs", "learned", "abandoned", "gang_members", "told_waiting",
                "told_once", "gang_admitted", "rule_pods", "vanished", "gone", "disowned",
                "submitting", "early", "uncertain", "described",
            )}  # fmt: skip
        return {**sizes, "stage marks": len(self.stages)}

    def job_of(self, key: str) -> SlurmJob | None:
        with self.lock:
            return self.jobs.get(key)

    def known_jobs(self) -> dict[str, SlurmJob]:
        with self.lock:
            return dict(self.jobs)

    def start_watched_locked(self) -> dict[int, str]:
        """Job id -> key of the jobs the start watch reads when they leave PENDING (starts.py):
        our PENDING jobs, but for abandoned ones."""
        abandoned = self.abandoned
        return {job.job_id: key for key, job in self.jobs.items()
                if job.state == "PENDING" and job.job_id not in abandoned}  # fmt: skip

    def nodes(self) -> tuple[dict[str, str], dict[str, dict[str, str]], dict[str, NodeFacts]]:
        """A copy of (Slurm node -> Node, Node -> labels, Node -> its facts for node_fit)."""
        with self.lock:
            return dict(self.kube_node_of), dict(self.node_labels), dict(self.node_facts)

    def facts_locked(self, node: str) -> NodeFacts:
        """What node_fit reads of the Node; a Node not seen (yet) has no labels or taints."""
        return self.node_facts.get(node) or NodeFacts(node)
