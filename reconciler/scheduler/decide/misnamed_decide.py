"""Pods that wait for a scheduler with a name like ours that none answers to (pure).

A Pod written after one of SUNK's pages for another namespace or release (or before a
`scheduler.name` changed) would wait, Pending, forever, with nothing said. Such a Pod is told,
once, by a Warning Event, which names this scheduler's names serve its release.

A name looks like ours when it ends in `-slurm-scheduler` or starts with `<namespace>-`, the
namespace being the Pod's or the one this scheduler runs in (every form SUNK's pages give
does: config/defaults.py served_scheduler_names). `default-scheduler` never does. A Pod some
scheduler has looked at (a `PodScheduled` condition, or one of our schedulers' job-id
annotation) is another scheduler's and is left alone, as is one younger than GRACE_SECONDS.

The Pods are read by a LIST per sweep (misnamed_effects.py) reduced as it is decoded to the
few fields below (`waiting_form`), never kept: what is kept between sweeps is the UIDs told.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler import wellknown as wk
from reconciler.objects import ReadObj as Obj

KUBE_DEFAULT_SCHEDULER = "default-scheduler"
LOOKALIKE_SUFFIX = "-slurm-scheduler"
SWEEP_SECONDS = 5.0  # a look-alike is told within GRACE_SECONDS + SWEEP_SECONDS (and a write)
GRACE_SECONDS = 10.0  # another scheduler binding the Pod (or writing its condition) goes first
# Events one sweep writes at most; the rest wait for the next sweep (a burst of look-alike Pods
# costs the API server at most this many writes per SWEEP_SECONDS).
MAX_EVENTS_PER_SWEEP = 64


@dataclass(frozen=True)
class Waiting:
    uid: str
    namespace: str
    name: str
    scheduler_name: str
    created: float  # seconds since the epoch; 0 when unknown
    looked_at: bool  # a scheduler has marked it: a PodScheduled condition or our job id

    @property
    def regarding(self) -> dict[str, Any]:
        """What an Event about it names."""
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.name, "namespace": self.namespace, "uid": self.uid},
        }


def field_selector(served: Iterable[str]) -> str:
    """Pending, unbound, and not the default scheduler's nor ours: the API server filters
    (each `!=` is one more requirement, ANDed)."""
    names = (KUBE_DEFAULT_SCHEDULER, *served)
    return ",".join(["status.phase=Pending", "spec.nodeName=",
                     *(f"spec.schedulerName!={n}" for n in dict.fromkeys(names))])  # fmt: skip


def waiting_form(pod: Obj, _size: int = 0) -> dict[str, Any]:
    """A listed Pod reduced, as it is decoded, to what `to_tell` reads (a kube_watch Shape)."""
    meta = pod.get("metadata") or {}
    conditions = (pod.get("status") or {}).get("conditions") or []
    annotations = meta.get("annotations") or {}
    return {
        "uid": str(meta.get("uid") or ""),
        "namespace": str(meta.get("namespace") or ""),
        "name": str(meta.get("name") or ""),
        "schedulerName": str((pod.get("spec") or {}).get("schedulerName") or ""),
        "created": _seconds(meta.get("creationTimestamp")),
        "lookedAt": wk.ANNOTATION_JOB_ID in annotations
        or any(isinstance(c, Mapping) and c.get("type") == "PodScheduled" for c in conditions),
    }


def waiting_of(form: Obj) -> Waiting:
    return Waiting(form["uid"], form["namespace"], form["name"], form["schedulerName"],
                   form["created"], form["lookedAt"])  # fmt: skip


def looks_like_ours(scheduler_name: str, pod_namespace: str, home: str,
                    served: Iterable[str]) -> bool:  # fmt: skip
    if scheduler_name in (KUBE_DEFAULT_SCHEDULER, *served):
        return False
    return scheduler_name.endswith(LOOKALIKE_SUFFIX) or any(
        scheduler_name.startswith(f"{ns}-") and len(scheduler_name) > len(ns) + 1
        for ns in (pod_namespace, home)
    )


def to_tell(pods: Iterable[Waiting], served: tuple[str, ...], home: str,
            told: frozenset[str], now: float) -> list[Waiting]:  # fmt: skip
    """The Pods to tell now, at most MAX_EVENTS_PER_SWEEP, oldest first."""
    due = [
        p for p in pods
        if p.uid and p.uid not in told and not p.looked_at
        and now - p.created >= GRACE_SECONDS
        and looks_like_ours(p.scheduler_name, p.namespace, home, served)
    ]  # fmt: skip
    return sorted(due, key=lambda p: (p.created, p.namespace, p.name))[:MAX_EVENTS_PER_SWEEP]


def message(pod: Waiting, served: tuple[str, ...], release: str, home: str) -> str:
    return (
        f"schedulerName {pod.scheduler_name!r} names no scheduler here that answers to it, so "
        f"this Pod waits forever; the Slurm scheduler of release {release!r} (namespace "
        f"{home!r}) answers to {', '.join(served)}: recreate the Pod with one of them"
    )


def _seconds(stamp: Any) -> float:
    try:
        return datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return 0.0
