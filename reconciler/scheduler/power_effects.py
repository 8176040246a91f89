"""Power saving, done: deletes the Pods of nodes Slurm powered down, binds those it powers up.

Level-triggered (power_decide.py decides from Slurm's node states as they are now): a pass runs
every poll interval, and at once when slurmctld's SuspendProgram or ResumeProgram calls the
hooks API, or a slurmd Pod changes. The programs' credential is published in a Secret the
controller Pod mounts (`<release>-power-auth`: the hooks URL and an Authorization header).
"""

from __future__ import annotations

import base64
import logging
import threading
import time

import hostlist

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.compile.power import power_secret_name
from reconciler.errors import ReconcilerError
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.decide.placeholder import HookCredentials
from reconciler.scheduler.decide.power_decide import (
    Obj,
    PowerStep,
    is_asleep,
    power_steps,
)
from reconciler.scheduler.pod_writer import PodWriter
from reconciler.scheduler.settings import SchedulerSettings

log = logging.getLogger(__name__)

# Passes run when slurmctld calls a program or a slurmd Pod changes; this is the safety net.
SAFETY_SECONDS = 30.0
# After a call, a pass each second for a while: Slurm's node state may trail the call.
BURST_SECONDS, BURST_INTERVAL = 10.0, 1.0


class PowerKeeper:
    def __init__(
        self, kube: Kube, slurm: SlurmClients, settings: SchedulerSettings, writer: PodWriter
    ) -> None:
        self._kube = kube
        self._slurm = slurm
        self._settings = settings
        self._writer = writer
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._pods: dict[str, Obj] = {}  # slurmd Pods by name, from the scheduler's watch
        self._told: dict[str, str] = {}  # Pod -> the last unplaceable reason told (no repeats)
        self._left: dict[str, str] = {}  # Pod -> the Node it left when its node powered down
        self._credentials: HookCredentials | None = None
        self._published = False
        self._burst_until = 0.0
        self._enabled = settings.power_saving  # the daemon updates it from each revision
        self.passes = 0

    def retained(self) -> dict[str, int]:
        """Entries per slurmd Pod: the Pods, the reasons told, the Nodes left."""
        with self._lock:
            return {"slurmd pods": len(self._pods), "told": len(self._told),
                    "left": len(self._left)}  # fmt: skip

    # ---- the programs' credential -----------------------------------------------------

    def start(self, credentials: HookCredentials) -> None:
        self._credentials = credentials
        if self._enabled:
            self._publish()

    def set_enabled(self, on: bool) -> None:
        """Power saving switched on (or off) by a revision: a pass publishes the Secret."""
        if on != self._enabled:
            self._enabled = on
            self.nudge()

    def _publish(self) -> None:
        """Write the Secret SuspendProgram/ResumeProgram read (once power saving is on)."""
        credentials = self._credentials
        if self._published or credentials is None:
            return
        token = credentials.token_for(wk.POWER_TOKEN_SUBJECT)
        data = {
            wk.POWER_SECRET_URL_KEY: credentials.url,
            wk.POWER_SECRET_HEADER_KEY: f"Authorization: Bearer {token}",
        }
        secret = {
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": power_secret_name(self._settings.release),
                         "namespace": self._settings.namespace,
                         "labels": {wk.LABEL_MANAGED_BY: wk.MANAGED_BY_VALUE}},
            "type": "Opaque",
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        }  # fmt: skip
        self._kube.apply(secret, field_manager=wk.POWER_FIELD_MANAGER, force=True)
        self._published = True

    def on_slurmd_pod(self, event: str, pod: Obj) -> None:
        with self._lock:
            name = pod["metadata"]["name"]
            if event == "DELETED":
                # By uid: the StatefulSet's new Pod of the same name may already be here.
                gone, cached = pod["metadata"].get("uid"), self._pods.get(name)
                if cached is not None and gone in (None, cached["metadata"].get("uid")):
                    del self._pods[name]
            else:
                self._pods[name] = pod
        self._wake.set()

    # ---- passes -----------------------------------------------------------------------

    def called(self, verb: str, nodes: str) -> str:
        """SuspendProgram / ResumeProgram: Slurm's hostlist; the pass does what its states say."""
        try:
            names = hostlist.expand_hostlist(nodes)
        except hostlist.BadHostlist:
            return "bad hostlist"
        log.info("power: slurmctld asks to %s %d node(s): %s", verb, len(names), nodes)
        self._burst_until = time.monotonic() + BURST_SECONDS
        self.nudge()
        return "ok"

    def nudge(self) -> None:
        self._wake.set()

    def run_forever(self, stopping: threading.Event) -> None:
        while not stopping.is_set():
            bursting = time.monotonic() < self._burst_until
            self._wake.wait(BURST_INTERVAL if bursting else SAFETY_SECONDS)
            self._wake.clear()
            if stopping.is_set():
                return
            try:
                self.run_once()
            except ReconcilerError as exc:
                log.warning("power: pass failed: %s", exc)

    def run_once(self) -> list[PowerStep]:
        started = time.monotonic()
        with self._lock:
            pods = list(self._pods.values())
        ours = [
            self._remember_where(p) for p in pods
            if (p.get("spec") or {}).get("schedulerName") in self._settings.names
        ]  # fmt: skip
        if not ours and not self._enabled:
            return []  # nothing of ours to place, and no node ever powers down
        self._publish()
        snapshot = self._slurm.operator.nodes()
        slurm_nodes = {n.name: n for n in snapshot.items}
        # Every Pod and Node of the cluster is read only when a Pod is to be bound: a sleeping
        # node's held Pod is Pending too, and stays so for hours.
        waking = any(
            not (p.get("spec") or {}).get("nodeName")
            and not is_asleep(slurm_nodes.get(p["metadata"]["name"]))
            for p in ours
        )
        nodes = self._kube.list("v1", "Node").items if waking else []
        bound = self._all_pods() if waking else []
        steps = power_steps(pods, slurm_nodes, nodes, bound, placed_by=self._settings.name)
        by_name = {p["metadata"]["name"]: p for p in pods}
        by_name.update({p["metadata"]["name"]: p for p in ours})
        for step in steps:
            self._do(step, by_name[step.pod])
        self.passes += 1
        if steps:
            log.info("power: %d step(s) in %.2f s", len(steps), time.monotonic() - started)
        return steps

    def _remember_where(self, pod: Obj) -> Obj:
        """The StatefulSet's new Pod for a node that powered down gets the Node the old one
        left, as an annotation: it outlives a restart of the daemon."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        left = self._left.get(meta["name"])
        annotations = meta.get("annotations") or {}
        if left is None or spec.get("nodeName") or meta.get("deletionTimestamp"):
            return pod
        if annotations.get(wk.ANNOTATION_LAST_NODE) == left:
            self._left.pop(meta["name"], None)  # seen on the Pod: it is the Pod's to keep now
            return pod
        # Forgotten only once the Pod is seen carrying it: a write that found no Pod (404),
        # or a cache that still held the old one, is tried again on the next pass.
        log.info("power: %s's new Pod waits on no Node: marking it with the Node it left (%s)",
                 meta["name"], left)  # fmt: skip
        self._writer.annotate(pod, {wk.ANNOTATION_LAST_NODE: left})
        return {
            **pod,
            "metadata": {**meta, "annotations": {**annotations, wk.ANNOTATION_LAST_NODE: left}},
        }

    def _all_pods(self) -> list[Obj]:
        live = "status.phase!=Succeeded,status.phase!=Failed"
        return list(self._kube.list("v1", "Pod", field_selector=live).items)

    def _do(self, step: PowerStep, pod: Obj) -> None:
        if step.kind == "delete":
            log.info("power: %s powered down in Slurm: deleting its Pod (on %s)", step.pod,
                     step.node)  # fmt: skip
            self._writer.event(
                pod,
                wk.EVENT_POWERED_DOWN,
                "Delete",
                f"Slurm powered {step.pod} down; its Pod leaves {step.node}",
            )
            # Marked first: topology.conf keeps the node's place while the Pod terminates.
            self._writer.annotate(pod, {wk.ANNOTATION_LAST_NODE: step.node})
            self._left[step.pod] = step.node or ""
            self._writer.delete(pod)
        elif step.kind == "bind":
            assert step.node is not None
            log.info("power: %s is up in Slurm: binding its Pod to %s", step.pod, step.node)
            if self._writer.bind(pod, step.node, {}):
                self._writer.event(
                    pod,
                    wk.EVENT_POWERED_UP,
                    "Binding",
                    f"Slurm powers {step.pod} up: bound to {step.node}",
                )
            self._told.pop(step.pod, None)
        elif self._told.get(step.pod) != step.why:
            self._told[step.pod] = step.why
            log.warning("power: %s cannot be placed: %s", step.pod, step.why)
            self._writer.event(pod, wk.EVENT_REJECTED, "Scheduling", step.why, "Warning")
