"""The real kube-scheduler (v1.20.2, built by setup.sh from the source kube-apiserver comes
from) as an oracle: give it Nodes, Pods bound to them and one more Pod, and read where it put
that Pod or why it could not ("0/3 nodes are available: ...").

Each example gets fresh Node names and its own namespace, so nothing an earlier example left in
the scheduler's cache can count; Pods are deleted with grace 0 (no kubelet would confirm a
graceful delete). kube-scheduler serves no port (`--port=0 --secure-port=0`) and is stopped
by its PID.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.adapters.kube import Kube
from reconciler.errors import KubeApiError
from reconciler.local.kube.control_plane import KUBE_VERSION, cache_dir

Obj = dict[str, Any]
NODE_TOKEN = "NODE"  # examples name their Nodes NODE0, NODE1...; each run renames them
RUNTIME_CLASS = "oracle-overhead"
OVERHEAD = {"cpu": "250m", "memory": "64Mi"}
SETTLE_SECONDS = 0.3  # for the scheduler's Node watch to see the example's Nodes
DECIDE_TIMEOUT = 20.0
_HISTOGRAM = re.compile(r"^0/(\d+) nodes are available: (.*)\.$")


def scheduler_binary() -> Path:
    return cache_dir() / "kubernetes" / KUBE_VERSION / "kube-scheduler"


class KubeScheduler:
    """kube-scheduler as a child process, no leader election, no listening port."""

    def __init__(self, kubeconfig: Path, log: Path) -> None:
        self._argv = [
            str(scheduler_binary()),
            f"--kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--port=0",
            "--secure-port=0",
            "-v=1",
        ]
        self.log = log
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self._process = subprocess.Popen(
                self._argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None


@dataclass(frozen=True)
class Verdict:
    """What kube-scheduler did with the Pod: the Node it bound it to, or its reasons."""

    node: str | None
    message: str
    reasons: collections.Counter[str]  # reason -> Nodes, from the FailedScheduling message
    pod: Obj  # the Pod as the API server stored it (defaults and overhead filled in)
    nodes: list[Obj]  # the Nodes as stored, with their real names
    bound: list[Obj]  # the Pods bound beforehand, as stored


@dataclass(frozen=True)
class Example:
    nodes: list[Obj]
    bound: list[Obj]
    pod: Obj


class Oracle:
    def __init__(self, kube: Kube) -> None:
        self._kube = kube
        self._runs = itertools.count()

    def install(self) -> None:
        self._kube.create(
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": RUNTIME_CLASS},
                "handler": "runc",
                "overhead": {"podFixed": OVERHEAD},
            }
        )

    def decide(self, example: Example) -> Verdict | None:
        """kube-scheduler's verdict, or None when the API server refuses an object (the
        example is not a Pod Kubernetes 1.20 would hold)."""
        run = next(self._runs)
        namespace = f"oracle-{run}"
        text = json.dumps(dataclasses.asdict(example))
        renamed = json.loads(text.replace(NODE_TOKEN, f"o{run}-n"))
        nodes, bound, pod = renamed["nodes"], renamed["bound"], renamed["pod"]
        self._kube.create(_namespace(namespace))
        try:
            return self._decide(namespace, nodes, bound, pod)
        except KubeApiError as error:
            if error.status in (400, 422):
                return None
            raise
        finally:
            self._clean(namespace, nodes)

    def _decide(self, namespace: str, nodes: list[Obj], bound: list[Obj], pod: Obj) -> Verdict:
        stored_nodes = [self._node(node) for node in nodes]
        stored_bound = [self._kube.create(_in(namespace, p)) or {} for p in bound]
        time.sleep(SETTLE_SECONDS)
        self._kube.create(_in(namespace, pod))
        deadline = time.monotonic() + DECIDE_TIMEOUT
        while time.monotonic() < deadline:
            stored = self._kube.get("v1", "Pod", pod["metadata"]["name"], namespace) or {}
            verdict = _verdict(stored, stored_nodes, stored_bound)
            if verdict is not None:
                return verdict
            time.sleep(0.05)
        raise AssertionError(f"kube-scheduler decided nothing in {DECIDE_TIMEOUT} s")

    def _node(self, node: Obj) -> Obj:
        """Create the Node, then give it its own taints: admission (TaintNodesByCondition)
        taints every new Node node.kubernetes.io/not-ready until a kubelet reports Ready."""
        self._kube.create(node)
        patch = {"spec": {"taints": (node.get("spec") or {}).get("taints")}}
        path = f"/api/v1/nodes/{node['metadata']['name']}"
        return self._kube.request_json(
            "PATCH", path, body=patch, content_type="application/merge-patch+json"
        )

    def _clean(self, namespace: str, nodes: list[Obj]) -> None:
        for pod in self._kube.list("v1", "Pod", namespace).items:
            self._kube.delete("v1", "Pod", pod["metadata"]["name"], namespace,
                              grace_period_seconds=0)  # fmt: skip
        for node in nodes:
            self._kube.delete("v1", "Node", node["metadata"]["name"])
        self._kube.delete("v1", "Namespace", namespace)


def _verdict(stored: Obj, nodes: list[Obj], bound: list[Obj]) -> Verdict | None:
    node = (stored.get("spec") or {}).get("nodeName")
    if node:
        return Verdict(node, "", collections.Counter(), stored, nodes, bound)
    for condition in (stored.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            message = condition.get("message") or ""
            return Verdict(None, message, reason_counts(message), stored, nodes, bound)
    return None


def reason_counts(message: str) -> collections.Counter[str]:
    """ "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had taint {a: b}, that the pod
    didn't tolerate." -> reason -> count. A reason may hold ", " itself, so items are split
    where a count starts."""
    match = _HISTOGRAM.match(message)
    if not match:
        return collections.Counter({message: 1})
    counts: collections.Counter[str] = collections.Counter()
    for item in re.split(r", (?=\d+ )", match.group(2)):
        count, _, reason = item.partition(" ")
        counts[reason] += int(count)
    counts["<nodes>"] = int(match.group(1))
    return counts


def _namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _in(namespace: str, pod: Obj) -> Obj:
    return {**pod, "metadata": {**pod["metadata"], "namespace": namespace}}
