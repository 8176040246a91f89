"""Inter-pod affinity, anti-affinity and topology spread, as Nodes to exclude (pure).

Slurm can only be steered by excluding nodes (ExcNodeList): turning a candidate pool into
required nodes would pin a job to nodes Slurm may never free. So every required pod (anti-)
affinity term and every DoNotSchedule spread constraint becomes a set of Kubernetes Nodes
the Pod must not go to, evaluated against the Pods already placed, as kube-scheduler 1.20's
InterPodAffinity and PodTopologySpread filters decide it.

Reading the rules, and refusing those we cannot honour, is `pod_rules.py`: what a rule says
does not depend on the placed Pods, what it excludes does, and that is this module.
`excluded_nodes` assumes a Pod without `pod_rules.topology_problems` and skips a term or
constraint it cannot read.

A Node without a rule's topologyKey is in no domain, as in kube-scheduler: pod affinity and
spreading keep the Pod off it, anti-affinity does not. tests/unit/test_kube_*.py run
kube-scheduler 1.20.2's own filter test tables against this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.kuberules.label_selector import selector_error, selector_matches
from reconciler.kuberules.node_affinity import node_matches
from reconciler.kuberules.pod_rules import (
    max_skew,
    pod_labels,
    pod_namespace,
    required_terms,
    spread_rules,
)
from reconciler.objects import ReadObj as Obj


@dataclass(frozen=True)
class PlacedPod:
    """A Pod already bound to a Node, as far as the rules of other Pods can see it."""

    namespace: str
    labels: Mapping[str, str]
    node: str  # the Kubernetes Node it is bound to
    terminating: bool = False  # deletionTimestamp set: spreading does not count it


def placed_pod(pod: Obj) -> PlacedPod:
    """A bound Pod (spec.nodeName set) as the rules of other Pods see it."""
    meta = pod["metadata"]
    return PlacedPod(
        namespace=meta.get("namespace") or "default",
        labels=meta.get("labels") or {},
        node=pod["spec"]["nodeName"],
        terminating=bool(meta.get("deletionTimestamp")),
    )


# ---- public API -----------------------------------------------------------------------------


def excluded_nodes(
    pod: Obj,
    placed: Sequence[PlacedPod],
    node_labels: Mapping[str, Mapping[str, str]],
    candidates: Iterable[str],
    hosts: Iterable[str] | None = None,
) -> set[str]:
    """The candidates the Pod must not go to for its pod (anti-)affinity and spread rules.

    `node_labels` maps every Node name we know to its labels; `candidates` are the Nodes that
    could take the Pod otherwise. Only ever a subset of `candidates`: never a requirement.
    `hosts` are the Nodes the Pod could ever run on, whatever its rules (see `spread_counts`);
    None: every Node of `node_labels`, as kube-scheduler."""
    pool = list(dict.fromkeys(candidates))
    topology = _Topology(node_labels)
    return (
        _anti_affinity_excluded(pod, placed, topology, pool)
        | _affinity_excluded(pod, placed, topology, pool)
        | _spread_excluded(pod, placed, topology, pool, hosts)
    )


def excluded_by_rule(
    pod: Obj,
    placed: Sequence[PlacedPod],
    bound: Iterable[Obj],
    node_labels: Mapping[str, Mapping[str, str]],
    candidates: Iterable[str],
) -> dict[str, set[str]]:
    """The candidates each kind of rule keeps the Pod off, for a caller that says why as
    kube-scheduler does: "spreadLabel" (a Node lacks a constraint's key), "spread",
    "podAffinity", "podAntiAffinity" and "existingAntiAffinity" (`excluded_by_placed_rules`
    over `bound`). Every Node of `node_labels` may host the Pod, as for kube-scheduler."""
    pool = list(dict.fromkeys(candidates))
    topology = _Topology(node_labels)
    keys = [rule.topology_key for rule in spread_rules(pod)]
    return {
        "spreadLabel": {n for n in pool if any(k not in topology.labels(n) for k in keys)},
        "spread": _spread_excluded(pod, placed, topology, pool, None),
        "podAffinity": _affinity_excluded(pod, placed, topology, pool),
        "podAntiAffinity": _anti_affinity_excluded(pod, placed, topology, pool),
        "existingAntiAffinity": excluded_by_placed_rules(pod, bound, node_labels, pool),
    }


def excluded_by_placed_rules(
    pod: Obj,
    placed: Iterable[Obj],
    node_labels: Mapping[str, Mapping[str, str]],
    candidates: Iterable[str],
) -> set[str]:
    """The candidates the Pod must not go to because of the required anti-affinity of Pods already
    bound (kube-scheduler's symmetric check): a bound Pod whose term selects this Pod keeps it out
    of the bound Pod's domain. `placed` are bound Pods (dicts, spec.nodeName set), typically the
    ones this scheduler placed: on Slurm nodes other Pods are not supported (SUNK's "SUNK Pod
    Scheduler" page). As kube-scheduler, a bound Pod one of whose anti-affinity selectors is invalid
    has no anti-affinity terms at all."""
    pool = list(dict.fromkeys(candidates))
    topology = _Topology(node_labels)
    namespace, labels = pod_namespace(pod), pod_labels(pod)
    excluded: set[str] = set()
    for other in placed:
        node = (other.get("spec") or {}).get("nodeName")
        if not node or other is pod:
            continue
        terms = [rule for rule in required_terms(other) if rule.kind == "podAntiAffinity"]
        if any(selector_error(rule.selector) for rule in terms):
            continue
        for rule in terms:
            key = rule.topology_key
            if not key or not rule.matches(namespace, labels):
                continue
            domain = topology.value(node, key)
            if domain is not None:
                excluded |= {n for n in pool if topology.value(n, key) == domain}
    return excluded


def spread_counts(
    pod: Obj,
    placed: Sequence[PlacedPod],
    node_labels: Mapping[str, Mapping[str, str]],
    hosts: Iterable[str] | None = None,
) -> dict[tuple[str, str], int]:
    """The Pod's DoNotSchedule spread domains, (topologyKey, value), each with the number of
    placed Pods its constraint selects: kube-scheduler 1.20's TpPairToMatchNum.

    A domain is a value of the key on a Node of `hosts` (None: every Node of `node_labels`)
    that passes the Pod's nodeSelector and required node affinity and carries every
    constraint's key; taints do not matter. A placed Pod of the Pod's namespace counts, unless
    terminating, wherever its Node's value is a domain, even on a Node that is not in one
    itself (fails the node affinity, lacks another constraint's key): 1.20 counts so."""
    rules = spread_rules(pod)
    topology = _Topology(node_labels)
    keys = [rule.topology_key for rule in rules]
    counts: dict[tuple[str, str], int] = {}
    for node in node_labels if hosts is None else hosts:
        labels = topology.labels(node)
        if node in node_labels and all(key in labels for key in keys) and node_matches(pod, labels):
            counts.update({(key, labels[key]): 0 for key in keys})
    for placed_pod in placed:
        if placed_pod.terminating or placed_pod.node not in node_labels:
            continue
        labels = topology.labels(placed_pod.node)
        for rule in rules:
            pair = (rule.topology_key, labels.get(rule.topology_key, ""))
            if pair in counts and rule.matches(placed_pod.namespace, placed_pod.labels):
                counts[pair] += 1
    return counts


# ---- topology -------------------------------------------------------------------------------


class _Topology:
    """Node labels. A Node without a key is in no domain of that key (hostname included, as in
    kube-scheduler; every kubelet sets kubernetes.io/hostname); a Node we do not know has no
    labels."""

    def __init__(self, node_labels: Mapping[str, Mapping[str, str]]) -> None:
        self.node_labels = node_labels

    def labels(self, node: str) -> Mapping[str, str]:
        return self.node_labels.get(node) or {}

    def value(self, node: str, key: str) -> str | None:
        return self.labels(node).get(key)


def _anti_affinity_excluded(
    pod: Obj, placed: Sequence[PlacedPod], topology: _Topology, pool: list[str]
) -> set[str]:
    """A Node is out when a Pod matching a term sits in its domain; a Node without the key is
    in no domain, so no term keeps the Pod off it."""
    excluded: set[str] = set()
    for rule in required_terms(pod):
        key = rule.topology_key
        if rule.kind != "podAntiAffinity" or not key:
            continue
        taken = {topology.value(p.node, key) for p in placed if rule.matches(p.namespace, p.labels)}
        taken.discard(None)
        excluded.update(node for node in pool if topology.value(node, key) in taken)
    return excluded


def _affinity_excluded(
    pod: Obj, placed: Sequence[PlacedPod], topology: _Topology, pool: list[str]
) -> set[str]:
    """A Node is in when, for every term, a placed Pod shares its domain. As kube-scheduler, a
    placed Pod counts only if it matches every term, and a Pod matching its own terms may start
    the group anywhere when no placed Pod does; a Node must carry every key either way."""
    rules = [r for r in required_terms(pod) if r.kind == "podAffinity" and r.topology_key]
    if not rules:
        return set()
    domains: list[set[str]] = [set() for _ in rules]
    for placed_pod in placed:
        if all(rule.matches(placed_pod.namespace, placed_pod.labels) for rule in rules):
            for values, rule in zip(domains, rules, strict=True):
                value = topology.value(placed_pod.node, rule.topology_key)
                if value is not None:
                    values.add(value)
    first = not any(domains) and all(
        rule.matches(pod_namespace(pod), pod_labels(pod)) for rule in rules
    )
    excluded = set()
    for node in pool:
        found = [topology.value(node, rule.topology_key) for rule in rules]
        if None in found or not (first or all(map(set.__contains__, domains, found))):
            excluded.add(node)
    return excluded


def _spread_excluded(
    pod: Obj,
    placed: Sequence[PlacedPod],
    topology: _Topology,
    pool: list[str],
    hosts: Iterable[str] | None,
) -> set[str]:
    """DoNotSchedule spreading, as kube-scheduler 1.20's Filter: a Node without every key is
    out; else, per constraint, the Pods in its domain, plus one if the Pod matches its own
    selector, may exceed the least loaded domain (`spread_counts`) by maxSkew at the most."""
    rules = spread_rules(pod)
    if not rules:
        return set()
    counts = spread_counts(pod, placed, topology.node_labels, hosts)
    floor: dict[str, int] = {}
    for (key, _), count in counts.items():
        floor[key] = min(count, floor.get(key, count))
    excluded = set()
    for node in pool:
        labels = topology.labels(node)
        for rule in rules:
            key = rule.topology_key
            self_match = int(selector_matches(rule.selector, pod_labels(pod)))
            if key not in labels:
                excluded.add(node)
                break
            if key not in floor:
                continue  # no domain at all: kube-scheduler's minimum is MaxInt32
            skew = counts.get((key, labels[key]), 0) + self_match - floor[key]
            if skew > (max_skew(rule.body) or 1):
                excluded.add(node)
                break
    return excluded
