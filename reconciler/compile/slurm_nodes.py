"""Composed node sets -> the Slurm nodes they run, with names Kubernetes and Slurm both accept."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from reconciler.compile.nodesets import NodeSet
from reconciler.config.keys import NODE_DEFINITION
from reconciler.config.limits import MAX_NODES
from reconciler.config.value_types import default_in
from reconciler.errors import CompileError
from reconciler.kuberules.quantity import QuantityError, manifest_quantity
from reconciler.kuberules.validation import is_dns1123_label

# Matched whole (fullmatch): `$` also matches before a final newline, which would end a line
# of slurm.conf.
_FEATURE = re.compile(r"[A-Za-z0-9_.\-]+")
_GRES_TYPE = re.compile(r"[A-Za-z0-9_.\-]+")
# A StatefulSet's pods carry a controller-revision-hash label of "<name>-<hash>" (<= 63
# chars), so the StatefulSet name itself must stay within 52.
MAX_STATEFULSET_NAME = 52
_MIB = Decimal(2**20)


@dataclass(frozen=True)
class Gres:
    type: str | None
    count: int

    def __str__(self) -> str:
        return f"gpu:{self.type}:{self.count}" if self.type else f"gpu:{self.count}"


@dataclass(frozen=True)
class SlurmNodeSpec:
    """What every Slurm node of one node set looks like."""

    nodeset: str
    statefulset: str
    replicas: int
    max_replicas: int
    cpus: int
    real_memory_mb: int
    gres: Gres | None
    features: tuple[str, ...]
    min_replicas: int | None = None  # the floor power saving keeps warm (None: not set)
    mem_spec_limit_mb: int | None = None  # MemSpecLimit: kept from jobs for slurmd and the system

    def node_names(self) -> list[str]:
        """The Slurm nodes that run now: the StatefulSet's Pods."""
        return [f"{self.statefulset}-{ordinal}" for ordinal in range(self.replicas)]

    def spare_names(self) -> list[str]:
        """Declared `State=FUTURE` up to maxReplicas, so scaling up needs no slurmctld restart."""
        return [f"{self.statefulset}-{o}" for o in range(self.replicas, self.max_replicas)]


def statefulset_name(release: str, nodeset: str) -> str:
    return f"{release}-{nodeset}"


def slurm_node_specs(
    release: str, enabled: list[tuple[NodeSet, dict[str, Any]]]
) -> list[SlurmNodeSpec]:
    """The specs of the enabled node sets, refused once their Slurm nodes (spares included)
    pass MAX_NODES in all: each count is capped where it is written, but a thousand node sets
    under the cap still add up to millions of names. Counted before any name is made."""
    specs: list[SlurmNodeSpec] = []
    total = 0
    for nodeset, definition in enabled:
        specs.append(slurm_node_spec(release, nodeset, definition))
        total += specs[-1].max_replicas
        if total > MAX_NODES:
            raise CompileError(
                f"the node definitions up to {nodeset.name!r} declare {total:,} Slurm nodes "
                f"(replicas and spares up to maxReplicas); the limit is {MAX_NODES:,} in all",
                where=nodeset.where,
                hint="the largest Slurm clusters have about 10,000 nodes (Frontier: 9,408): "
                "lower maxReplicas, or disable node definitions this cluster does not run",
            )
    return specs


def slurm_node_spec(release: str, nodeset: NodeSet, definition: dict[str, Any]) -> SlurmNodeSpec:
    """`definition` is the composed, plain definition of an enabled node set."""
    name = _checked_names(release, nodeset)
    replicas = int(definition.get("replicas", default_in(NODE_DEFINITION, "replicas")))
    max_replicas = int(definition.get("maxReplicas", replicas))
    if max_replicas < replicas:
        raise CompileError(
            f"node definition {nodeset.name!r}: replicas {replicas} exceeds maxReplicas "
            f"{max_replicas}",
            where=nodeset.where,
            hint="raise maxReplicas (Slurm declares that many nodes) or lower replicas",
        )
    min_replicas = definition.get("minReplicas")
    if min_replicas is not None and not 0 <= int(min_replicas) <= replicas:
        raise CompileError(
            f"node definition {nodeset.name!r}: minReplicas {min_replicas} is not between 0 "
            f"and replicas ({replicas})",
            where=nodeset.where,
            hint="minReplicas is the floor kept powered up; replicas the most that run",
        )
    cpus = _cpus(nodeset, definition)  # checked before memory: a bare definition lacks both
    real_memory_mb = _memory_mb(nodeset, definition)
    return SlurmNodeSpec(
        min_replicas=None if min_replicas is None else int(min_replicas),
        mem_spec_limit_mb=_mem_spec_limit(nodeset, definition, real_memory_mb),
        nodeset=nodeset.name,
        statefulset=name,
        replicas=replicas,
        max_replicas=max_replicas,
        cpus=cpus,
        real_memory_mb=real_memory_mb,
        gres=_gres(nodeset, definition.get("gresGpu")),
        features=_features(nodeset, definition.get("features") or []),
    )


def _checked_names(release: str, nodeset: NodeSet) -> str:
    if is_dns1123_label(nodeset.name):
        raise CompileError(
            f"node definition name {nodeset.name!r} cannot name Slurm nodes or Pods",
            where=nodeset.where,
            hint="use lowercase letters, digits and '-' only, starting and ending with a "
            f"letter or digit (e.g. {_suggest(nodeset.name)!r})",
        )
    name = statefulset_name(release, nodeset.name)
    if len(name) > MAX_STATEFULSET_NAME:
        raise CompileError(
            f"StatefulSet name {name!r} is {len(name)} characters; Kubernetes allows "
            f"{MAX_STATEFULSET_NAME}",
            where=nodeset.where,
            hint="shorten the node definition name (or the release name)",
        )
    return name


def _suggest(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "nodes"


def _resource(definition: dict[str, Any], key: str) -> tuple[Any, str] | None:
    """Slurm sizes a node from the slurmd container's limit, else its request (SUNK's "Schedule
    Kubernetes Pods with Slurm": "lower the requests ... keep the limits high so slurm jobs can
    still use the full node")."""
    resources = definition.get("resources") or {}
    for side in ("limits", "requests"):
        value = (resources.get(side) or {}).get(key)
        if value is not None:
            return value, f"resources.{side}.{key}"
    return None


def _cpus(nodeset: NodeSet, definition: dict[str, Any]) -> int:
    found = _resource(definition, "cpu")
    if found is None:
        raise CompileError(
            f"node definition {nodeset.name!r} has zero CPUs: no resources.limits.cpu or "
            "resources.requests.cpu",
            where=nodeset.where,
            hint="set resources.requests.cpu (or add a node type layer such as h100 or cpu-epyc)",
        )
    cpus = math.floor(_quantity(nodeset, *found))
    if cpus < 1:
        raise CompileError(
            f"node definition {nodeset.name!r} has zero CPUs ({found[1]}={found[0]!r}); a Slurm "
            "node needs at least 1",
            where=nodeset.where,
            hint=f"set {found[1]} to 1 or more",
        )
    return cpus


def _memory_mb(nodeset: NodeSet, definition: dict[str, Any]) -> int:
    found = _resource(definition, "memory")
    if found is None:
        raise CompileError(
            f"node definition {nodeset.name!r} has no memory: no resources.limits.memory or "
            "resources.requests.memory",
            where=nodeset.where,
            hint="set resources.requests.memory (e.g. 16Gi); Slurm needs RealMemory to place jobs",
        )
    megabytes = math.floor(_quantity(nodeset, *found) / _MIB)
    if megabytes < 1:
        raise CompileError(
            f"node definition {nodeset.name!r}: {found[1]}={found[0]!r} is under 1Mi",
            where=nodeset.where,
        )
    return megabytes


def _mem_spec_limit(
    nodeset: NodeSet, definition: dict[str, Any], real_memory_mb: int
) -> int | None:
    """`memSpecLimit` (MiB, Slurm's unit): memory Slurm keeps from jobs for slurmd and the system
    (SUNK's "Schedule Kubernetes Pods with Slurm": "MemSpecLimit can be used in the slurm NodeSet
    configuration to reserve memory for slurmd and other system Pods"). It must leave the jobs some
    of RealMemory."""
    limit = definition.get("memSpecLimit")
    if limit is None:
        return None
    if not 1 <= int(limit) < real_memory_mb:
        raise CompileError(
            f"node definition {nodeset.name!r}: memSpecLimit {limit} MiB is not between 1 and "
            f"its RealMemory ({real_memory_mb} MiB, from the slurmd container's memory): "
            "Slurm keeps MemSpecLimit from jobs, so it must leave them some",
            where=nodeset.where,
            hint=f"memSpecLimit is in MiB (megabytes, as Slurm reads it): e.g. "
            f"{max(1, real_memory_mb // 10)} keeps a tenth of the node for slurmd and the system",
        )
    return int(limit)


def _quantity(nodeset: NodeSet, value: Any, key: str) -> Decimal:
    try:
        return manifest_quantity(value)
    except QuantityError as exc:
        raise CompileError(
            f"node definition {nodeset.name!r}: {key}: {exc}", where=nodeset.where
        ) from None


def _gres(nodeset: NodeSet, value: Any) -> Gres | None:
    if value in (None, ""):
        return None
    parts = str(value).split(":")
    gres_type, count = (None, parts[0]) if len(parts) == 1 else (parts[0], parts[-1])
    if (
        len(parts) > 2
        or not count.isascii()
        or not count.isdigit()
        or int(count) < 1
        or (gres_type is not None and not _GRES_TYPE.fullmatch(gres_type))
    ):
        raise CompileError(
            f"node definition {nodeset.name!r}: gresGpu {value!r} is not TYPE:COUNT",
            where=nodeset.where,
            hint="write it as SUNK's 'Slurm Workload Manager' page does, e.g. gresGpu: h100:8 "
            "(or just a count: 8)",
        )
    return Gres(gres_type, int(count))


def _features(nodeset: NodeSet, features: list[Any]) -> tuple[str, ...]:
    # SUNK advertises the node definition's own name as a feature too.
    out = {nodeset.name: None}  # first-seen order, and a lookup that keeps a long list linear
    for feature in features:
        text = str(feature)
        if not _FEATURE.fullmatch(text):
            raise CompileError(
                f"node definition {nodeset.name!r}: feature {text!r} is not a valid Slurm "
                "feature name",
                where=nodeset.where,
                hint="use letters, digits, '_', '.' and '-' only (no spaces, commas or '|&')",
            )
        out.setdefault(text)
    return tuple(out)
