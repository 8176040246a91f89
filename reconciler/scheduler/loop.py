"""The scheduler's coordinator: it wires the parts and runs the threads. Watch -> cache
(state.py) -> work queue -> decision (pod_decide.py, gang_decide.py) -> effects (effects.py),
with a single Pod's steps in pod_effects.py and a gang's in gang_effects.py, the hooks API's
answers in hook_effects.py and what is checked with Slurm before it is believed in
job_trust.py.

Latency does not come from polling. A Pod event queues its Pod at once; while jobs we submitted
are pending, a fast look at their states binds each Pod when Slurm allocates its node
(starts.py); a placeholder job calls the hooks API when its script starts and when Slurm
signals it. The poll of Slurm's jobs is the safety net for a missed call: on v0.0.40+ the
state list and a GET of each job of ours that moved, the whole list only at start and after a
gap (job_reads_effects.py).

Each Pod is handled by `pod_decide.next_steps` on a work queue (one worker per Pod at a
time), so a restart anywhere resumes from what the Pod and the job say.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.kube_watch import OpenWatches, Shape, WatchMemory
from reconciler.adapters.slurm.model import SlurmJob
from reconciler.adapters.slurm.transport import SlurmObserver
from reconciler.errors import ReconcilerError
from reconciler.objects import Obj
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.counters import Counters
from reconciler.scheduler.decide.gang_decide import is_gang_key
from reconciler.scheduler.decide.packing_decide import Fragmentation
from reconciler.scheduler.decide.placeholder import HookCredentials
from reconciler.scheduler.decide.power_decide import is_slurmd_pod
from reconciler.scheduler.effects import BindObserver, Effects
from reconciler.scheduler.gang_effects import GangSteps
from reconciler.scheduler.hook_effects import HookAnswers
from reconciler.scheduler.hook_server import HookCall, HooksServer
from reconciler.scheduler.intake import Intake
from reconciler.scheduler.job_reads_effects import JobReads
from reconciler.scheduler.job_trust import JobTrust
from reconciler.scheduler.misnamed_effects import MisnamedPods
from reconciler.scheduler.packing_effects import Packer
from reconciler.scheduler.parts import Parts
from reconciler.scheduler.placed_pods import PlacedPods
from reconciler.scheduler.placement import Placement
from reconciler.scheduler.pod_cache import cache_form, without_managed_fields
from reconciler.scheduler.pod_effects import PodSteps
from reconciler.scheduler.pod_policies import PodPolicies
from reconciler.scheduler.pod_writer import PodWriter, load_hooks_key
from reconciler.scheduler.power_effects import PowerKeeper
from reconciler.scheduler.settings import SchedulerSettings
from reconciler.scheduler.stages import StagesObserver
from reconciler.scheduler.starts import StartWatch
from reconciler.scheduler.state import SchedulerState
from reconciler.scheduler.workqueue import WorkQueue

# Where the daemon, `reconciler schedule` and the benchmarks have always found them.
__all__ = ["BindObserver", "Counters", "PodScheduler"]

log = logging.getLogger(__name__)

RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
STOP_SECONDS = 2.0  # what stop() waits for its threads in all


class PodScheduler:
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
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watches = OpenWatches()
        self._failures: dict[str, int] = {}
        self.counters = Counters(slurm_requests=slurm.requests)
        self.hooks: HooksServer | None = None
        self._state = SchedulerState()
        self._queue = WorkQueue()
        self._pods_out = PodWriter(kube, settings.name, self.counters)
        self.power = PowerKeeper(kube, slurm, settings, self._pods_out)
        self._misnamed = MisnamedPods(kube, settings, self._pods_out, clock)
        self._trust = JobTrust(self._state, slurm, settings, self._queue, self.counters)
        self._effects = Effects(
            self._state, slurm, self._pods_out, self._trust, self.counters, clock
        )
        self._packer = Packer(slurm, settings, self._stopping)
        self._reads = JobReads(
            self._state, slurm, self._trust, self._queue, self.counters,
            poll_seconds=settings.poll_seconds, repack=self._packer.repack,
        )  # fmt: skip
        self._starts = StartWatch(
            self._state, lambda: self._slurm.operator, self._queue, self.counters,
            poll_all=lambda: self._poll_jobs(), read_back=self._reads.refresh,
            repack=self._packer.repack, stopping=self._stopping,
        )  # fmt: skip
        self._effects.on_submitted = self._starts.nudge
        self._placed = PlacedPods(kube, self._spawn)
        placement = Placement(self._state, self._placed)
        self._intake = Intake(kube, slurm, settings, self._effects, placement, clock)
        parts = Parts(
            self._state, self._effects, self._intake, placement, self._trust, self._queue,
            settings, clock,
        )  # fmt: skip
        self._pod_steps = PodSteps(parts)
        self._gang_steps = GangSteps(parts, kube, slurm)
        self._hook_answers = HookAnswers(
            self._state, self._trust, self._queue, self.counters,
            repack=self._packer.repack, stopping=self._stopping,
            look_now=self._starts.look_now,
        )  # fmt: skip

    @property
    def credentials(self) -> HookCredentials | None:
        return self._effects.credentials

    @property
    def fragmentation(self) -> Fragmentation | None:
        """Of the bin-packed partitions, as last read."""
        return self._packer.fragmentation

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
        self._effects.credentials = HookCredentials(url, key)
        self.power.start(self._effects.credentials)
        self.hooks.power = self.power.called
        self._poll_jobs()  # the full list first: a restart finds the jobs it made
        if self.settings.bin_pack_partitions:
            self._packer.check()
            self._packer.pack()  # before the first submit: a burst must already see the order
            self._spawn("packer", self._packer.pack_forever)
        # A field selector matches one value: one watch per name we answer to (at most 4,
        # config/defaults.py served_scheduler_names), each bringing only our Pods.
        for name in self.settings.names:
            ours = f"spec.schedulerName={name}"
            for namespace in self.settings.watch_namespaces or (None,):
                self._mirror("Pod", namespace, self._on_pod, field_selector=ours,
                             shape=cache_form)  # fmt: skip
        slurmd = f"{wk.LABEL_NAME}=slurmd,{wk.LABEL_MANAGED_BY}={wk.MANAGED_BY_VALUE}"
        self._mirror("Pod", self.settings.namespace, self._on_slurmd_pod, label_selector=slurmd)
        self._mirror("Node", None, self._on_node)
        self._reads.pods_known()  # the same list again, with the Pods' records: whose job is it
        self.hooks.start()
        self._spawn("poll", self._reads.poll_forever, self._stopping, lambda: self._poll_jobs())
        self._spawn("power", self.power.run_forever, self._stopping)
        self._spawn("starts", self._starts.run_forever, self.settings.poll_seconds)
        self._spawn("misnamed", self._misnamed.run_forever, self._stopping)
        for index in range(self.settings.workers):
            self._spawn(f"worker-{index}", self._work)
        log.info(
            "scheduler %s: answering to %s, watching %s, hooks at %s, %d placeholder jobs known",
            self.settings.name,
            ", ".join(self.settings.names),
            ", ".join(self.settings.watch_namespaces or ("the whole cluster",)),
            url,
            len(self._state.known_jobs()),
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
        self.power.nudge()
        with self._state.pod_changed:
            self._state.pod_changed.notify_all()
        self._queue.close()
        self._watches.stop_all()
        self._placed.stop()
        if self.hooks is not None:
            self.hooks.stop()
        self._pods_out.close()
        # One deadline for all: a watch thread blocked in a read ends only at its next event
        # or timeout, and a second per thread made every stop take 8 s or more.
        deadline = time.monotonic() + STOP_SECONDS
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def observe(
        self, *, bind: BindObserver | None = None, slurm: SlurmObserver | None = None,
        stages: StagesObserver | None = None,
    ) -> None:  # fmt: skip
        """Hooks for metrics: `bind` gets each bound Pod's seconds since its creation, `slurm`
        each Slurm request (see SlurmObserver), `stages` each bound Pod's stage times
        (stages.py). None removes a hook."""
        self._effects.on_bind = bind
        self._slurm.observe = slurm
        self._state.stages.on_done = stages

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

    # ---- watches: into the cache, then onto the queue ------------------------------------

    def _mirror(
        self,
        kind: str,
        namespace: str | None,
        handle: Callable[[str, Obj], None],
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        shape: Shape | None = None,
    ) -> None:
        """List now (so start() returns with a full picture), then follow a watch. `shape`
        is what is kept of each object (pod_cache.cache_form for the Pods we schedule)."""
        selectors = {"label_selector": label_selector, "field_selector": field_selector}
        listing = self._kube.list("v1", kind, namespace, **selectors, shape=shape)
        memory = WatchMemory.of_listing(listing.items, listing.resource_version)
        for obj in listing.items:
            handle("ADDED", without_managed_fields(obj))
        name = f"{kind.lower()}s-{namespace or 'all'}"
        self._spawn(name, self._follow, kind, namespace, selectors, memory, handle, shape)

    def _follow(
        self,
        kind: str,
        namespace: str | None,
        selectors: dict[str, str | None],
        memory: WatchMemory,
        handle: Callable[[str, Obj], None],
        shape: Shape | None = None,
    ) -> None:
        """Each new watch (after an error, an API server outage) resumes from `memory`: a
        relist after a 410 then reports the objects deleted meanwhile, so a Pod deleted during
        a long outage still releases its job."""
        watch = self._kube.watch(
            "v1",
            kind,
            namespace,
            label_selector=selectors["label_selector"],
            field_selector=selectors["field_selector"],
            shape=shape,
        )
        watch.carry(memory)
        with self._watches.holding(watch):
            for event, obj in watch:
                if self._stopping.is_set():
                    return
                handle(event, without_managed_fields(obj))

    def _on_pod(self, event: str, pod: Obj) -> None:
        if is_slurmd_pod(pod):  # ours with power saving: the power keeper places it
            return
        for key in self._state.on_pod(event, pod):
            self._queue.add(key)

    def _on_slurmd_pod(self, event: str, pod: Obj) -> None:
        self._state.on_slurmd_pod(event, pod)
        self.power.on_slurmd_pod(event, pod)

    def _on_node(self, event: str, node: Obj) -> None:
        self._state.on_node(event, node)

    # ---- Slurm: the safety-net poll (job_reads_effects.py) ---------------------------

    def _poll_jobs(self) -> None:
        """One look at our jobs in Slurm (the benchmark wraps it: keep the name)."""
        self._reads.poll()

    # ---- hooks and workers --------------------------------------------------------------

    def on_hook(self, call: HookCall) -> str:
        """`call.pod_uid` is a Pod UID, or a gang's key for a gang's job."""
        return self._hook_answers.answer(call)

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
            self._gang_steps.sync(uid)
        else:
            self._pod_steps.sync(uid)

    def set_policies(self, policies: PodPolicies) -> None:
        """The pod policies of the revision the daemon last applied."""
        self._intake.policies = policies

    # ---- views for tests and status ---------------------------------------------------

    def job_of(self, pod_uid: str) -> SlurmJob | None:
        return self._state.job_of(pod_uid)

    def known_jobs(self) -> dict[str, SlurmJob]:
        return self._state.known_jobs()

    def retained(self) -> dict[str, int]:
        """Entries in each per-Pod and per-job structure (state.py's, the work queue's, the
        retry counts, the caches'): what a long run must bring back down as Pods go; and the
        watches open, which must not pile up as the API server comes and goes."""
        parts = {
            "": self._state.retained(),
            "queue ": self._queue.retained(),
            "power ": self.power.retained(),
        }
        sizes = {f"{prefix}{name}": size for prefix, part in parts.items()
                 for name, size in part.items()}  # fmt: skip
        return {**sizes, "retries": len(self._failures), "misnamed told": self._misnamed.told,
                "pod groups": self._gang_steps.pod_groups, "watches": len(self._watches),
                "placed watches": self._placed.watches}  # fmt: skip
