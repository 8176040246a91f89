"""The daemon's replicas as kubelet would run them, and the Service in front of the leader."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench.faults.common import LEASE, NAMESPACE, REPO, ROOT
from bench.faults.proxy import FaultProxy
from reconciler.adapters.kube import Kube
from reconciler.local.ports import free_port
from reconciler.local.stack import LocalStack


@dataclass
class Replica:
    identity: str
    argv: list[str]
    log: Path
    listen_port: int
    hooks_port: int
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                            cwd=ROOT, start_new_session=True)  # fmt: skip
        self.starts += 1

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signum)

    def stop(self) -> None:
        if self.process is None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def make_replica(stack: LocalStack, identity: str, proxy_url: str, hooks_url: str,
                 work: Path) -> Replica:  # fmt: skip
    """`reconciler run` on the stack, its slurmrestd reached through the fault proxy. Its ports
    stay the same across restarts, as a Pod's do; placeholder jobs reach the hooks API at
    hooks_url, the stand-in for the Service in front of the ready replica."""
    listen, hooks = free_port(), free_port()
    argv = [
        sys.executable, "-m", "reconciler", "run", "--source-dir", str(REPO),
        "--runtime-dir", str(stack.runtime_dir), "--slurm-url", proxy_url,
        "--leader-elect", "--identity", identity, "--lease-duration", "6",
        "--listen", f"127.0.0.1:{listen}", "--hooks-api-bind-address", f"127.0.0.1:{hooks}",
        "--hooks-url", hooks_url,
        "--interval", "5", "--resync", "60", "--workdir", str(work / identity),
        "--log-format", "json",
    ]  # fmt: skip
    return Replica(identity, argv, work / f"{identity}.log", listen, hooks)


def ready(replica: Replica) -> bool:
    url = f"http://127.0.0.1:{replica.listen_port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def route_to_ready(replicas: dict[str, Replica], service: FaultProxy,
                   stop: threading.Event) -> None:  # fmt: skip
    """The hooks Service's endpoints: the replica whose /readyz says 200 (only a leader does)."""
    current: Replica | None = None
    while not stop.wait(0.2):
        if current is not None and ready(current):
            continue
        current = next((r for r in replicas.values() if ready(r)), None)
        service.retarget(f"http://127.0.0.1:{current.hooks_port}" if current else None)


def keep_running(replicas: dict[str, Replica], stop: threading.Event) -> None:
    """kubelet's restartPolicy Always for the replicas: one that exited starts again in 1 s."""
    while not stop.wait(0.5):
        for replica in replicas.values():
            if replica.process is not None and replica.process.poll() is not None:
                time.sleep(1.0)
                if not stop.is_set():
                    replica.start()


def leader(kube: Kube) -> str | None:
    lease = kube.get("coordination.k8s.io/v1", "Lease", LEASE, NAMESPACE) or {}
    return (lease.get("spec") or {}).get("holderIdentity")
