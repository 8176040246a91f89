"""Pods for the scheduler: their bodies, creating and deleting many at once, and a load
generator of its own process that creates them, watches them and deletes them.

Shared by bench.scheduler_bench, bench.daemon_rss and bench.chaos.
"""

from __future__ import annotations

import contextlib
import copy
import json
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import urllib3

from bench.harness.report import say
from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.errors import ReconcilerError


def pod_body(
    name: str,
    namespace: str,
    scheduler_name: str,
    *,
    command: tuple[str, ...] = ("sleep", "infinity"),
    requests: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    grace: int = 5,
) -> dict[str, Any]:
    """A Pod of one busybox container for SCHEDULER_NAME; REQUESTS (cpu, memory) if given;
    ANNOTATIONS and LABELS are in its metadata only when given."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations is not None:
        metadata["annotations"] = annotations
    if labels is not None:
        metadata["labels"] = labels
    container: dict[str, Any] = {"name": "main", "image": "busybox", "command": list(command)}
    if requests is not None:
        container["resources"] = {"requests": requests}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "schedulerName": scheduler_name,
            "terminationGracePeriodSeconds": grace,
            "containers": [container],
        },
    }


def gang_annotations(group: str, gang: int) -> dict[str, str]:
    """A member of gang GROUP of GANG Pods (our annotations, no PodGroup CRD)."""
    return {wk.ANNOTATION_POD_GROUP: group, wk.ANNOTATION_POD_GROUP_MIN_MEMBER: str(gang)}


def named(template: dict[str, Any], name: str, group: str = "", gang: int = 0) -> dict[str, Any]:
    """TEMPLATE as Pod NAME; with GROUP, a member of that gang of GANG Pods."""
    body = copy.deepcopy(template)
    body["metadata"]["name"] = name
    if group:
        body["metadata"]["annotations"] = gang_annotations(group, gang)
    return body


def create_pods(
    kube: Kube,
    bodies: list[dict[str, Any]],
    creators: int,
    progress: Callable[[int, float], str],
    every: int,
) -> float:
    """Create BODIES with CREATORS threads, saying PROGRESS(done, seconds) every EVERY Pods and
    at the end; the seconds it took."""
    started = time.monotonic()

    def create(body: dict[str, Any]) -> None:
        meta = body["metadata"]
        kube.request_json(
            "POST",
            f"/api/v1/namespaces/{meta['namespace']}/pods",
            body=body,
            target=f"Pod {meta['namespace']}/{meta['name']}",
        )

    with ThreadPoolExecutor(creators, thread_name_prefix="bench-create") as pool:
        for done, _ in enumerate(pool.map(create, bodies), 1):
            if done % every == 0 or done == len(bodies):
                say(progress(done, time.monotonic() - started))
    return time.monotonic() - started


def delete_pods(kube: Kube, namespace: str, names: list[str], creators: int, every: int) -> float:
    """Delete the Pods NAMES with CREATORS threads, saying how far every EVERY Pods; seconds."""
    started = time.monotonic()
    with ThreadPoolExecutor(creators, thread_name_prefix="bench-delete") as pool:
        for done, _ in enumerate(
            pool.map(lambda n: kube.delete("v1", "Pod", n, namespace), names), 1
        ):
            if done % every == 0 or done == len(names):
                say(f"deleted {done}/{len(names)} in {time.monotonic() - started:.1f} s")
    return time.monotonic() - started


# --------------------------------------------------------------------------- the load generator


@dataclass
class PodTimes:
    name: str
    sent: float = 0.0  # our clock, create request sent
    created: float = 0.0  # our clock, create request returned (the Pod exists)
    created_stamp: float = 0.0  # metadata.creationTimestamp (whole seconds)
    uid: str = ""
    bound: float | None = None  # our clock, first watch event with spec.nodeName
    node: str = ""
    slurm_node: str = ""
    job_id: str = ""
    delete_sent: float = 0.0  # our clock, cleanup's delete request sent
    gone: float | None = None  # our clock, DELETED seen
    group: str = ""  # its gang's pod group ("" for a single Pod)


class FastPodWatch:
    """The load generator's watch of the benchmark's namespace: when each Pod is first seen
    bound, and deletions, with the number and size of the events.

    Not KubeWatch, so that the measuring does not depend on the code being measured (before
    2b4daa1 KubeWatch read its stream one byte per call, milliseconds of CPU per event) and can
    count the bytes. Chunks are split into lines here (about 0.03 ms an event).
    """

    def __init__(self, kube: Kube, namespace: str, pods: dict[str, PodTimes]) -> None:
        self._kube = kube
        self._namespace = namespace
        self._path = f"/api/v1/namespaces/{namespace}/pods"
        self._pods = pods
        self.bound = 0
        self.deleted = 0
        self.events = 0  # events about the benchmark's Pods
        self.event_bytes = 0
        self.changed = threading.Condition()
        self._stopped = False
        self._version = kube.list("v1", "Pod", namespace).resource_version
        self._thread = threading.Thread(target=self._run, name="bench-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped:
            query = [
                ("watch", "true"),
                ("allowWatchBookmarks", "true"),
                ("resourceVersion", self._version),
                ("timeoutSeconds", "900"),
            ]
            try:
                stream = self._kube.open_stream(self._path, query, 930.0)
            except ReconcilerError as exc:
                say(f"watch failed, retrying: {exc}")
                time.sleep(0.5)
                continue
            buffer = b""
            try:
                for chunk in stream.stream(amt=None, decode_content=False):
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            self._line(line)
                    if self._stopped:
                        return
            except (urllib3.exceptions.ProtocolError, urllib3.exceptions.ReadTimeoutError):
                pass  # reconnect from the last resourceVersion
            finally:
                stream.release_conn()

    def _line(self, line: bytes) -> None:
        event = json.loads(line)
        kind, pod = event.get("type"), event.get("object") or {}
        meta = pod.get("metadata") or {}
        if kind == "ERROR":  # 410: our version is too old; list again and go on from there
            listing = self._kube.list("v1", "Pod", self._namespace)
            self._version = listing.resource_version
            for item in listing.items:
                self._record("MODIFIED", item, time.time(), 0)
            return
        self._version = meta.get("resourceVersion") or self._version
        if kind != "BOOKMARK":
            self._record(kind, pod, time.time(), len(line))

    def _record(self, kind: str, pod: dict[str, Any], now: float, size: int) -> None:
        meta = pod["metadata"]
        times = self._pods.get(meta["name"])
        if times is None:
            return
        with self.changed:
            self.events += 1
            self.event_bytes += size
            times.uid = times.uid or meta["uid"]
            if kind == "DELETED":
                self.deleted += 1
                times.gone = now
            elif times.bound is None and (pod.get("spec") or {}).get("nodeName"):
                annotations = meta.get("annotations") or {}
                times.bound = now
                times.node = pod["spec"]["nodeName"]
                times.slurm_node = annotations.get(wk.ANNOTATION_SLURM_NODE, "")
                times.job_id = annotations.get(wk.ANNOTATION_JOB_ID, "")
                times.uid = meta["uid"]
                times.created_stamp = _epoch(meta["creationTimestamp"])
                self.bound += 1
            self.changed.notify_all()

    def wait_for(self, what: Callable[[], bool], timeout: float, progress: str) -> bool:
        deadline = time.monotonic() + timeout
        next_note = time.monotonic() + 5.0
        with self.changed:
            while not what():
                now = time.monotonic()
                if now > deadline:
                    return False
                if now > next_note:
                    say(progress.format(bound=self.bound, deleted=self.deleted))
                    next_note = now + 5.0
                self.changed.wait(min(1.0, deadline - now))
        return True

    def stop(self) -> None:
        self._stopped = True


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def load_generator(
    conn: Connection, kubeconfig: str, template: dict[str, Any], prefix: str, count: int,
    creators: int, rate: float | None, timeout: float, gang: int, field_manager: str,
    settle_timeout: float,
) -> None:  # fmt: skip
    """The child process that creates the Pods (TEMPLATE named PREFIX-NNNN; as fast as it can,
    or RATE a second), watches them and deletes them, so none of that costs the measured
    process CPU or GIL time. With GANG, Pods N*GANG .. N*GANG+GANG-1 are gang PREFIX-gNNN
    (created in that order). Talks to the parent over `conn`:
    -> ready, <- create, -> created, -> bound, <- delete, -> deleted (or -> error)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    kube = Kube.from_kubeconfig(Path(kubeconfig), field_manager=field_manager)
    namespace = template["metadata"]["namespace"]
    pods = {
        f"{prefix}-{i:04d}": PodTimes(f"{prefix}-{i:04d}",
                                      group=f"{prefix}-g{i // gang:03d}" if gang else "")
        for i in range(count)
    }  # fmt: skip
    order = list(pods.values())
    watch: FastPodWatch | None = None
    try:
        watch = FastPodWatch(kube, namespace, pods)
        conn.send(("ready", None))
        if conn.recv() != "create":
            return

        def create(times: PodTimes) -> None:
            body = named(template, times.name, times.group, gang)
            times.sent = time.time()
            kube.request_json("POST", f"/api/v1/namespaces/{namespace}/pods", body=body,
                              target=f"Pod {namespace}/{times.name}")  # fmt: skip
            times.created = time.time()

        t0 = time.perf_counter()

        def create_nth(index: int) -> None:
            if rate:  # paced: the Nth create leaves at t0 + N / rate
                delay = t0 + index / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            create(order[index])

        with ThreadPoolExecutor(creators, thread_name_prefix="bench-create") as pool:
            list(pool.map(create_nth, range(count)))
        w = watch
        with w.changed:
            bound_so_far = w.bound
        conn.send(("created", (time.perf_counter() - t0, bound_so_far)))
        w.wait_for(lambda: w.bound == count, timeout, "bound {bound}/" + str(count))
        with w.changed:
            pod_times = [asdict(p) for p in pods.values()]
            conn.send(("bound", (pod_times, w.events, w.event_bytes, w.deleted)))
        if conn.recv() != "delete":
            return
        t0 = time.perf_counter()

        def delete(times: PodTimes) -> None:
            times.delete_sent = time.time()
            kube.delete("v1", "Pod", times.name, namespace)

        with ThreadPoolExecutor(creators, thread_name_prefix="bench-delete") as pool:
            list(pool.map(delete, pods.values()))
        gone = w.wait_for(lambda: w.deleted == count, settle_timeout,
                          "Pods deleted {deleted}/" + str(count))  # fmt: skip
        with w.changed:
            pod_times = [asdict(p) for p in pods.values()]
        conn.send(("deleted", (time.perf_counter() - t0 if gone else None, pod_times)))
    except EOFError:
        return  # the parent went away
    except Exception as exc:
        with contextlib.suppress(OSError):
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        if watch is not None:
            watch.stop()
        kube.close()


class LoadGenerator:
    """The parent's side of load_generator (a spawned process: never fork a process whose
    threads hold locks, as a scheduler's do)."""

    def __init__(self, kubeconfig: Path, template: dict[str, Any], prefix: str, count: int,
                 creators: int, timeout: float, rate: float | None = None,
                 gang: int = 0, *, field_manager: str, settle_timeout: float) -> None:  # fmt: skip
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self.process = context.Process(
            target=load_generator,
            args=(
                child,
                str(kubeconfig),
                template,
                prefix,
                count,
                creators,
                rate,
                timeout,
                gang,
                field_manager,
                settle_timeout,
            ),
            name=f"bench-load-{prefix}",
            daemon=True,
        )
        self.process.start()
        child.close()

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid

    def send(self, message: str) -> None:
        self._conn.send(message)

    def expect(self, kind: str, timeout: float) -> Any:
        if not self._conn.poll(timeout):
            raise SystemExit(f"the load generator sent no {kind!r} within {timeout:.0f} s")
        got, value = self._conn.recv()
        if got == "error":
            raise SystemExit(f"the load generator failed: {value}")
        if got != kind:
            raise SystemExit(f"the load generator sent {got!r}, expected {kind!r}")
        return value

    def stop(self) -> None:
        self._conn.close()
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.terminate()  # our own child, by its PID
            self.process.join(timeout=10)
