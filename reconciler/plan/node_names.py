"""The Node labels and extended resources a node set's slurmd Pods need, against the Nodes of
the cluster (pure): a name no Node carries keeps those Pods Pending, and Kubernetes says only
"0/N nodes are available". The shipped layers use CoreWeave's names by default, which exist
only on CoreWeave's clusters; the warning names the node set, the name and the
compute.clusterLabels key that renames it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler import wellknown as wk
from reconciler.config.cluster_labels import (
    DEFAULTS,
    RESOURCE_KEYS,
    SCHEDULED_POD_GPU_RESOURCES,
    SECOND_RESOURCE_DOCS,
    key_for,
)
from reconciler.errors import Location
from reconciler.objects import Obj

# Operators a Node without the label never satisfies (NotIn and DoesNotExist it does).
_NEEDS_LABEL = ("In", "Exists", "Gt", "Lt")


@dataclass(frozen=True)
class NodeNames:
    """What one Kubernetes Node carries: its label keys and the resources it can allocate."""

    labels: frozenset[str]
    resources: frozenset[str]


@dataclass(frozen=True)
class NodeSetNeeds:
    nodeset: str
    labels: tuple[str, ...]  # label keys every way of placing its Pods needs
    resources: tuple[str, ...]  # extended resources its slurmd container requests


def needs_of(statefulsets: Iterable[Obj]) -> list[NodeSetNeeds]:
    """Each compute StatefulSet's needs, from its rendered Pod template."""
    found = []
    for obj in statefulsets:
        nodeset = ((obj.get("metadata") or {}).get("labels") or {}).get(wk.LABEL_NODESET)
        if obj.get("kind") != "StatefulSet" or not nodeset:
            continue
        spec = obj["spec"]["template"]["spec"]
        found.append(NodeSetNeeds(str(nodeset), tuple(sorted(_labels(spec))),
                                  tuple(sorted(_resources(spec["containers"][0])))))  # fmt: skip
    return found


def _labels(spec: Obj) -> set[str]:
    """nodeSelector's keys, plus the keys every required node-affinity term needs: the terms
    are alternatives, so a key counts only when each term asks for it."""
    keys = {str(k) for k in spec.get("nodeSelector") or {}}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = [{str(e["key"]) for e in term.get("matchExpressions") or []
              if e.get("operator") in _NEEDS_LABEL}
             for term in required.get("nodeSelectorTerms") or []]  # fmt: skip
    if terms:
        keys |= set.intersection(*terms)
    return keys


def _resources(container: Obj) -> set[str]:
    """Extended resources (a prefixed name: cpu, memory, hugepages-* are every Node's)."""
    resources = container.get("resources") or {}
    return {str(name) for part in ("requests", "limits") for name in resources.get(part) or {}
            if "/" in str(name)}  # fmt: skip


def missing_on_nodes(
    needs: Sequence[NodeSetNeeds],
    nodes: Sequence[NodeNames],
    values: Obj,
    wheres: dict[str, Location] | None = None,
) -> list[str]:
    """A warning for each name a node set needs that no Node carries."""
    labels = set().union(*(n.labels for n in nodes)) if nodes else set()
    offered = set().union(*(n.resources for n in nodes)) if nodes else set()
    out = []
    for need in needs:
        where = f"{(wheres or {}).get(need.nodeset) or 'values'}: warning: "
        for label in need.labels:
            if label not in labels:
                out.append(where + _text(need.nodeset, "selects the Node label", label,
                                         "carries", len(nodes), values))  # fmt: skip
        for resource in need.resources:
            if resource not in offered:
                out.append(where + _text(need.nodeset, "requests the resource", resource,
                                         "offers", len(nodes), values))  # fmt: skip
    return out


def _text(nodeset: str, what: str, name: str, verb: str, count: int, values: Obj) -> str:
    text = (
        f"node set {nodeset!r} {what} {name}, which none of the cluster's {count} Nodes "
        f"{verb}: its slurmd Pods will stay Pending"
    )
    key = key_for(name, values)
    if key is not None:
        default = DEFAULTS[key.rpartition(".")[2]]
        named = "CoreWeave's name, the shipped layers' default" if name == default else "its name"
        return text + f" ({named}); set {key} to the name your Nodes carry" + _not_theirs(key)
    return text + "; change the node definition (or its layers) to a name your Nodes carry"


def _not_theirs(key: str) -> str:
    """The GPU resource: not the one the scheduler's Pods request (config refuses it)."""
    if key.rpartition(".")[2] not in RESOURCE_KEYS:
        return ""
    theirs = " or ".join(SCHEDULED_POD_GPU_RESOURCES)
    return (
        f" (not {theirs}, which the scheduler's GPU Pods request: advertise a second "
        f"resource per GPU Node, {SECOND_RESOURCE_DOCS})"
    )


def unchecked_offline(needs: Sequence[NodeSetNeeds], values: Obj) -> list[str]:
    """Offline, one warning for the CoreWeave names node sets need: no Nodes to check."""
    coreweave = {name for name in DEFAULTS.values() if key_for(name, values) is not None}
    used = {
        need.nodeset: [n for n in (*need.labels, *need.resources) if n in coreweave]
        for need in needs
    }
    used = {nodeset: names for nodeset, names in used.items() if names}
    if not used:
        return []
    names = sorted({n for found in used.values() for n in found})
    return [
        f"values: warning: node sets {', '.join(map(repr, sorted(used)))} need "
        f"{', '.join(names)}, which exist only on CoreWeave's clusters; offline no Node is "
        "checked for them (`plan` against the cluster is); elsewhere set "
        "compute.clusterLabels to your cluster's names"
        + (_not_theirs("gpuResource") if DEFAULTS["gpuResource"] in names else "")
    ]


def nodeset_wheres(nodesets: Iterable[Any]) -> dict[str, Location]:
    return {str(n.name): n.where for n in nodesets}


def names_iter(nodes: Iterable[Obj]) -> Iterator[NodeNames]:
    """Plain Node objects (as the API server lists them) -> what each carries."""
    for node in nodes:
        labels = ((node.get("metadata") or {}).get("labels")) or {}
        status = node.get("status") or {}
        resources = {**(status.get("capacity") or {}), **(status.get("allocatable") or {})}
        offered = {str(k) for k, v in resources.items() if str(v) not in ("0", "")}
        yield NodeNames(frozenset(map(str, labels)), frozenset(offered))
