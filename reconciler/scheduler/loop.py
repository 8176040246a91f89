"""The scheduler's imperative shell: watches, the job index, the hooks API and the workers.

Latency does not come from polling. A Pod event queues its Pod at once; a placeholder job calls
the hooks API when Slurm starts it and when Slurm signals it. The poll of Slurm's jobs is the
safety net for a missed call: guarded by `update_time`, a steady state costs one 304 a cycle.

Each Pod is handled by `decide.next_steps` on a work queue (one worker per Pod at a time), so
a restart anywhere resumes from what the Pod and the job say.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.kube_watch import WatchMemory
from reconciler.adapters.slurm_rest import JobSpec, JobUpdate, SlurmJob, SlurmObserver
from reconciler.errors import ReconcilerError, SlurmApiError, SlurmUnavailableError
from reconciler.kuberules.node_affinity import has_node_constraints, node_matches
from reconciler.scheduler.admission import PodRequest, Problem, Rejection, admit, fingerprint
from reconciler.scheduler.budget import PassBudget
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.decide import (
    Admit,
    Bind,
    CancelJob,
    DeletePod,
    RecheckAt,
    Step,
    finished,
    next_steps,
    recorded_job_id,
)
from reconciler.scheduler.gang import gang_key_of, is_gang_key
from reconciler.scheduler.gang_shell import GangShell
from reconciler.scheduler.hooks import HookCall, HooksServer
from reconciler.scheduler.job_trust import CONFIRMS_PER_PASS, JobTrust
from reconciler.scheduler.jobindex import merge_listing, pending_job
from reconciler.scheduler.packing import (
    Fragmentation,
    fragmentation,
    packing_weights,
    weight_changes,
)
from reconciler.scheduler.placeholder import (
    HookCredentials,
    describe_job,
    parse_job_name,
    placeholder_job_for,
    pod_uid_of,
    priority_update_needed,
)
from reconciler.scheduler.pod_policies import PodPolicies
from reconciler.scheduler.pod_writer import PodWriter, load_hooks_key
from reconciler.scheduler.settings import UNRESOLVED_NODE_RECHECK_SECONDS, SchedulerSettings
from reconciler.scheduler.tolerations import Taint, blocking_taints, tolerates_all
from reconciler.scheduler.topology import (
    PlacedPod,
    excluded_by_placed_rules,
    needs_placed_pods,
    selector_queries,
    topology_problems,
    unlabelled_keys,
)
from reconciler.scheduler.topology import excluded_nodes as topology_excluded
from reconciler.scheduler.verdicts import is_verdict
from reconciler.scheduler.workqueue import WorkQueue

log = logging.getLogger(__name__)

RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
NAMESPACE_TTL_SECONDS = 30.0  # a label change reaches namespaceObject within this
PACK_SECONDS = 5.0  # node weights are refreshed at least this often, and after every change
HOOK_WAIT_SECONDS = 5.0  # below the script's curl timeout (10 s)
Obj = dict[str, Any]
# Told, for each Pod this scheduler binds, the seconds from the Pod's creationTimestamp to the
# successful binding. Runs on a worker thread: keep it cheap, and it must not raise.
BindObserver = Callable[[float], None]


@dataclass
class Counters:
    """What the scheduler did, for logs, tests and (later) metrics."""

    submitted: int = 0
    bound: int = 0
    refused: int = 0
    pods_deleted: int = 0
    jobs_cancelled: int = 0
    polls: int = 0
    polls_unchanged: int = 0
    hooks: int = 0


class PodScheduler(GangShell, JobTrust):
    def __init__(
        self,
        kube: Kube,
        slurm: SlurmClients,
        settings: SchedulerSettings,
        *,
        hooks_key: bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._kube = kube
        self._slurm = slurm
        self.settings = settings
        self._clock = clock
        self._hooks_key = hooks_key
        self._lock = threading.Lock()
        self._pod_changed = threading.Condition(self._lock)
        self._pods: dict[str, Obj] = {}  # uid -> Pod
        self._jobs: dict[str, SlurmJob] = {}  # Pod uid -> its placeholder job
        self._learned: dict[str, float] = {}  # Pod uid -> when a hook/submit/cancel updated it
        self._abandoned: set[int] = set()  # jobs we cancelled to submit again or to refuse
        self._kube_node_of: dict[str, str] = {}  # Slurm node -> Kubernetes Node (slurmd Pods)
        self._node_labels: dict[str, dict[str, str]] = {}
        self._node_taints: dict[str, list[Taint]] = {}  # Node -> NoSchedule/NoExecute taints
        self._failures: dict[str, int] = {}
        self._queue = WorkQueue()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watches: list[Any] = []
        self._pods_out = PodWriter(kube, settings.name)
        self._jobs_since: int | None = None
        self.counters = Counters()
        self.on_bind: BindObserver | None = None
        self.credentials: HookCredentials | None = None
        self.hooks: HooksServer | None = None
        self._policies = PodPolicies()  # replaced whole by set_policies: no lock needed
        self._namespaces: dict[str, tuple[float, Obj | None]] = {}  # name -> (read at, object)
        self._gang_members: dict[str, set[str]] = {}  # gang key -> Pod uids
        # (namespace, name) -> (read at, PodGroup, why it could not be read)
        self._pod_groups: dict[tuple[str, str], tuple[float, Obj | None, str]] = {}
        self._told_waiting: dict[str, str] = {}  # Pod uid -> what it was told it waits for
        self._gang_admitted: set[str] = set()  # gang members admitted for their job
        self._rule_pods: set[str] = set()  # uids of our Pods with pod (anti-)affinity rules
        self._bind_lock = threading.Lock()
        self._repack = threading.Event()
        self.fragmentation: Fragmentation | None = None  # of the bin-packed partitions
        # What is checked with Slurm before it is believed (job_trust.py, issue 17).
        self._pods_listed = False  # our Pods' records are known: duplicates may be cancelled
        self._vanished: dict[str, int] = {}  # key -> its job, missing from the last list
        self._gone: dict[str, int] = {}  # key -> its job, which Slurm confirmed is gone
        self._disowned: dict[str, int] = {}  # key -> the job it records, which is not ours
        self._submitting: set[str] = set()  # keys with a submit in flight
        self._early: dict[str, SlurmJob] = {}  # key -> its job, started before the submit returned
        self._uncertain: dict[str, float] = {}  # key -> when a submit failed without a verdict
        self._listed_at = 0.0  # when the last job list read was asked for (monotonic)
        self._confirm_budget = PassBudget(CONFIRMS_PER_PASS, settings.poll_seconds)

    # ---- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        """Load what exists (jobs, Pods, Nodes), then watch; returns once scheduling runs."""
        key = self._hooks_key or load_hooks_key(
            self._kube, self.settings.namespace, self.settings.hooks_secret_name
        )
        self.hooks = HooksServer(
            self.settings.hooks_host, self.settings.hooks_port, HookCredentials("", key),
            self.on_hook,
        )  # fmt: skip
        url = self.settings.hooks_url or self._default_hooks_url(self.hooks.port)
        self.credentials = HookCredentials(url, key)
        self._poll_jobs()  # the full list first: a restart finds the jobs it made
        if self.settings.bin_pack_partitions:
            self._check_packing()
            self._pack()  # before the first submit: a burst must already see the order
            self._spawn("packer", self._pack_forever)
        ours = f"spec.schedulerName={self.settings.name}"
        for namespace in self.settings.watch_namespaces or (None,):
            self._mirror("Pod", namespace, self._on_pod, field_selector=ours)
        slurmd = f"{wk.LABEL_NAME}=slurmd,{wk.LABEL_MANAGED_BY}={wk.MANAGED_BY_VALUE}"
        self._mirror("Pod", self.settings.namespace, self._on_slurmd_pod, label_selector=slurmd)
        self._mirror("Node", None, self._on_node)
        self._pods_listed = True
        self._jobs_since = None
        self._poll_jobs()  # again, with the Pods' records: which job is each Pod's
        self.hooks.start()
        self._spawn("poll", self._poll_forever)
        for index in range(self.settings.workers):
            self._spawn(f"worker-{index}", self._work)
        log.info(
            "scheduler %s: watching %s, hooks at %s, %d placeholder jobs known",
            self.settings.name,
            ", ".join(self.settings.watch_namespaces or ("the whole cluster",)),
            url,
            len(self._jobs),
        )

    def _default_hooks_url(self, port: int) -> str:
        host = self.settings.hooks_host
        if host in ("", "0.0.0.0", "::"):
            log.warning(
                "scheduler: placeholder jobs will call the hooks API at 127.0.0.1:%d; on a "
                "cluster set --hooks-url to an address every slurmd reaches (e.g. a Service)",
                port,
            )
            host = "127.0.0.1"
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._stopping.set()
        with self._pod_changed:
            self._pod_changed.notify_all()
        self._queue.close()
        for watch in list(self._watches):
            watch.stop()
        if self.hooks is not None:
            self.hooks.stop()
        self._pods_out.close()
        for thread in self._threads:
            thread.join(timeout=1.0)  # watch threads end at their next event or timeout

    def observe(
        self, *, bind: BindObserver | None = None, slurm: SlurmObserver | None = None
    ) -> None:
        """Hooks for metrics: `bind` gets each bound Pod's seconds since its creation, `slurm`
        each Slurm request (see SlurmObserver). None removes a hook."""
        self.on_bind = bind
        self._slurm.observe = slurm

    def wait(self) -> None:
        while not self._stopping.wait(1.0):
            pass

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(
            target=self._guard(name, target), args=args, name=f"scheduler-{name}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _guard(self, name: str, target: Callable[..., None]) -> Callable[..., None]:
        def run(*args: Any) -> None:
            while not self._stopping.is_set():
                try:
                    target(*args)
                    return
                except ReconcilerError as exc:
                    log.warning("scheduler %s failed, retrying in 1 s: %s", name, exc)
                except Exception:
                    log.exception("scheduler %s failed; retrying in 1 s", name)
                # A watch resumes from the version it started at: replayed events are
                # harmless (level-triggered), and a version too old relists (410).
                self._stopping.wait(1.0)

        return run

    # ---- watches ----------------------------------------------------------------------

    def _mirror(
        self,
        kind: str,
        namespace: str | None,
        handle: Callable[[str, Obj], None],
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> None:
        """List now (so start() returns with a full picture), then follow a watch."""
        selectors = {"label_selector": label_selector, "field_selector": field_selector}
        listing = self._kube.list("v1", kind, namespace, **selectors)
        memory = WatchMemory.of_listing(listing.items, listing.resource_version)
        for obj in listing.items:
            handle("ADDED", _slimmed(obj))
        name = f"{kind.lower()}s-{namespace or 'all'}"
        self._spawn(name, self._follow, kind, namespace, selectors, memory, handle)

    def _follow(
        self,
        kind: str,
        namespace: str | None,
        selectors: dict[str, str | None],
        memory: WatchMemory,
        handle: Callable[[str, Obj], None],
    ) -> None:
        """Each new watch (after an error, an API server outage) resumes from `memory`: a
        relist after a 410 then reports the objects deleted meanwhile, so a Pod deleted during
        a long outage still releases its job."""
        watch = self._kube.watch("v1", kind, namespace, **selectors)
        watch.carry(memory)
        self._watches.append(watch)
        for event, obj in watch:
            if self._stopping.is_set():
                return
            handle(event, _slimmed(obj))

    def _on_pod(self, event: str, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        with self._pod_changed:
            gang = self._gang_key_locked(pod)
            before = self._pods.get(uid)
            if event == "DELETED":
                self._pods.pop(uid, None)
                self._forget_key_locked(uid)
            else:
                self._pods[uid] = pod
            self._index_gang_locked(uid, before, None if event == "DELETED" else pod)
            if event != "DELETED" and needs_placed_pods(pod) and not finished(pod):
                self._rule_pods.add(uid)
            else:
                self._rule_pods.discard(uid)
            self._pod_changed.notify_all()
        self._queue.add(gang or uid)  # a gang's Pods are handled together, under its key

    def _gang_key_locked(self, pod: Obj) -> str | None:
        """The Pod's gang, unless it has a placeholder job of its own: a group label added
        after it was scheduled alone does not move it (its job would leak)."""
        if pod["metadata"]["uid"] in self._jobs:
            return None
        return gang_key_of(pod)

    def _index_gang_locked(self, uid: str, before: Obj | None, after: Obj | None) -> None:
        old = self._gang_key_locked(before) if before is not None else None
        new = self._gang_key_locked(after) if after is not None else None
        if old and old != new:
            members = self._gang_members.get(old, set())
            members.discard(uid)
            if not members:
                self._gang_members.pop(old, None)
            self._queue.add(old)
        if new:
            self._gang_members.setdefault(new, set()).add(uid)
        if after is None:
            self._told_waiting.pop(uid, None)
            self._gang_admitted.discard(uid)

    def _on_slurmd_pod(self, event: str, pod: Obj) -> None:
        """A slurmd Pod is a Slurm node (slurmd -N <pod name>) on its Kubernetes Node."""
        name, node = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
        with self._lock:
            if event == "DELETED" or not node:
                self._kube_node_of.pop(name, None)
            else:
                self._kube_node_of[name] = node

    def _on_node(self, event: str, node: Obj) -> None:
        name = node["metadata"]["name"]
        with self._lock:
            if event == "DELETED":
                self._node_labels.pop(name, None)
                self._node_taints.pop(name, None)
            else:
                self._node_labels[name] = node["metadata"].get("labels") or {}
                self._node_taints[name] = blocking_taints(node)

    # ---- bin-packing: Slurm's node weights --------------------------------------------

    def _check_packing(self) -> None:
        if not self._slurm.nodes.available:
            raise ReconcilerError(
                "scheduler.binPackPartitions needs to set node weights: slurmrestd "
                f"{self._slurm.operator.api_version} cannot, and no scontrol was given; run "
                "the scheduler where scontrol reaches slurmctld, or use Slurm 23.11 or later"
            )

    def _pack_forever(self) -> None:
        while not self._stopping.is_set():
            self._repack.wait(PACK_SECONDS)
            self._repack.clear()
            if not self._stopping.is_set():
                try:
                    self._pack()
                except ReconcilerError as exc:
                    log.warning("scheduler: setting bin-packing node weights failed: %s", exc)

    def _pack(self) -> None:
        """The fullest nodes of the bin-packed partitions get the lowest weights."""
        nodes = self._slurm.operator.nodes().items
        partitions = self.settings.bin_pack_partitions
        packed = [n for n in nodes if set(n.partitions) & set(partitions)]
        self.fragmentation = fragmentation(packed)
        for name, weight in weight_changes(nodes, packing_weights(nodes, partitions)).items():
            self._slurm.nodes.set_node_weight(name, weight)

    # ---- Slurm: the safety-net poll ---------------------------------------------------

    def _poll_forever(self) -> None:
        while not self._stopping.wait(self.settings.poll_seconds):
            try:
                self._poll_jobs()
            except ReconcilerError as exc:
                log.warning("scheduler: polling Slurm jobs failed: %s", exc)

    def _poll_jobs(self) -> None:
        """One 304 when nothing changed; otherwise refresh every placeholder job we know."""
        self.counters.polls += 1
        sent = time.monotonic()
        if self._jobs_since is None:
            snapshot = self._slurm.operator.jobs()
        else:
            snapshot = self._slurm.operator.jobs(since=self._jobs_since)
            if snapshot is None:
                self.counters.polls_unchanged += 1
                with self._lock:
                    self._listed_at = sent  # no job was made since the last list either
                return
        owner = self._ownership()
        with self._lock:
            merged = merge_listing(
                self._jobs, self._learned, snapshot.items, sent=sent, owner=owner,
                records=self._records_locked, abandoned=self._abandoned,
                submitting=self._submitting,
            )  # fmt: skip
            self._take_listing_locked(merged, sent)
        self._jobs_since = snapshot.as_of
        for uid in [*merged.changed, *merged.vanished]:
            self._queue.add(uid)
        if merged.changed:
            self._repack.set()  # jobs started or ended: the fullest nodes changed
        if self._pods_listed:  # which job is a duplicate needs the Pods' records
            self._cancel_extras(merged.extras)

    def _record_locked(self, uid: str, job: SlurmJob) -> None:
        self._jobs[uid] = job
        self._learned[uid] = time.monotonic()

    def _forget_locked(self, uid: str, job_id: int) -> None:
        """The Pod has no job now (we cancelled it to submit again, or to refuse the Pod):
        neither a poll nor a late hook of the old job may bring it back."""
        self._jobs.pop(uid, None)
        self._learned[uid] = time.monotonic()
        self._abandoned.add(job_id)

    # ---- hooks ------------------------------------------------------------------------

    def on_hook(self, call: HookCall) -> str:
        """`call.pod_uid` is a Pod UID, or a gang's key for a gang's job."""
        self.counters.hooks += 1
        key, gang = call.pod_uid, is_gang_key(call.pod_uid)
        with self._lock:
            if call.job_id in self._abandoned:  # its Pod has moved on: let the job end
                return "ok" if call.kind == "started" else "gone"
            known = self._jobs.get(key)
            about = gang or key in self._pods or (known is not None and known.job_id == call.job_id)
        if about:
            # Only as Slurm has the job: the caller holds the key's token, which its job's
            # user can read, and could name any job and node (job_trust.py).
            self._take_hook(call, known)
        self._queue.add(key, urgent=True)  # a bind waits behind no new Pod
        self._repack.set()
        if call.kind == "started":
            return "ok"
        if gang:
            return self._wait_until(lambda: self._gang_released_locked(key, call.job_id))
        return self._wait_until(lambda: self._pod_released_locked(key))

    def _pod_released_locked(self, uid: str) -> bool:
        pod = self._pods.get(uid)
        return pod is None or finished(pod)

    def _gang_released_locked(self, key: str, job_id: int) -> bool:
        """No Pod the gang's job holds is left running."""
        return not any(
            recorded_job_id(pod) == job_id and not finished(pod)
            for uid in self._gang_members.get(key, ())
            if (pod := self._pods.get(uid)) is not None
        )

    def _wait_until(self, released: Callable[[], bool]) -> str:
        """Answer `signalled` with `gone` once `released()` (checked under the lock) holds, or
        `wait` after a while (the job asks again): one request per job every few seconds, not a
        busy poll."""
        deadline = time.monotonic() + HOOK_WAIT_SECONDS
        with self._pod_changed:
            while True:
                if released():
                    return "gone"
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopping.is_set():
                    return "wait"
                self._pod_changed.wait(remaining)

    # ---- workers ----------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            uid = self._queue.get()
            if uid is None:
                return
            try:
                self.sync(uid)
                self._failures.pop(uid, None)
            except ReconcilerError as exc:
                self._retry_later(uid, exc)
            except Exception as exc:
                log.exception("scheduler: pod uid %s: unexpected failure", uid)
                self._retry_later(uid, exc)
            finally:
                self._queue.done(uid)

    def _retry_later(self, uid: str, exc: Exception) -> None:
        count = self._failures[uid] = self._failures.get(uid, 0) + 1
        delay = min(RETRY_BASE_SECONDS * 2 ** (count - 1), RETRY_MAX_SECONDS)
        log.warning("scheduler: pod uid %s: %s (retry %d in %.1f s)", uid, exc, count, delay)
        self._queue.add_after(uid, delay)

    def sync(self, uid: str) -> None:
        """One level-triggered step for one Pod UID, or for one gang (by its key)."""
        if is_gang_key(uid):
            self._sync_gang(uid)
            return
        with self._lock:
            pod = self._pods.get(uid)
            job = self._jobs.get(uid)
            gang = self._gang_key_locked(pod) if pod is not None else None
        if gang is not None:
            self._queue.add(gang)
            return
        if pod is not None and job is None and recorded_job_id(pod) in self._abandoned:
            # We cancelled that job to submit again (our annotation's removal may not have
            # reached the watch yet): the Pod has no job, it did not lose one.
            pod = _without_job_id(pod)
        if pod is not None and not self._settled(uid, job, recorded_job_id(pod)):
            return  # its job went missing: confirmed with Slurm first
        steps = next_steps(
            pod, job, now=self._clock(), kill_wait_seconds=self.settings.kill_wait_seconds
        )
        for step in steps:
            self._execute(uid, pod, job, step)

    def _execute(self, uid: str, pod: Obj | None, job: SlurmJob | None, step: Step) -> None:
        if isinstance(step, Admit) and pod is not None:
            self._admit(pod)
        elif isinstance(step, Bind) and pod is not None:
            self._bind(pod, step)
        elif isinstance(step, DeletePod) and pod is not None:
            self._delete_pod(pod, step)
        elif isinstance(step, CancelJob):
            self._cancel(uid, pod, step)
        elif isinstance(step, RecheckAt):
            self._queue.add_after(uid, step.when - self._clock())

    # ---- steps ------------------------------------------------------------------------

    def set_policies(self, policies: PodPolicies) -> None:
        """The pod policies of the revision the daemon last applied."""
        self._policies = policies

    def _admit(self, pod: Obj) -> None:
        request = self._request_of(pod)
        if request is not None:
            self._submit(pod, request)

    def _request_of(self, pod: Obj, problems: Sequence[Problem] = ()) -> PodRequest | None:
        """The Pod's request to Slurm, or None after refusing it: policies, admission, its pod
        rules, and `problems` the caller found (a gang's rules between members)."""
        if not self._passes_policies(pod):
            return None
        admission = self._admission(pod)
        if isinstance(admission, Rejection):
            self._refuse(pod, admission.message())
            return None
        refusal = "; ".join(str(p) for p in problems) or self._topology_refusal(pod)
        if refusal:
            self._refuse(pod, refusal)
            return None
        return admission

    def _admission(self, pod: Obj) -> PodRequest | Rejection:
        return admit(
            pod,
            kill_wait_seconds=self.settings.kill_wait_seconds,
            slurm_version=self._slurm.release,
        )

    def _submit(self, pod: Obj, request: PodRequest) -> None:
        assert self.credentials is not None
        spec = placeholder_job_for(
            pod, request, self.credentials, scheduler=self.settings.name,
            excluded_nodes=self._excluded_nodes(pod),
        )  # fmt: skip
        job_id = self._submit_job(pod["metadata"]["uid"], spec, request, [pod], "placeholder")
        if job_id is None:
            return
        self._pods_out.annotate_later(pod, {wk.ANNOTATION_JOB_ID: str(job_id)})
        self._pods_out.event(
            pod, wk.EVENT_SUBMITTED, "Submit",
            f"submitted placeholder Slurm job {job_id} ({describe_job(spec)})",
        )  # fmt: skip

    def _submit_job(
        self, key: str, spec: JobSpec, request: PodRequest, pods: list[Obj], what: str
    ) -> int | None:
        """Submit as the Pods' user and record the job under `key` (a Pod UID or a gang's
        key); None after refusing `pods` (Slurm's verdict on the job, or a group Slurm cannot
        give), or while an earlier submit's outcome is unknown."""
        if not self._may_submit(key):
            return None
        with self._lock:
            self._submitting.add(key)
        try:
            submitted = self._slurm.submit(
                self._marked(spec), user_id=request.user_id, group_id=request.group_id,
                priority=request.priority,
            )  # fmt: skip
        except SlurmApiError as exc:
            names_nodes = bool(request.required_nodes or request.excluded_nodes)
            if isinstance(exc, SlurmUnavailableError) or not is_verdict(
                exc.error_number, pod_names_nodes=names_nodes
            ):
                self._submit_failed(key)  # Slurm may have taken it all the same
                raise  # ours to retry (a controller restarting), not the Pods' fault
            for pod in pods:
                self._refuse(pod, f"Slurm refused the {what} job: {exc.message}")
            return None
        finally:
            with self._lock:
                self._submitting.discard(key)
                early = self._early.pop(key, None)
        job = replace(
            pending_job(submitted.job_id, spec.name or "", self._clock()),
            node_count=int(spec.nodes or 1),
        )
        if early is not None and early.job_id == job.job_id:
            job = early  # it started before the submit returned: bound without a poll
        with self._lock:
            known = self._jobs.get(key)
            if known is None or known.job_id != job.job_id:  # a hook may have told us more
                self._record_locked(key, job)
        self.counters.submitted += 1
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
        self._slurm.operator.cancel(job_id)
        with self._lock:
            self._forget_locked(key, job_id)
        for pod in pods:
            self._refuse(
                pod,
                f"metadata.annotations['{wk.ANNOTATION_GROUP_ID}']: Slurm 22.05's REST API runs "
                f"the job with its user's primary group ({job.group_id}), not "
                f"{request.group_id}; remove the annotation or set it to {job.group_id}",
            )
        return False

    def _excluded_nodes(self, pod: Obj) -> list[str]:
        """Slurm nodes on Kubernetes Nodes the Pod's node affinity/selector rules out, whose
        NoSchedule/NoExecute taints (a cordon included) it does not tolerate, or that its pod
        (anti-)affinity and spread rules rule out: exclusions, never a required pool."""
        with self._lock:
            placed = dict(self._kube_node_of)
            labels = dict(self._node_labels)
            taints = dict(self._node_taints)
        constrained = has_node_constraints(pod)
        ruled_out = {
            slurm
            for slurm, node in placed.items()
            if (constrained and not node_matches(pod, labels.get(node, {})))
            or not tolerates_all(pod, taints.get(node, ()))
        }
        candidates = {node for slurm, node in placed.items() if slurm not in ruled_out}
        kube_nodes = self._pod_rules_exclude(pod, labels, candidates)
        ruled_out |= {slurm for slurm, node in placed.items() if node in kube_nodes}
        return sorted(ruled_out)

    def _pod_rules_exclude(
        self, pod: Obj, labels: dict[str, dict[str, str]], candidates: set[str]
    ) -> set[str]:
        """Kubernetes Nodes ruled out by the Pod's own pod (anti-)affinity and spread rules,
        and by the required anti-affinity of the Pods we bound (the symmetric check)."""
        with self._lock:
            ruled = [
                p for uid in self._rule_pods
                if (p := self._pods.get(uid)) is not None and p["spec"].get("nodeName")
            ]  # fmt: skip
        excluded = excluded_by_placed_rules(pod, ruled, labels, candidates) if ruled else set()
        if needs_placed_pods(pod):
            excluded |= topology_excluded(pod, self._placed_pods(pod), labels, candidates)
        return excluded

    def _topology_refusal(self, pod: Obj) -> str | None:
        """What in the Pod's pod (anti-)affinity and spread rules cannot be honoured here."""
        problems = topology_problems(pod)
        if not problems and needs_placed_pods(pod):
            with self._lock:
                candidates = set(self._kube_node_of.values())
                labels = dict(self._node_labels)
            problems = unlabelled_keys(pod, labels, candidates)
        return "; ".join(str(p) for p in problems) or None

    def _placed_pods(self, pod: Obj) -> list[PlacedPod]:
        """Bound, unfinished Pods the rules can see, of any scheduler, read from the API
        server (not our cache: it holds only our own Pods)."""
        own = pod["metadata"]["uid"]
        found: dict[str, PlacedPod] = {}
        for namespace, selector in selector_queries(pod):
            listing = self._kube.list("v1", "Pod", namespace, label_selector=selector or None)
            for other in listing.items:
                meta, node = other["metadata"], (other.get("spec") or {}).get("nodeName")
                if node and meta["uid"] != own and not finished(other):
                    found[meta["uid"]] = PlacedPod(
                        meta["namespace"], meta.get("labels") or {}, node
                    )
        return list(found.values())

    def _topology_allows(self, pod: Obj, node: str) -> bool:
        if not self._rule_pods and not needs_placed_pods(pod):
            return True
        with self._lock:
            labels = dict(self._node_labels)
            candidates = set(self._kube_node_of.values())
        return node not in self._pod_rules_exclude(pod, labels, candidates)

    def _bind(self, pod: Obj, step: Bind, *, checked_node: str | None = None) -> None:
        # While any Pod has pod (anti-)affinity or spread rules, binds go one at a time, so a
        # rule's check sees every Pod bound before it.
        with self._bind_lock if self._rule_pods else contextlib.nullcontext():
            self._bind_checked(pod, step, checked_node)

    def _bind_checked(self, pod: Obj, step: Bind, checked_node: str | None) -> None:
        node = checked_node or self._checked_node(pod, step)
        if node is None:
            return
        meta = pod["metadata"]
        recorded = {
            wk.ANNOTATION_JOB_ID: str(step.job_id),
            wk.ANNOTATION_SLURM_NODE: step.slurm_node,
        }
        if not self._pods_out.bind(pod, node, recorded):
            return
        # Our cache says what we just wrote, before the watch does: a gang's next look must
        # see this member placed, not missing (its restart policy would take it for dead).
        self._note_annotations(pod, recorded, node=node)
        self.counters.bound += 1
        on_bind = self.on_bind
        if on_bind is not None:
            waited = seconds_since_created(pod, self._clock())
            if waited is not None:
                on_bind(waited)
        self._pods_out.event(
            pod, wk.EVENT_SCHEDULED, "Binding",
            f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}: Slurm job "
            f"{step.job_id} runs on Slurm node {step.slurm_node}",
        )  # fmt: skip

    def _note_annotations(
        self, pod: Obj, annotations: dict[str, str], *, node: str | None = None
    ) -> None:
        uid = pod["metadata"]["uid"]
        with self._pod_changed:
            cached = self._pods.get(uid)
            if cached is None or (node and (cached.get("spec") or {}).get("nodeName")):
                return
            meta = dict(cached["metadata"])
            meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
            spec = {**cached["spec"], "nodeName": node} if node else cached["spec"]
            self._pods[uid] = {**cached, "metadata": meta, "spec": spec}

    def _checked_node(self, pod: Obj, step: Bind) -> str | None:
        """The Kubernetes Node of the job's Slurm node, if the Pod may go there now."""
        uid = pod["metadata"]["uid"]
        with self._lock:
            node = self._kube_node_of.get(step.slurm_node)
            labels = self._node_labels.get(node or "", {})
            taints = self._node_taints.get(node or "", [])
        if node is None:
            log.warning(
                "scheduler: job %d runs on Slurm node %s, which has no slurmd Pod on a Node yet",
                step.job_id, step.slurm_node,
            )  # fmt: skip
            self._queue.add_after(uid, UNRESOLVED_NODE_RECHECK_SECONDS)
            return None
        if (
            not node_matches(pod, labels)
            or not tolerates_all(pod, taints)
            or not self._topology_allows(pod, node)
        ):
            # The Node changed after submit (a label, a taint, a cordon), or a Pod its rules
            # are about was bound there meanwhile: its job goes elsewhere.
            self._resubmit_elsewhere(pod, step, node)
            return None
        return node

    def _resubmit_elsewhere(self, pod: Obj, step: Bind, node: str) -> None:
        """Slurm chose a node the Pod's node affinity or tolerations rule out (it joined, or was
        labelled, tainted or cordoned, after submit): give the allocation back and submit again
        with it excluded."""
        self._slurm.operator.cancel(step.job_id)
        with self._lock:
            self._forget_locked(pod["metadata"]["uid"], step.job_id)
        self._pods_out.event(
            pod, wk.EVENT_BIND_FAILED, "Binding",
            f"Slurm job {step.job_id} got Slurm node {step.slurm_node} on Node {node}, which "
            "the Pod's node affinity, tolerations or pod (anti-)affinity and spread rules rule "
            "out now; submitting again without it",
            type="Warning",
        )  # fmt: skip
        self._pods_out.annotate(pod, {wk.ANNOTATION_JOB_ID: None})
        self._queue.add(pod["metadata"]["uid"])

    def _delete_pod(self, pod: Obj, step: DeletePod) -> None:
        message = f"{step.message}; deleting the Pod"
        self._pods_out.event(pod, step.reason, "Delete", message, "Warning")
        self._pods_out.delete(pod)
        self.counters.pods_deleted += 1

    def _cancel(self, uid: str, pod: Obj | None, step: CancelJob) -> None:
        if pod is None and not self._pod_is_gone(uid):
            return
        self._cancel_job(uid, step.job_id)
        log.info("scheduler: cancelled placeholder job %d: %s", step.job_id, step.message)
        if pod is not None:
            self._pods_out.event(
                pod, wk.EVENT_RELEASED, "Release",
                f"cancelled placeholder Slurm job {step.job_id}: {step.message}",
            )  # fmt: skip

    def _cancel_job(self, key: str, job_id: int) -> None:
        """Cancel, and note it at once: a later sync must not see the job active still."""
        try:
            self._slurm.operator.cancel(job_id)
        except SlurmApiError as exc:
            if exc.error_number != 2017:  # unknown job: it is gone already
                raise
        self.counters.jobs_cancelled += 1
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and job.job_id == job_id:
                self._record_locked(key, replace(job, state="CANCELLED"))

    def _pod_is_gone(self, uid: str) -> bool:
        """Before cancelling a job whose Pod we do not see: ask the API server. A Pod outside
        our watch, or a watch that lags, must not lose its job."""
        with self._lock:
            job = self._jobs.get(uid)
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

    def _pod_for_job(self, job: SlurmJob) -> Obj | None:
        # Its user may rename it, not re-comment it: the comment, where it names a placeholder.
        named = job.admin_comment if parse_job_name(job.admin_comment) else job.name
        reference = named.removeprefix(wk.PLACEHOLDER_JOB_PREFIX).rsplit("@", 1)[0]
        namespace, _, name = reference.partition("/")
        if not namespace or not name:
            return None
        return self._pods_out.get(namespace, name)

    def _passes_policies(self, pod: Obj) -> bool:
        policies = self._policies
        if not policies.policies:
            return True
        namespace = self._namespace(pod) if policies.reads_namespace else None
        verdict = policies.judge(pod, namespace)
        for finding in verdict.audits:
            log.info("scheduler: policy audit: %s", finding)
        refusal = verdict.refusal()
        if refusal is not None:
            self._refuse(pod, refusal)
            return False
        for finding in verdict.warnings:
            message = f"policy {finding.policy}: {finding.message}"
            self._pods_out.event(pod, wk.EVENT_POLICY_WARNING, "Scheduling", message, "Warning")
        return True

    def _namespace(self, pod: Obj) -> Obj | None:
        """The Pod's Namespace for `namespaceObject`, read at most every NAMESPACE_TTL s."""
        name = pod["metadata"]["namespace"]
        read_at, found = self._namespaces.get(name, (0.0, None))
        if self._clock() - read_at > NAMESPACE_TTL_SECONDS:
            found = self._kube.get("v1", "Namespace", name)
            self._namespaces[name] = (self._clock(), found)
        return found

    def _refuse(self, pod: Obj, message: str) -> None:
        self.counters.refused += 1
        self._pods_out.refuse(pod, message)
        # Seen at once, not when the watch brings it: the next look must not refuse again.
        self._note_annotations(pod, {wk.ANNOTATION_REJECTED: fingerprint(pod)})
        log.info("scheduler: refused pod %s: %s", _key(pod), message)

    # ---- views for tests and status ---------------------------------------------------

    def job_of(self, pod_uid: str) -> SlurmJob | None:
        with self._lock:
            return self._jobs.get(pod_uid)

    def known_jobs(self) -> dict[str, SlurmJob]:
        with self._lock:
            return dict(self._jobs)


def seconds_since_created(pod: Obj, now: float) -> float | None:
    """From the Pod's creationTimestamp to `now` (epoch seconds), at least 0 (clocks differ);
    None without a timestamp. The API server writes whole seconds, so this reads up to 1 s
    more than the true wait."""
    stamp = pod["metadata"].get("creationTimestamp")
    if not isinstance(stamp, str):
        return None
    try:
        created = datetime.fromisoformat(stamp)  # "2024-05-01T12:00:00Z" (Python 3.11+)
    except ValueError:
        return None
    if created.tzinfo is None:
        return None
    return max(0.0, now - created.timestamp())


def _without_job_id(pod: Obj) -> Obj:
    meta = dict(pod["metadata"])
    meta["annotations"] = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k != wk.ANNOTATION_JOB_ID
    }
    return {**pod, "metadata": meta}


def _uid_of(job: SlurmJob) -> str:
    return pod_uid_of(job.name) or ""


def _key(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace')}/{pod['metadata'].get('name')}"


def _slimmed(obj: Obj) -> Obj:
    """Without metadata.managedFields, which nothing here reads: it is over half of a cached
    Pod's memory (bench/daemon_rss.py)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj
