"""Admission: is this Pod schedulable through Slurm, and what does it ask Slurm for?

A pure function of the Pod and the scheduler's settings. Every problem names the field to change and
how; a refused Pod gets them all at once (one Event), not one per retry. The rules are the
requirements of SUNK's "Schedule Kubernetes Pods with Slurm" and "SUNK Pod Scheduler" pages:
non-zero CPU and memory requests, a grace period below kill-wait minus 5 s, typed annotations.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

import hostlist

from reconciler import hostlists
from reconciler import wellknown as wk
from reconciler.config.defaults import MAX_UNIX_ID
from reconciler.kuberules.integers import Bounds
from reconciler.kuberules.pod_requests import pod_requests
from reconciler.kuberules.pod_rules import count_problems
from reconciler.kuberules.problem import Problem
from reconciler.kuberules.quantity import QuantityError, manifest_quantity
from reconciler.objects import ReadObj as Obj

ExclusiveMode = Literal["none", "ok", "user", "mcs", "topo"]
EXCLUSIVE_MODES: tuple[ExclusiveMode, ...] = ("none", "ok", "user", "mcs", "topo")
# Before SUNK v5.7.0 the annotation was a boolean; "true" meant `--exclusive` (whole node).
LEGACY_EXCLUSIVE = {"true": "none", "false": None}
# Sharing modes the Slurm we talk to cannot express, and the release that can.
MODE_NEEDS_VERSION = {"topo": "24.11"}
KILL_WAIT_MARGIN_SECONDS = 5
DEFAULT_GRACE_SECONDS = 30  # what the API server fills in when a Pod does not say
MIB = 1024 * 1024
# What the scheduler itself writes on a Pod: not part of what the user asked.
STATUS_ANNOTATIONS = frozenset(
    {wk.ANNOTATION_JOB_ID, wk.ANNOTATION_SLURM_NODE, wk.ANNOTATION_REJECTED}
)

# The key the scheduler's cache adds to a Pod it kept only part of (pod_cache.py): the whole
# Pod's size and fingerprint, and, for one too large to cache, why it is refused.
CACHE_NOTE = "reconcilerCache"


@dataclass(frozen=True)
class PodRequest:
    """What an admitted Pod asks of Slurm: its resources and every SUNK annotation, typed."""

    cpus: int
    memory_mb: int
    gpus: int
    grace_seconds: int
    account: str | None = None
    comment: str | None = None
    constraints: str | None = None
    prefer: str | None = None
    partition: str | None = None
    qos: str | None = None
    reservation: str | None = None
    exclusive: ExclusiveMode | None = None  # None: the partition's default
    excluded_nodes: tuple[str, ...] = ()
    required_nodes: tuple[str, ...] = ()
    priority: int | None = None
    user_id: int | None = None  # None: the operator's user (root in SUNK)
    group_id: int | None = None  # None: the user's
    working_dir: str | None = None
    timeout_minutes: int | None = None


@dataclass(frozen=True)
class Rejection:
    problems: tuple[Problem, ...]

    def message(self) -> str:
        return "; ".join(str(p) for p in self.problems)


def admit(
    pod: Obj,
    *,
    kill_wait_seconds: int,
    slurm_version: tuple[int, int] = (22, 5),
    default_user_id: int | None = None,
) -> PodRequest | Rejection:
    """The Pod's request to Slurm, or every reason it cannot have one. A Pod without user-id
    runs as `default_user_id` (values scheduler.podPolicy.defaultUserId), or as the operator's
    user (root, as SUNK's "Schedule Kubernetes Pods with Slurm" says) when that is None."""
    problems: list[Problem] = []
    spec = pod.get("spec") or {}
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    cpus, memory, gpus = _resources(spec, problems)
    grace = _grace(spec, kill_wait_seconds, problems)
    fields = _annotations(annotations, slurm_version, problems)
    problems.extend(count_problems(pod))
    if wk.ANNOTATION_USER_ID not in annotations and default_user_id is not None:
        fields["user_id"] = default_user_id
    if problems:
        return Rejection(tuple(problems))
    return PodRequest(
        cpus=max(1, math.ceil(cpus)),
        memory_mb=max(1, math.ceil(memory / MIB)),
        gpus=gpus,
        grace_seconds=grace,
        **fields,
    )


def fingerprint(pod: Obj) -> str:
    """What admission looked at (spec and the users' annotations), hashed: a refused Pod is
    looked at again only when this changes. Of the whole Pod, also for one the cache slimmed
    (taken before, pod_cache.py)."""
    noted = (pod.get(CACHE_NOTE) or {}).get("fingerprint")
    if noted is not None:
        return str(noted)
    meta = pod.get("metadata") or {}
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k not in STATUS_ANNOTATIONS
    }
    text = json.dumps([pod.get("spec") or {}, annotations], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---- resources ------------------------------------------------------------------------------


def _resources(spec: Obj, problems: list[Problem]) -> tuple[Decimal, Decimal, int]:
    """The Pod's requests as Kubernetes counts them (kuberules.pod_requests: sidecars and
    overhead included), after every container's own requests are checked."""
    containers = spec.get("containers") or []
    if not containers:
        problems.append(Problem("spec.containers", "the Pod has no containers"))
    for index, container in enumerate(containers):
        _check_container(container, f"spec.containers[{index}]", problems, required=True)
    for index, container in enumerate(spec.get("initContainers") or []):
        _check_container(container, f"spec.initContainers[{index}]", problems, required=False)
    for resource, raw in (spec.get("overhead") or {}).items():
        _quantity(raw, f"spec.overhead.{resource}", problems)
    total = pod_requests({"spec": spec})
    zero = Decimal(0)
    gpus = total.get(wk.RESOURCE_NVIDIA_GPU, zero)
    return total.get("cpu", zero), total.get("memory", zero), int(gpus)


def _check_container(
    container: Obj, where: str, problems: list[Problem], *, required: bool
) -> None:
    """Every quantity must parse; a regular container must request CPU and memory (SUNK: Slurm
    accounts for the Pod by its requests); GPUs come whole. A limit without a request counts
    as the request, as the API server defaults it."""
    name = container.get("name") or "?"
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    for part in ("limits", "requests"):
        for resource, raw in (resources.get(part) or {}).items():
            _quantity(raw, f"{where}.resources.{part}.{resource}", problems)
    for resource, example in (("cpu", '"1"'), ("memory", '"4Gi"')):
        value = _quiet_quantity(merged.get(resource))
        if required and (value is None or value <= 0):
            problems.append(
                Problem(
                    f"{where}.resources.requests.{resource}",
                    f"container {name!r} must request {resource} (non-zero), e.g. {example}: "
                    "Slurm accounts for the Pod by its requests",
                )
            )
    gpus = _quiet_quantity(merged.get(wk.RESOURCE_NVIDIA_GPU))
    if gpus is not None and gpus != gpus.to_integral_value():
        problems.append(
            Problem(f"{where}.resources.requests.{wk.RESOURCE_NVIDIA_GPU}", "must be whole GPUs")
        )


def _quiet_quantity(raw: Any) -> Decimal | None:
    try:
        return None if raw is None else manifest_quantity(raw)
    except QuantityError:
        return None  # reported once, by _quantity


def _quantity(raw: Any, field: str, problems: list[Problem]) -> Decimal | None:
    if raw is None:
        return None
    try:
        return manifest_quantity(raw)
    except QuantityError as error:
        problems.append(Problem(field, f"not a Kubernetes quantity: {error}"))
        return None


def _grace(spec: Obj, kill_wait: int, problems: list[Problem]) -> int:
    grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    limit = kill_wait - KILL_WAIT_MARGIN_SECONDS
    if not isinstance(grace, int) or grace >= limit:
        problems.append(
            Problem(
                "spec.terminationGracePeriodSeconds",
                f"is {grace}, must be less than {limit} (Slurm KillWait {kill_wait} s minus "
                f"{KILL_WAIT_MARGIN_SECONDS} s) so the Pod is gone before Slurm kills its "
                f"placeholder job; set it to {max(limit - 1, 0)} or less",
            )
        )
        return 0
    return grace


# ---- annotations ----------------------------------------------------------------------------

_STRINGS = {
    wk.ANNOTATION_ACCOUNT: "account",
    wk.ANNOTATION_COMMENT: "comment",
    wk.ANNOTATION_CONSTRAINTS: "constraints",
    wk.ANNOTATION_PREFER: "prefer",
    wk.ANNOTATION_PARTITION: "partition",
    wk.ANNOTATION_QOS: "qos",
    wk.ANNOTATION_RESERVATION: "reservation",
    wk.ANNOTATION_CWD: "working_dir",
}
# A job "as 4294967295" is no user's: Slurm reads it as INFINITE (config.defaults). A time
# limit (minutes) and a priority are Slurm uint32s too, with the same two values reserved.
_NO_VAL = " (Slurm reads 4294967294 and 4294967295 as NO_VAL and INFINITE)"
# annotation -> (field, the values it takes): counted before int() reads them (integers.py)
_INTEGERS: dict[str, tuple[str, Bounds]] = {
    wk.ANNOTATION_PRIORITY: (
        "priority",
        Bounds(1, MAX_UNIX_ID, " (priority 0 holds a job in Slurm)", _NO_VAL),
    ),
    wk.ANNOTATION_USER_ID: ("user_id", Bounds(0, MAX_UNIX_ID, above=_NO_VAL)),
    wk.ANNOTATION_GROUP_ID: ("group_id", Bounds(0, MAX_UNIX_ID, above=_NO_VAL)),
    wk.ANNOTATION_TIMEOUT: ("timeout_minutes", Bounds(1, MAX_UNIX_ID, above=_NO_VAL)),
}
NODE_LIST_ANNOTATIONS = {  # annotation -> the PodRequest field it fills
    wk.ANNOTATION_EXCLUDED_NODES: "excluded_nodes",
    wk.ANNOTATION_REQUIRED_NODES: "required_nodes",
}


def _annotations(
    annotations: Mapping[str, str], slurm_version: tuple[int, int], problems: list[Problem]
) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, name in _STRINGS.items():
        value = annotations.get(key)
        if value is not None and value.strip():
            fields[name] = value.strip()
    for key, (name, bounds) in _INTEGERS.items():
        if key in annotations:
            number = _integer(key, annotations[key], bounds, problems)
            if number is not None:
                fields[name] = number
    for key, name in NODE_LIST_ANNOTATIONS.items():
        if key in annotations:
            fields[name] = _node_list(key, annotations[key], problems)
    if wk.ANNOTATION_EXCLUSIVE in annotations:
        fields["exclusive"] = _exclusive(
            annotations[wk.ANNOTATION_EXCLUSIVE], slurm_version, problems
        )
    if fields.get("working_dir") and not fields["working_dir"].startswith("/"):
        problems.append(
            Problem(_field(wk.ANNOTATION_CWD), "must be an absolute path on the Slurm node")
        )
    return fields


def _field(key: str) -> str:
    return f"metadata.annotations[{key!r}]"


def _integer(key: str, raw: str, bounds: Bounds, problems: list[Problem]) -> int | None:
    """Plain decimal digits, as SUNK (Go's strconv) takes them: no "+5", "1_000" or "١٢"."""
    found = bounds.read(_field(key), raw)
    if isinstance(found, Problem):
        problems.append(found)
        return None
    return found


def run_as_user(pod: Obj, default_user_id: int | None) -> int | None:
    """The uid the Pod's job runs as, read as admission reads it: its user-id, else the
    default; None for the operator's user (or a user-id admission would refuse)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if wk.ANNOTATION_USER_ID not in annotations:
        return default_user_id
    _, bounds = _INTEGERS[wk.ANNOTATION_USER_ID]
    return _integer(wk.ANNOTATION_USER_ID, annotations[wk.ANNOTATION_USER_ID], bounds, [])


def _node_list(key: str, raw: str, problems: list[Problem]) -> tuple[str, ...]:
    """A comma-separated list of Slurm node names; hostlist ranges (gpu-[1-4]) work too.

    Counted before it is expanded: the Pod's author writes it, and a few bytes of
    ranges would otherwise become millions of names in the daemon's memory."""
    try:
        nodes = hostlists.expand(re.sub(r"\s+", "", raw))
    except hostlists.HostlistTooLarge as error:  # the text is not echoed: it may be huge
        problems.append(Problem(_field(key), str(error)))
        return ()
    except hostlist.BadHostlist as error:
        problems.append(
            Problem(_field(key), f"not a list of Slurm node names ({error}), got {raw!r}")
        )
        return ()
    return tuple(dict.fromkeys(n for n in nodes if n))


def _exclusive(
    raw: str, slurm_version: tuple[int, int], problems: list[Problem]
) -> ExclusiveMode | None:
    value = raw.strip().lower()
    if value in LEGACY_EXCLUSIVE:
        return LEGACY_EXCLUSIVE[value]  # type: ignore[return-value]
    if value not in EXCLUSIVE_MODES:
        problems.append(
            Problem(
                _field(wk.ANNOTATION_EXCLUSIVE),
                f'must be one of {", ".join(EXCLUSIVE_MODES)} (or the legacy "true"), got {raw!r}',
            )
        )
        return None
    needed = MODE_NEEDS_VERSION.get(value)
    if needed and slurm_version < _version(needed):
        have = ".".join(f"{part:02d}" if i else str(part) for i, part in enumerate(slurm_version))
        problems.append(
            Problem(
                _field(wk.ANNOTATION_EXCLUSIVE),
                f"{value!r} needs Slurm {needed} or later; this cluster runs {have}: "
                'use "none" (whole node) or "user"',
            )
        )
        return None
    return value


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)
