"""The daemon memory benchmark's settings, and its Pods: created, deleted, and what the
daemon wrote on them."""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import loadgen
from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube

ROOT = Path(__file__).resolve().parent.parent.parent
REPO = ROOT / "fixtures" / "config-repo"
NAMESPACE = "inference"  # in the repo's scheduler.scope.namespaces, apart from the slurmd Pods
OTHER_SCHEDULER = "daemon-rss-bench-elsewhere"
LABEL = {"app.kubernetes.io/name": "daemon-rss-bench"}
DAEMON_READY_TIMEOUT = 120.0
DAEMON_STOP_TIMEOUT = 60.0
WRITTEN_TIMEOUT = 600.0
QUIET_CPU = 0.03  # of one CPU: the daemon counts as quiescent below this
QUIET_WINDOW = 3.0
QUIET_TIMEOUT = 120.0
PROGRESS_EVERY = 1000

WARNING = re.compile(
    r"\b(WARNING|ERROR|CRITICAL)\b|Traceback|\"level\": ?\"(warning|error|critical)"
)


def pod_body(name: str, scheduler_name: str) -> dict[str, Any]:
    """No CPU or memory request: admission refuses it before any Slurm call."""
    return loadgen.pod_body(name, NAMESPACE, scheduler_name, labels=dict(LABEL))


def create_pods(
    kube: Kube,
    prefix: str,
    count: int,
    scheduler_name: str,
    creators: int,
    progress: Callable[[int, float], str],
) -> tuple[list[str], float, float]:
    """Create PREFIX-NNNNN with `creators` threads; (names, first send, seconds)."""
    names = [f"{prefix}-{i:05d}" for i in range(count)]
    bodies = [pod_body(name, scheduler_name) for name in names]
    started = time.monotonic()
    seconds = loadgen.create_pods(kube, bodies, creators, progress, PROGRESS_EVERY)
    return names, started, seconds


def delete_pods(kube: Kube, names: list[str], creators: int) -> float:
    return loadgen.delete_pods(kube, NAMESPACE, names, creators, PROGRESS_EVERY)


@dataclass(frozen=True)
class Written:
    pods: int
    annotated: int
    condition: int
    events: int
    json_bytes: float  # mean size of one such Pod as the API server lists it (compact JSON)


def written(kube: Kube, scheduler_name: str) -> Written:
    pods = kube.list(
        "v1", "Pod", NAMESPACE, field_selector=f"spec.schedulerName={scheduler_name}"
    ).items
    annotated = sum(
        1
        for p in pods
        if wk.ANNOTATION_REJECTED in ((p.get("metadata") or {}).get("annotations") or {})
    )
    condition = sum(
        1
        for p in pods
        if any(
            c.get("type") == "PodScheduled" and c.get("status") == "False"
            for c in (p.get("status") or {}).get("conditions") or ()
        )
    )
    uids = {p["metadata"]["uid"] for p in pods}
    listed = kube.list("v1", "Event", NAMESPACE, field_selector=f"reason={wk.EVENT_REJECTED}")
    events = [e for e in listed.items if (e.get("involvedObject") or {}).get("uid") in uids]
    size = statistics.mean(len(json.dumps(p, separators=(",", ":"))) for p in pods) if pods else 0
    return Written(len(pods), annotated, condition, len(events), size)


@dataclass
class Ours:
    count: int
    create_seconds: float
    refused_at: float | None  # from the first create: the counter counts them all
    lag: float | None  # from the last create returned to the same
    written_at: float | None  # from the first create: annotations, conditions, Events all there
    written: Written | None
    cpu_seconds: float  # the daemon's, first create -> everything written
    refused_total: int
    delete_seconds: float | None = None
