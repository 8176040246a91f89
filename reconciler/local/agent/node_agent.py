"""The local node agent: plays kubelet for the local Nodes, and the default scheduler for our
own Pods.

Like kwok it registers Nodes and moves Pods through their lifecycle without containers, but
each Pod of ours runs its real daemon (slurmctld, slurmrestd, slurmdbd, MariaDB, sshd, slurmd:
pod_runtime.py) from the files its volumes show (volumes.py), so the cluster `local up` brings
up is built from the config repo's objects as a real one is. It binds our Pods itself; Pods for
the Slurm scheduler it leaves alone until that scheduler binds them, then marks them Running.

Each Pod is synced level-triggered (look at it as it is now, do the next step), on its own
worker so one Pod's grace period never holds up another. As kubelet does, it rewrites mounted
ConfigMaps and Secrets when they change, and restarts a Pod's daemons when they exit.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Protocol

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.kube_watch import KubeWatch, OpenWatches
from reconciler.errors import ReconcilerError
from reconciler.local.agent.logs_server import KubeletServer
from reconciler.local.agent.placement import (
    NodeTemplate,
    choose_node,
    failed_status,
    is_ours,
    node_object,
    running_status,
    volume_for,
)
from reconciler.local.agent.schedulers import DEFAULT_SCHEDULER
from reconciler.local.agent.volumes import Materializer, VolumeError, pod_mounts
from reconciler.objects import Obj

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
log = logging.getLogger(__name__)

KUBELET_MANAGER = "reconciler-local-kubelet"
# Status gets its own manager: on 1.20 managed fields do not record the subresource, so an
# apply of status alone under the kubelet's manager would drop the labels it applied before.
KUBELET_STATUS_MANAGER = "reconciler-local-kubelet-status"
MAX_GRACE_SECONDS = 30.0
RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 10.0
LIVENESS_SECONDS = 1.0


class PodRuntime(Protocol):
    """What runs in our Pods (pod_runtime.LocalPodRuntime)."""

    def start(self, pod: Obj) -> None: ...
    def stop(self, pod: Obj, grace: float) -> None: ...
    def exited(self) -> list[str]: ...


class NodeAgent:
    def __init__(
        self,
        kube: Kube,
        runtime: PodRuntime,
        files: Materializer,
        nodes: list[NodeTemplate],
        *,
        kubelet: KubeletServer | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._kubelet = kubelet  # the kubelet API the API server proxies logs and exec to
        self._kube = kube
        self._runtime = runtime
        self._files = files
        self._nodes = nodes
        self._node_names = {n.name for n in nodes}
        self._clock = clock
        self._pods: dict[str, Obj] = {}
        self._pod_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._running: set[str] = set()  # Pods whose status we posted Running
        self._restarts: dict[str, int] = {}
        self._failures: dict[str, int] = {}
        # Pods bound but not yet seen bound (the scheduler's "assume"), so parallel binds spread.
        self._assumed: dict[str, str] = {}
        self._workers = ThreadPoolExecutor(max_workers=12, thread_name_prefix="node-agent")
        self._watches = OpenWatches()
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    # ---- lifecycle ----------------------------------------------------------------------

    def register_nodes(self) -> None:
        for template in self._nodes:
            port = self._kubelet.port if self._kubelet is not None else 0
            node = node_object(template, self._clock(), port)
            status = node.pop("status")
            self._kube.apply(node, field_manager=KUBELET_MANAGER, force=True)
            self._kube.apply(
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": template.name},
                 "status": status},
                field_manager=KUBELET_STATUS_MANAGER, force=True, subresource="status",
            )  # fmt: skip
            self._lift_not_ready_taint(template.name)

    def _lift_not_ready_taint(self, name: str) -> None:
        """The API server taints a new Node node.kubernetes.io/not-ready:NoSchedule; in a
        cluster the node lifecycle controller lifts it once the Node is Ready. That controller
        does not run here, so the agent does its part: a Ready Node without that taint."""
        node = self._kube.get("v1", "Node", name) or {}
        taints = (node.get("spec") or {}).get("taints") or []
        kept = [t for t in taints if t.get("key") != NOT_READY_TAINT]
        if kept != taints:
            self._kube.request_json(
                "PATCH", f"/api/v1/nodes/{name}", body={"spec": {"taints": kept or None}},
                content_type="application/merge-patch+json", target=f"Node {name}",
            )  # fmt: skip

    def start(self) -> None:
        if self._kubelet is not None:
            self._kubelet.start()
        self.register_nodes()
        self._spawn("pods", self._watch_pods)
        self._spawn("configmaps", lambda: self._watch_mounted("ConfigMap"))
        self._spawn("secrets", lambda: self._watch_mounted("Secret"))
        self._spawn("liveness", self._check_liveness)

    def stop(self) -> None:
        """Stop watching and syncing. The daemons keep running: the stack stops them, in
        dependency order, with the jobs cancelled first."""
        self._stopping.set()
        self._watches.stop_all()
        self._workers.shutdown(wait=True, cancel_futures=True)
        for thread in self._threads:
            thread.join(timeout=1.0)  # daemon threads; a blocked read ends with the process
        if self._kubelet is not None:
            self._kubelet.stop()

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(
            target=self._guard(target), name=f"node-agent-{name}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _guard(self, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            while not self._stopping.is_set():
                try:
                    target()
                except ReconcilerError as exc:  # e.g. the API server restarting: retry
                    if not self._stopping.is_set():
                        log.warning("node agent watch failed, retrying in 1 s: %s", exc)
                    self._stopping.wait(1.0)
                except Exception:  # a bug: keep the trace, but keep the agent alive
                    log.exception("node agent watch failed; retrying in 1 s")
                    self._stopping.wait(1.0)

        return run

    # ---- Pods ---------------------------------------------------------------------------

    def _watch_pods(self) -> None:
        with self._watches.holding(self._kube.watch("v1", "Pod")) as watch:
            self._follow_pods(watch)

    def _follow_pods(self, watch: KubeWatch) -> None:
        for kind, pod in watch:
            if self._stopping.is_set():
                return
            key = _key(pod)
            with self._lock:
                if kind == "DELETED":
                    self._pods.pop(key, None)
                else:
                    self._pods[key] = pod
                if kind == "DELETED" or (pod.get("spec") or {}).get("nodeName"):
                    self._assumed.pop(key, None)
            if kind == "DELETED" and self._concerns(pod):
                self._submit_forget(pod)
            elif kind != "DELETED" and self._concerns(pod):
                self._submit(key)

    def _concerns(self, pod: Obj) -> bool:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if node:
            return node in self._node_names
        return is_ours(pod) and spec.get("schedulerName", DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER

    def _submit(self, key: str) -> None:
        if not self._stopping.is_set():
            with contextlib.suppress(RuntimeError):  # the pool shut down meanwhile
                self._workers.submit(self._sync_safely, key)

    def _submit_forget(self, pod: Obj) -> None:
        if not self._stopping.is_set():
            with contextlib.suppress(RuntimeError):
                self._workers.submit(self._forget_safely, pod)

    def _forget_safely(self, pod: Obj) -> None:
        """A Pod deleted at once (grace 0, or by the garbage collector) was never seen
        terminating: stop its daemons now, as kubelet kills a removed Pod's containers."""
        key = _key(pod)
        with self._lock:
            lock = self._pod_locks.setdefault(key, threading.Lock())
        with lock:
            try:
                self._runtime.stop(pod, grace=1.0)  # by uid: a newer Pod of this name stays
            except Exception:  # logged; a newer Pod of this name stops it when it starts
                log.exception("pod %s: stopping a deleted Pod's daemons failed", key)
            with self._lock:
                newer = self._pods.get(key)
                if newer is None or newer["metadata"].get("uid") == pod["metadata"].get("uid"):
                    self._running.discard(key)
                    self._restarts.pop(key, None)

    def _sync_safely(self, key: str) -> None:
        with self._lock:
            lock = self._pod_locks.setdefault(key, threading.Lock())
        with lock:
            pod = self._pods.get(key)
            if pod is None or self._stopping.is_set():
                return
            try:
                self.sync_pod(pod)
                self._failures.pop(key, None)
            except Exception as exc:  # any failure: report it and try again, as kubelet does
                self._retry_later(pod, exc)

    def _retry_later(self, pod: Obj, exc: Exception) -> None:
        key = _key(pod)
        count = self._failures[key] = self._failures.get(key, 0) + 1
        delay = min(RETRY_BASE_SECONDS * 2 ** (count - 1), RETRY_MAX_SECONDS)
        if isinstance(exc, ReconcilerError):
            log.warning("pod %s: %s (retry %d in %.1f s)", key, exc, count, delay)
            self._post_waiting(pod, exc)
        else:
            log.exception("pod %s: unexpected failure (retry %d in %.1f s)", key, count, delay)
        timer = threading.Timer(delay, self._submit, args=(key,))
        timer.daemon = True
        timer.start()

    def _post_waiting(self, pod: Obj, exc: ReconcilerError) -> None:
        """What `kubectl describe pod` shows for a Pod that cannot start yet."""
        if pod["metadata"].get("deletionTimestamp") or not (pod.get("spec") or {}).get("nodeName"):
            return
        reason = "FailedMount" if isinstance(exc, VolumeError) else "RunContainerError"
        with contextlib.suppress(ReconcilerError):
            self._post_status(pod, failed_status(pod, reason, exc.message))

    def sync_pod(self, pod: Obj) -> None:
        """One level-triggered step for one Pod."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        if meta.get("deletionTimestamp"):
            self._terminate(pod)
        elif not spec.get("nodeName"):
            self._bind(pod)
        elif (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return  # terminal: kubelet never moves a Pod out of it
        elif _key(pod) not in self._running or not _is_running(pod):
            self._run(pod)

    def _bind(self, pod: Obj) -> None:
        key = _key(pod)
        app = _app(pod)
        with self._lock:
            # Spread like Pods of one app: one slurmd per Node, as SUNK's anti-affinity does.
            placed = {k: (p.get("spec") or {}).get("nodeName")
                      for k, p in self._pods.items() if _app(p) == app}  # fmt: skip
            placed.update({k: n for k, n in self._assumed.items()
                           if _app(self._pods.get(k) or {}) == app})  # fmt: skip
            load: dict[str, int] = {}
            for other, node_name in placed.items():
                if node_name and other != key:
                    load[node_name] = load.get(node_name, 0) + 1
            node = choose_node(pod, self._nodes, load)
            if node is not None:
                self._assumed[key] = node
        if node is None:
            log.info("pod %s: no local Node satisfies its node affinity; it stays Pending", key)
            return
        meta = pod["metadata"]
        try:
            self._kube.bind_pod(meta["namespace"], meta["name"], node, pod_uid=meta.get("uid"))
        except ReconcilerError:
            with self._lock:
                self._assumed.pop(key, None)
            raise

    def _run(self, pod: Obj) -> None:
        key = _key(pod)
        if is_ours(pod):
            self._provision_claims(pod)
            self._runtime.start(pod)  # its daemons, once ready (raises: retried)
        self._post_status(pod, running_status(pod, self._clock(), ready=True,
                                              restarts=self._restarts.get(key, 0)))  # fmt: skip
        with self._lock:
            self._running.add(key)

    def _provision_claims(self, pod: Obj) -> None:
        """What a local-path provisioner does: a PersistentVolume on this host for each claim
        the Pod mounts, made for that claim (the binder controller then binds the two)."""
        namespace = pod["metadata"]["namespace"]
        for mount in pod_mounts(pod):
            if mount.source != "persistentVolumeClaim":
                continue
            claim = self._kube.get("v1", "PersistentVolumeClaim", mount.object_name, namespace)
            if claim is None or (claim.get("spec") or {}).get("volumeName"):
                continue  # a Pod waits for a missing claim in kubelet; here it just runs
            path = self._files.host_path(pod, mount.path)
            self._kube.create(volume_for(claim, str(path)))  # None: made already

    def _post_status(self, pod: Obj, status: Obj) -> None:
        meta = pod["metadata"]
        self._kube.apply(
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
             "status": status},
            field_manager=KUBELET_STATUS_MANAGER, force=True, subresource="status",
        )  # fmt: skip

    def _terminate(self, pod: Obj) -> None:
        meta = pod["metadata"]
        grace = float(meta.get("deletionGracePeriodSeconds") or 0)
        wait = self._stopping_for(meta, grace)
        if wait > 0:  # the "containers" are still stopping: finish later
            timer = threading.Timer(wait, self._submit, args=(_key(pod),))
            timer.daemon = True
            timer.start()
            return
        self._runtime.stop(pod, grace=min(max(grace, 1.0), MAX_GRACE_SECONDS))
        with self._lock:
            self._running.discard(_key(pod))
            self._restarts.pop(_key(pod), None)
        # What kubelet does once the containers are gone: finish the delete.
        self._kube.delete("v1", "Pod", meta["name"], meta["namespace"], grace_period_seconds=0)

    def _stopping_for(self, meta: Mapping[str, Any], grace: float) -> float:
        """Seconds until a Pod's simulated containers have stopped: the annotation asks for a
        stop time (tests of teardown order), capped by the grace period as kubelet would."""
        raw = (meta.get("annotations") or {}).get(wk.ANNOTATION_LOCAL_STOP_SECONDS)
        if not raw:
            return 0.0
        try:
            stop = min(float(raw), grace)
        except ValueError:
            return 0.0
        deleted_at = datetime.fromisoformat(meta["deletionTimestamp"].replace("Z", "+00:00"))
        asked = deleted_at.timestamp() - grace
        return asked + stop - self._clock().timestamp()

    # ---- liveness: a daemon that exits is restarted, as kubelet restarts a container --------

    def _check_liveness(self) -> None:
        while not self._stopping.wait(LIVENESS_SECONDS):
            for key in self._runtime.exited():
                with self._lock:
                    pod = self._pods.get(key)
                    self._running.discard(key)
                    self._restarts[key] = self._restarts.get(key, 0) + 1
                if pod is None or pod["metadata"].get("deletionTimestamp"):
                    continue
                count = self._restarts[key]
                delay = min(RETRY_BASE_SECONDS * 2 ** (count - 1), RETRY_MAX_SECONDS)
                log.warning("pod %s: a daemon exited; restart %d in %.1f s", key, count, delay)
                self._runtime.stop(pod, grace=1.0)
                timer = threading.Timer(delay, self._submit, args=(key,))  # CrashLoopBackOff
                timer.daemon = True
                timer.start()

    # ---- ConfigMaps and Secrets -----------------------------------------------------------

    def _watch_mounted(self, kind: str) -> None:
        with self._watches.holding(self._kube.watch("v1", kind)) as watch:
            for event, obj in watch:
                if self._stopping.is_set():
                    return
                if event != "DELETED":
                    self._refresh_mounted(kind, obj)

    def _refresh_mounted(self, kind: str, obj: Obj) -> None:
        """A ConfigMap or Secret that Pods here mount changed: rewrite their files, as kubelet
        does (slurmctld then reads the new slurm.conf on `scontrol reconfigure`)."""
        meta = obj["metadata"]
        with self._lock:
            pods = [self._pods[k] for k in self._running if k in self._pods]
        for pod in pods:
            if pod["metadata"]["namespace"] == meta.get("namespace"):
                try:
                    self._files.refresh(pod, kind, meta["name"])
                except ReconcilerError as exc:
                    log.warning("pod %s: %s", _key(pod), exc)


def _is_running(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running"


def _app(pod: Mapping[str, Any]) -> str:
    return ((pod.get("metadata") or {}).get("labels") or {}).get(wk.LABEL_NAME, "")


def _key(pod: Obj) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"
