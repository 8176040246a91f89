"""Tells Pods that wait for a name like ours that none answers to (misnamed_decide.py): a LIST
of the Pending, unbound Pods of the scheduled namespaces that are neither ours nor the default
scheduler's, every SWEEP_SECONDS, each reduced as it is decoded; one Warning Event per Pod.

A LIST, not a watch: a field selector can exclude our names (`!=`, ANDed) but not select a
pattern, so what it returns is every other scheduler's waiting Pods, and a watch would bring
each of their changes. A sweep costs one LIST per namespace watched (one for the whole cluster)
and keeps only the UIDs told, pruned to those still waiting: a restarted scheduler tells a Pod
still waiting once more.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.errors import ReconcilerError
from reconciler.scheduler.decide.misnamed_decide import (
    SWEEP_SECONDS,
    Waiting,
    field_selector,
    message,
    to_tell,
    waiting_form,
    waiting_of,
)
from reconciler.scheduler.pod_writer import PodWriter
from reconciler.scheduler.settings import SchedulerSettings

log = logging.getLogger(__name__)


class MisnamedPods:
    def __init__(self, kube: Kube, settings: SchedulerSettings, pods_out: PodWriter,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self._kube = kube
        self._settings = settings
        self._pods_out = pods_out
        self._clock = clock
        self._told: set[str] = set()

    @property
    def told(self) -> int:
        """Pods told: those still waiting under a name of no scheduler at the last sweep."""
        return len(self._told)

    def sweep(self) -> list[Waiting]:
        """One look; returns the Pods told."""
        served = self._settings.names
        selector = field_selector(served)
        waiting: list[Waiting] = []
        for namespace in self._settings.watch_namespaces or (None,):
            listing = self._kube.list("v1", "Pod", namespace, field_selector=selector,
                                      shape=waiting_form)  # fmt: skip
            waiting += [waiting_of(form) for form in listing.items]
        self._told &= {p.uid for p in waiting}  # the rest were bound, deleted or renamed
        home, release = self._settings.namespace, self._settings.release
        told = to_tell(waiting, served, home, frozenset(self._told), self._clock())
        for pod in told:
            self._told.add(pod.uid)
            self._pods_out.event(pod.regarding, wk.EVENT_SCHEDULER_NAME_UNKNOWN, "Scheduling",
                                 message(pod, served, release, home), "Warning")  # fmt: skip
            log.info("scheduler: Pod %s/%s names scheduler %r, which no name of ours matches",
                     pod.namespace, pod.name, pod.scheduler_name)  # fmt: skip
        return told

    def run_forever(self, stopping: threading.Event) -> None:
        while not stopping.wait(SWEEP_SECONDS):
            try:
                self.sweep()
            except ReconcilerError as exc:
                log.warning("scheduler: the look for misnamed Pods failed: %s", exc)
