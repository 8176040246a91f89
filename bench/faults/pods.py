"""The stream of Pods, and what happened to each as the benchmark's own watch saw it."""

from __future__ import annotations

import argparse
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench.faults.common import POD_NAMESPACE, SCHEDULER
from bench.harness import loadgen
from reconciler.adapters.kube import Kube
from reconciler.errors import ReconcilerError


@dataclass
class PodRecord:
    name: str
    uid: str = ""
    created: float = 0.0
    bound: float | None = None
    deleted_by_us: bool = False
    gone: float | None = None


@dataclass
class Ledger:
    """Every Pod of the run, as the benchmark's own watch saw it."""

    pods: dict[str, PodRecord] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, name: str) -> PodRecord:
        with self.lock:
            return self.pods.setdefault(name, PodRecord(name))

    def wrongful(self) -> list[str]:
        with self.lock:
            return sorted(p.name for p in self.pods.values() if p.gone and not p.deleted_by_us)


def pod_body(name: str, group: str = "") -> dict[str, Any]:
    annotations = loadgen.gang_annotations(group, 2) if group else {}
    return loadgen.pod_body(
        name, POD_NAMESPACE, SCHEDULER, command=("sleep", "1d"), annotations=annotations,
        requests={"cpu": "100m", "memory": "100Mi"},
    )  # fmt: skip


def watch_pods(kube: Kube, ledger: Ledger, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            for kind, pod in kube.watch("v1", "Pod", POD_NAMESPACE, timeout_seconds=30):
                record = ledger.record(pod["metadata"]["name"])
                record.uid = record.uid or pod["metadata"].get("uid", "")
                if kind == "DELETED" and record.gone is None:
                    record.gone = time.monotonic()
                elif (pod.get("spec") or {}).get("nodeName") and record.bound is None:
                    record.bound = time.monotonic()
                if stop.is_set():
                    return
        except ReconcilerError:
            time.sleep(0.5)  # the API server is down (a fault): watch again


def delete_pod(kube: Kube, ledger: Ledger, name: str) -> None:
    ledger.record(name).deleted_by_us = True
    for _ in range(60):
        try:
            kube.delete("v1", "Pod", name, POD_NAMESPACE)
            return
        except ReconcilerError:
            time.sleep(1)  # the API server is down: try again


def create_pod(kube: Kube, ledger: Ledger, body: dict[str, Any]) -> None:
    record = ledger.record(body["metadata"]["name"])
    record.created = time.monotonic()
    for _ in range(60):
        try:
            kube.request_json("POST", f"/api/v1/namespaces/{POD_NAMESPACE}/pods", body=body)
            return
        except ReconcilerError as error:
            if "already exists" in str(error):
                return
            time.sleep(1)


def stream(kube: Kube, ledger: Ledger, options: argparse.Namespace, done: threading.Event,
           rng: random.Random) -> None:  # fmt: skip
    """Create --pods Pods at --rate; delete each group a few seconds after it is bound."""
    made, index = 0, 0
    live: list[tuple[list[str], float | None]] = []  # (names, delete at)
    next_at = time.monotonic()
    while made < options.pods or live:
        now = time.monotonic()
        if made < options.pods and now >= next_at:
            index += 1
            gang = options.gang_every and index % options.gang_every == 0
            names = [f"g{index}-{m}" for m in range(2)] if gang else [f"p{index}"]
            for name in names:
                create_pod(kube, ledger, pod_body(name, f"g{index}" if gang else ""))
            made += len(names)
            live.append((names, None))
            next_at += len(names) / options.rate
        kept = []
        for names, delete_at in live:
            bound = all(ledger.record(n).bound for n in names)
            if delete_at is None and bound:
                delete_at = now + rng.uniform(2.0, 8.0)
            if delete_at is not None and now >= delete_at:
                for name in names:
                    delete_pod(kube, ledger, name)
            else:
                kept.append((names, delete_at))
        live = kept
        time.sleep(0.05)
    done.set()
