"""The local node agent: plays kubelet for the local Nodes, with real slurmd processes.

Like kwok it registers Nodes and moves Pods through their lifecycle without containers, but
for each slurmd Pod of our StatefulSets it runs a real `slurmd -N <pod name>`, so the Slurm
side is the real thing. It binds slurmd Pods itself (they are not ours to schedule through
Slurm); Pods for the Slurm scheduler it leaves alone until that scheduler binds them, then
marks them Running.

Each Pod is synced level-triggered (look at it as it is now, do the next step), on its own
worker so one Pod's grace period never holds up another.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.errors import ReconcilerError
from reconciler.local.kubelet_model import (
    NodeTemplate,
    choose_node,
    is_slurmd_pod,
    node_object,
    running_status,
)

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
log = logging.getLogger(__name__)

KUBELET_MANAGER = "reconciler-local-kubelet"
# Status gets its own manager: on 1.20 managed fields do not record the subresource, so an
# apply of status alone under the kubelet's manager would drop the labels it applied before.
KUBELET_STATUS_MANAGER = "reconciler-local-kubelet-status"
SLURM_CONF_MOUNT = PurePosixPath("/etc/slurm")
DEFAULT_SCHEDULER = "default-scheduler"
MAX_GRACE_SECONDS = 30.0
RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 10.0
Obj = dict[str, Any]


class Slurmds(Protocol):
    """What the agent needs from the local Slurm cluster."""

    def start_slurmd(self, node: str, *, wait: bool = True, timeout: float = ...) -> float: ...
    def stop_slurmd(self, node: str, *, grace: float = ...) -> bool: ...


class NodeAgent:
    def __init__(
        self,
        kube: Kube,
        slurm: Slurmds,
        nodes: list[NodeTemplate],
        conf_dir: Path,
        *,
        controller_config: tuple[str, str] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        # (namespace, name) of the ConfigMap slurmctld reads: the local slurmctld plays the
        # controller Pod that mounts it at /etc/slurm, so it is written even with no slurmd.
        self._controller_config = controller_config
        self._kube = kube
        self._slurm = slurm
        self._nodes = nodes
        self._node_names = {n.name for n in nodes}
        self._conf_dir = conf_dir
        self._clock = clock
        self._pods: dict[str, Obj] = {}
        self._pod_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._slurmds: set[str] = set()
        self._failures: dict[str, int] = {}
        # Pods bound but not yet seen bound (the scheduler's "assume"), so parallel binds spread.
        self._assumed: dict[str, str] = {}
        self._workers = ThreadPoolExecutor(max_workers=8, thread_name_prefix="node-agent")
        self._watches: list[Any] = []
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    # ---- lifecycle ----------------------------------------------------------------------

    def register_nodes(self) -> None:
        for template in self._nodes:
            node = node_object(template, self._clock())
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
        self.register_nodes()
        self._spawn("pods", self._watch_pods)
        self._spawn("configmaps", self._watch_config_maps)

    def stop(self, *, grace: float = 10.0) -> None:
        """Stop watching and every slurmd this agent started."""
        self._stopping.set()
        for watch in list(self._watches):
            watch.stop()
        self._workers.shutdown(wait=True, cancel_futures=True)
        for node in sorted(self._slurmds):
            self._slurm.stop_slurmd(node, grace=grace)
        self._slurmds.clear()
        for thread in self._threads:
            thread.join(timeout=1.0)  # daemon threads; a blocked read ends with the process

    def running_slurmds(self) -> set[str]:
        with self._lock:
            return set(self._slurmds)

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
        watch = self._kube.watch("v1", "Pod")
        self._watches.append(watch)
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
            if kind != "DELETED" and self._concerns(pod):
                self._workers.submit(self._sync_safely, key)

    def _concerns(self, pod: Obj) -> bool:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if node:
            return node in self._node_names
        return (
            is_slurmd_pod(pod) and spec.get("schedulerName", DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
        )

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
                self._retry_later(key, exc)

    def _retry_later(self, key: str, exc: Exception) -> None:
        count = self._failures[key] = self._failures.get(key, 0) + 1
        delay = min(RETRY_BASE_SECONDS * 2 ** (count - 1), RETRY_MAX_SECONDS)
        if isinstance(exc, ReconcilerError):
            log.warning("pod %s: %s (retry %d in %.1f s)", key, exc, count, delay)
        else:
            log.exception("pod %s: unexpected failure (retry %d in %.1f s)", key, count, delay)
        timer = threading.Timer(delay, self._resubmit, args=(key,))
        timer.daemon = True
        timer.start()

    def _resubmit(self, key: str) -> None:
        if not self._stopping.is_set():
            with contextlib.suppress(RuntimeError):  # the pool shut down meanwhile
                self._workers.submit(self._sync_safely, key)

    def sync_pod(self, pod: Obj) -> None:
        """One level-triggered step for one Pod."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        if meta.get("deletionTimestamp"):
            self._terminate(pod)
        elif not spec.get("nodeName"):
            self._bind(pod)
        elif (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return  # terminal: kubelet never moves a Pod out of it
        elif not _is_running(pod):
            self._run(pod)

    def _bind(self, pod: Obj) -> None:
        key = _key(pod)
        with self._lock:
            placed = {k: (p.get("spec") or {}).get("nodeName") for k, p in self._pods.items()}
            placed.update(self._assumed)
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
        name = pod["metadata"]["name"]
        if is_slurmd_pod(pod):
            self.materialize_config(pod)
            with self._lock:
                started = name in self._slurmds
                self._slurmds.add(name)
            if not started:
                try:
                    self._slurm.start_slurmd(name, wait=True)
                except BaseException:
                    with self._lock:
                        self._slurmds.discard(name)
                    self._slurm.stop_slurmd(name, grace=1.0)
                    raise
        status = running_status(pod, self._clock(), ready=True)
        self._kube.apply(
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": name, "namespace": pod["metadata"]["namespace"]},
             "status": status},
            field_manager=KUBELET_STATUS_MANAGER, force=True, subresource="status",
        )  # fmt: skip

    def _terminate(self, pod: Obj) -> None:
        meta = pod["metadata"]
        name = meta["name"]
        grace = float(meta.get("deletionGracePeriodSeconds") or 0)
        wait = self._stopping_for(meta, grace)
        if wait > 0:  # the "containers" are still stopping: finish later
            timer = threading.Timer(wait, self._resubmit, args=(_key(pod),))
            timer.daemon = True
            timer.start()
            return
        with self._lock:
            ours = name in self._slurmds
            self._slurmds.discard(name)
        if ours:
            self._slurm.stop_slurmd(name, grace=min(max(grace, 1.0), MAX_GRACE_SECONDS))
        # What kubelet does once the containers are gone: finish the delete.
        self._kube.delete("v1", "Pod", name, meta["namespace"], grace_period_seconds=0)

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

    # ---- ConfigMaps ---------------------------------------------------------------------

    def _watch_config_maps(self) -> None:
        selector = f"{wk.LABEL_MANAGED_BY}={wk.MANAGED_BY_VALUE}"
        watch = self._kube.watch("v1", "ConfigMap", label_selector=selector)
        self._watches.append(watch)
        for kind, config_map in watch:
            if self._stopping.is_set():
                return
            if kind != "DELETED":
                self._refresh_mounted(config_map)

    def _refresh_mounted(self, config_map: Obj) -> None:
        """A ConfigMap a running slurmd Pod mounts changed: rewrite its files (as kubelet does)."""
        meta = config_map["metadata"]
        if self._controller_config == (meta.get("namespace"), meta["name"]):
            self._write_files(PurePosixPath("."), config_map.get("data") or {})
        with self._lock:
            pods = [p for p in self._pods.values() if p["metadata"]["name"] in self._slurmds]
        for pod in pods:
            for directory, name in _slurm_conf_mounts(pod).items():
                if name == meta["name"] and pod["metadata"]["namespace"] == meta.get("namespace"):
                    self._write_files(directory, config_map.get("data") or {})

    def materialize_config(self, pod: Obj) -> None:
        """Write the ConfigMaps a slurmd Pod mounts under /etc/slurm into the runtime dir."""
        namespace = pod["metadata"]["namespace"]
        for directory, name in _slurm_conf_mounts(pod).items():
            config_map = self._kube.get("v1", "ConfigMap", name, namespace)
            if config_map is None:
                raise ReconcilerError(
                    f"pod {namespace}/{pod['metadata']['name']} mounts ConfigMap {name!r}, "
                    "which does not exist",
                    hint="apply the config repo first (the ConfigMaps come with it)",
                )
            self._write_files(directory, config_map.get("data") or {})

    def _write_files(self, relative: PurePosixPath, data: Mapping[str, str]) -> None:
        # Every slurmd Pod mounts the same ConfigMaps, and Pods sync in parallel: one writer.
        with self._write_lock:
            self._write_files_locked(relative, data)

    def _write_files_locked(self, relative: PurePosixPath, data: Mapping[str, str]) -> None:
        target = self._conf_dir / relative
        target.mkdir(parents=True, exist_ok=True)
        mode = 0o644 if str(relative) == "." else 0o755  # prolog/epilog scripts must run
        for file_name, text in data.items():
            path = target / file_name
            if path.exists() and path.read_text() == text:
                continue
            tmp = path.with_name(f".{file_name}.tmp")
            tmp.write_text(text)
            tmp.chmod(mode)
            tmp.replace(path)  # atomic: slurmctld never reads half a file


def _slurm_conf_mounts(pod: Obj) -> dict[PurePosixPath, str]:
    """Relative dir under /etc/slurm -> ConfigMap name, for the slurmd container's mounts."""
    spec = pod.get("spec") or {}
    config_maps = {
        v["name"]: v["configMap"]["name"] for v in spec.get("volumes") or [] if v.get("configMap")
    }
    mounts: dict[PurePosixPath, str] = {}
    for container in spec.get("containers") or []:
        for mount in container.get("volumeMounts") or []:
            path = PurePosixPath(mount["mountPath"])
            if mount["name"] in config_maps and (
                path == SLURM_CONF_MOUNT or SLURM_CONF_MOUNT in path.parents
            ):
                mounts[path.relative_to(SLURM_CONF_MOUNT)] = config_maps[mount["name"]]
    return mounts


def _is_running(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running"


def _key(pod: Obj) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"
