"""The bound, unfinished Pods of every scheduler that inter-Pod rules can see, per namespace:
one list and one watch (an informer) per namespace a rule names, started the first time one
does, kept small (pod_affinity_spread.PlacedPod: namespace, labels, Node).

The rules used to be answered with one LIST per (namespace, selector) of a Pod's terms, at
submit and again at bind: a Pod with 15,000 terms held a worker for 34 s of LISTs. Now a
Pod's rules cost no request once its namespaces are followed; the caps on terms and on the
namespaces they name are pod_rules.count_problems. Past MAX_FOLLOWED namespaces (a rule may
name namespaces that do not exist) a namespace is listed once per Pod, never once per term.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Final

from reconciler.adapters.kube import Kube
from reconciler.adapters.kube_watch import OpenWatches, WatchMemory
from reconciler.kuberules.pod_affinity_spread import PlacedPod, placed_pod
from reconciler.kuberules.pod_phase import finished
from reconciler.objects import Obj

Spawn = Callable[..., None]  # (thread name, target, *args): the scheduler's guarded threads
MAX_FOLLOWED: Final = 64


def placed_form(pod: Obj, size: int) -> Obj:
    """What of a Pod the informer reads (shape for the list and the watch): its identity,
    labels, Node, deletion and phase."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    keep = ("name", "namespace", "uid", "resourceVersion", "labels", "deletionTimestamp")
    return {
        "metadata": {k: meta[k] for k in keep if k in meta},
        "spec": {"nodeName": spec.get("nodeName")},
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


class PlacedPods:
    def __init__(self, kube: Kube, spawn: Spawn) -> None:
        self._kube = kube
        self._spawn = spawn
        self._lock = threading.Lock()
        self._starting = threading.Lock()  # one first list at a time
        self._pods: dict[str, dict[str, PlacedPod]] = {}  # namespace -> uid -> Pod
        self._watches = OpenWatches()
        self._stopped = False
        self.lists = 0  # LISTs made, for tests and logs

    def of(self, namespaces: Iterable[str], *, own: str) -> list[PlacedPod]:
        """The placed Pods of these namespaces but the Pod `own` (a UID)."""
        found: dict[str, PlacedPod] = {}
        for namespace in dict.fromkeys(namespaces):
            found.update(self._namespace(namespace))
        found.pop(own, None)
        return list(found.values())

    @property
    def watches(self) -> int:
        """Watches open: one per namespace followed."""
        return len(self._watches)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._watches.stop_all()

    def _namespace(self, namespace: str) -> dict[str, PlacedPod]:
        with self._lock:
            if namespace in self._pods:
                return dict(self._pods[namespace])
        with self._starting:
            with self._lock:
                if namespace in self._pods:
                    return dict(self._pods[namespace])
                follow = len(self._pods) < MAX_FOLLOWED and not self._stopped
            listing = self._kube.list("v1", "Pod", namespace, shape=placed_form)
            self.lists += 1
            pods = dict(found for item in listing.items if (found := _placed(item)))
            if not follow:
                return pods
            memory = WatchMemory.of_listing(listing.items, listing.resource_version)
            with self._lock:
                self._pods[namespace] = pods
            self._spawn(f"placed-pods-{namespace}", self._follow, namespace, memory)
            return dict(pods)

    def _follow(self, namespace: str, memory: WatchMemory) -> None:
        watch = self._kube.watch("v1", "Pod", namespace, shape=placed_form)
        watch.carry(memory)
        with self._watches.holding(watch):
            for event, obj in watch:
                found = _placed(obj) if event != "DELETED" else None
                with self._lock:
                    if found is None:
                        self._pods[namespace].pop(obj["metadata"]["uid"], None)
                    else:
                        self._pods[namespace][found[0]] = found[1]


def _placed(obj: Obj) -> tuple[str, PlacedPod] | None:
    """A bound, unfinished Pod as the rules see it (its UID, it); None for any other."""
    if not (obj.get("spec") or {}).get("nodeName") or finished(obj):
        return None
    return obj["metadata"]["uid"], placed_pod(obj)
