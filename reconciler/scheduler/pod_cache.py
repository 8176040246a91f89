"""What the scheduler's cache keeps of a Pod (pure): the Pod as it came, up to WHOLE_BYTES of
JSON; past that, only the fields the scheduler and kuberules read (KEEP, the one whitelist);
past SLIM_BYTES even then, only its identity and why it is refused.

A Pod's author controls its size: 20 pending Pods of 1.2 MiB each held 196 MiB of Python
objects when cached whole (8 times their JSON), and about 100 of them passed the Deployment's
memory limit, again at each restart's list. A Pod under WHOLE_BYTES is kept whole so that
the pod policies (CEL, which may read any field) judge it as it is without a read; a larger
one is judged on the whole Pod read back once at admission (intake.py), and the fingerprint of
what admission looked at (admission.fingerprint) is taken of the whole Pod here, so a refused
Pod is looked at again when any part of it changes, kept or not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from reconciler import wellknown as wk
from reconciler.kuberules.pod_rules import count_problems
from reconciler.kuberules.problem import Problem
from reconciler.objects import Obj
from reconciler.scheduler.decide.admission import CACHE_NOTE, fingerprint

# Real Pods are 2 to 10 KiB of JSON without managedFields (the kubelet's status included).
WHOLE_BYTES: Final = 32 * 1024
# What is kept of a larger Pod: its requests, rules and labels; a few KiB for a real one.
SLIM_BYTES: Final = 32 * 1024
NOTE: Final = CACHE_NOTE  # the key a slimmed Pod carries: its size, fingerprint, refusal
_OURS: Final = (f"{wk.DOMAIN}/", f"{wk.SUNK_DOMAIN}/")
_CONTAINER: Final = {"name": True, "resources": True, "restartPolicy": True}
_CONTAINER_STATUS: Final = {"name": True, "allocatedResources": True, "resources": True}
# The fields read (grep reconciler/scheduler and reconciler/kuberules): True keeps the value
# whole, a dict keeps those keys of a mapping, a one-item list those keys of each list item.
KEEP: Final[Mapping[str, Any]] = {
    "apiVersion": True,
    "kind": True,
    "metadata": {
        "name": True, "namespace": True, "uid": True, "resourceVersion": True,
        "creationTimestamp": True, "deletionTimestamp": True,
        "deletionGracePeriodSeconds": True, "labels": True,
        "annotations": _OURS,  # the SUNK annotations and ours; the rest is the user's
    },
    "spec": {
        "nodeName": True, "schedulerName": True, "nodeSelector": True, "affinity": True,
        "tolerations": True, "topologySpreadConstraints": True,
        "terminationGracePeriodSeconds": True, "overhead": True, "resources": True,
        "containers": [_CONTAINER], "initContainers": [_CONTAINER],
    },
    "status": {
        "phase": True, "conditions": [{"type": True, "status": True, "reason": True}],
        "containerStatuses": [_CONTAINER_STATUS], "initContainerStatuses": [_CONTAINER_STATUS],
    },
}  # fmt: skip


def cache_form(pod: Obj, size: int) -> Obj:
    """What the cache keeps of a Pod whose JSON is `size` bytes (as the API server sent it)."""
    without_managed_fields(pod)
    if size <= WHOLE_BYTES:
        return pod
    kept = _kept(pod, KEEP)
    kept_size = len(json.dumps(kept, separators=(",", ":")))
    note: Obj = {"bytes": size, "fingerprint": fingerprint(pod)}
    if kept_size > SLIM_BYTES:
        problems = [
            *count_problems(pod),  # the likely cause, named with its count and cap
            Problem(
                "metadata",
                f"the Pod's labels, annotations of {wk.SUNK_DOMAIN}, requests and scheduling "
                f"rules are {kept_size:,} bytes of JSON; at most {SLIM_BYTES:,} are accepted "
                f"(the Pod is {size:,} bytes)",
            ),
        ]
        note["refusal"] = "; ".join(str(p) for p in problems)
        kept = _identity(kept)
    kept[NOTE] = note
    return kept


def without_managed_fields(obj: Obj) -> Obj:
    """The object without metadata.managedFields, which nothing here reads: it is over half
    of a small cached Pod's memory (bench/daemon_rss.py)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def slimmed(pod: Mapping[str, Any]) -> bool:
    """Whether the cache kept only part of the Pod (its policies judge the whole one)."""
    return NOTE in pod


def refusal(pod: Mapping[str, Any]) -> str | None:
    """Why a Pod too large to cache is refused; None for any other."""
    return (pod.get(NOTE) or {}).get("refusal")


def _kept(value: Any, keep: Any) -> Any:
    if keep is True:
        return value
    if isinstance(keep, tuple):  # annotations: the ones with these prefixes
        if not isinstance(value, Mapping):
            return value
        return {k: v for k, v in value.items() if isinstance(k, str) and k.startswith(keep)}
    if isinstance(keep, list):
        if not isinstance(value, list):
            return value
        return [_kept(item, keep[0]) for item in value]
    if not isinstance(value, Mapping):
        return value
    return {key: _kept(value[key], inner) for key, inner in keep.items() if key in value}


def _identity(kept: Obj) -> Obj:
    """Enough to refuse it and follow it: its name and our annotations, no rules."""
    meta = kept.get("metadata") or {}
    spec = kept.get("spec") or {}
    return {
        "apiVersion": kept.get("apiVersion"),
        "kind": kept.get("kind"),
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp",
                      "deletionTimestamp", "deletionGracePeriodSeconds")
            if k in meta
        } | {"annotations": _kept(meta.get("annotations") or {}, _OURS)},
        "spec": {k: spec[k] for k in ("nodeName", "schedulerName") if k in spec},
        "status": {"phase": (kept.get("status") or {}).get("phase", "Pending")},
    }  # fmt: skip
