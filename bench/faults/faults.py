"""The faults, one at a time, and the probe Pod that times the recovery from each."""

from __future__ import annotations

import argparse
import base64
import json
import random
import signal
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.faults.common import NAMESPACE, RELEASE
from bench.faults.pods import Ledger, create_pod, delete_pod, pod_body
from bench.faults.proxy import FaultProxy
from bench.faults.replicas import Replica, leader
from reconciler.adapters.kube import Kube
from reconciler.apply.controller import roll_deployment
from reconciler.local.kube import control_plane as kube_module
from reconciler.local.stack import LocalStack


@dataclass
class Fault:
    kind: str
    started: float = 0.0
    ended: float = 0.0
    recovery: float | None = None
    note: str = ""


class Chaos:
    def __init__(
        self, stack: LocalStack, kube: Kube, replicas: dict[str, Replica], proxy: FaultProxy,
        ledger: Ledger, options: argparse.Namespace,
    ) -> None:  # fmt: skip
        self.stack, self.kube, self.replicas = stack, kube, replicas
        self.proxy, self.ledger, self.options = proxy, ledger, options
        self.probes = 0

    def leader_replica(self) -> Replica | None:
        holder = leader(self.kube)
        return self.replicas.get(holder or "")

    def run(self, fault: Fault) -> None:
        fault.started = time.monotonic()
        getattr(self, f"_{fault.kind}")(fault)
        fault.ended = time.monotonic()
        fault.recovery = self.probe()

    def _kill(self, fault: Fault) -> None:
        victim = self.leader_replica()
        if victim is None:
            fault.note = "no leader"
            return
        victim.signal(signal.SIGKILL)  # keep_running starts it again, as kubelet would
        fault.note = victim.identity

    def _ctld(self, fault: Fault) -> None:
        roll_deployment(self.kube, NAMESPACE, f"{RELEASE}-controller", datetime.now(UTC))

    def _apiserver(self, fault: Fault) -> None:
        restart_apiserver(self.stack, compact=fault.note == "compact")

    def _rest(self, fault: Fault) -> None:
        self.proxy.mode = "broken"
        time.sleep(self.options.rest_fault)
        self.proxy.mode = "ok"
        fault.note = f"{self.proxy.broken_answers} broken answers"

    def _pause(self, fault: Fault) -> None:
        victim = self.leader_replica()
        if victim is None:
            fault.note = "no leader"
            return
        victim.signal(signal.SIGSTOP)
        time.sleep(6 + 4)  # the lease, and then some
        fault.note = f"{victim.identity} paused; leader meanwhile: {leader(self.kube)}"
        victim.signal(signal.SIGCONT)

    def probe(self) -> float | None:
        """Seconds from now until a new Pod is bound (None: not within 60 s)."""
        self.probes += 1
        name = f"probe-{self.probes}"
        started = time.monotonic()
        create_pod(self.kube, self.ledger, pod_body(name))
        deadline = started + 60
        while time.monotonic() < deadline:
            if self.ledger.record(name).bound:
                recovery = self.ledger.record(name).bound - started  # type: ignore[operator]
                delete_pod(self.kube, self.ledger, name)
                return recovery
            time.sleep(0.05)
        delete_pod(self.kube, self.ledger, name)
        return None


def restart_apiserver(stack: LocalStack, *, down: float = 5.0, compact: bool = False) -> None:
    """The local stack's kube-apiserver stopped (SIGTERM by its recorded PID), DOWN seconds
    later started again with the same arguments, and waited for until ready: the stack does not
    restart it by itself. With COMPACT, etcd is compacted while it is down (every watch must
    relist)."""
    plane = stack.kube
    assert plane is not None
    plane.supervisor.stop("kube-apiserver", grace=10)
    if compact:
        compact_etcd(plane.ports.etcd_client)
    time.sleep(down)
    plane.supervisor.start("kube-apiserver", kube_module.apiserver_argv(
        plane.binaries, plane.paths, plane.ports))  # fmt: skip
    token = kube_module.read_token(plane.paths)
    plane.supervisor.wait_ready("kube-apiserver", lambda: kube_module.apiserver_ready(
        plane.paths, plane.ports, token), timeout=60)  # fmt: skip


def compact_etcd(port: int) -> None:
    """Compact etcd to its current revision (through its JSON gateway): every watch that
    resumes from before it gets 410 Gone and must relist."""

    def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                         data=json.dumps(body).encode())  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    key = base64.b64encode(b"/registry").decode()
    revision = int(call("/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"])
    call("/v3/kv/compaction", {"revision": revision, "physical": True})


def schedule(options: argparse.Namespace, rng: random.Random) -> list[Fault]:
    faults = [Fault("kill") for _ in range(options.kills)]
    faults += [Fault("ctld") for _ in range(options.ctld_restarts)]
    faults += [Fault("apiserver") for _ in range(options.apiserver_restarts)]
    faults += [Fault("rest"), Fault("pause")]
    rng.shuffle(faults)
    apiservers = [f for f in faults if f.kind == "apiserver"]
    if apiservers:
        apiservers[-1].note = "compact"
    return faults
