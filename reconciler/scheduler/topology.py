"""Inter-pod affinity, anti-affinity and topology spread, as Nodes to exclude (pure).

Slurm can only be steered by excluding nodes (ExcNodeList): turning a candidate pool into
required nodes would pin a job to nodes Slurm may never free. So every required pod (anti-)
affinity term and every DoNotSchedule spread constraint becomes a set of Kubernetes Nodes
the Pod must not go to, evaluated against the Pods already placed, as kube-scheduler 1.20's
InterPodAffinity and PodTopologySpread filters decide it. Preferred terms and ScheduleAnyway
constraints are preferences, not rules, and are ignored.

What this module cannot honour (namespaceSelector, minDomains, the node inclusion policies,
matchLabelKeys) and what kube-scheduler would not schedule either (a selector
metav1.LabelSelectorAsSelector refuses) is reported by `topology_problems`, so the Pod is refused
with a reason rather than placed somewhere its rules do not hold. `excluded_nodes` assumes a Pod
without problems and skips a term or constraint it cannot read.

A Node without a rule's topologyKey is in no domain, as in kube-scheduler: pod affinity and
spreading keep the Pod off it, anti-affinity does not. tests/unit/test_kube_*.py run
kube-scheduler 1.20.2's own filter test tables against this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from reconciler.kuberules.label_selector import selector_error, selector_matches, selector_string
from reconciler.kuberules.node_affinity import node_matches
from reconciler.scheduler.admission import Problem

HOSTNAME: Final = "kubernetes.io/hostname"
REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"
SPREAD: Final = "spec.topologySpreadConstraints"
HARD: Final = "DoNotSchedule"
WHEN_UNSATISFIABLE: Final = (HARD, "ScheduleAnyway")
# Spread constraint fields newer than 1.20 whose meaning we do not reproduce, and what to do.
UNSUPPORTED_SPREAD_FIELDS: Final = {
    "minDomains": "remove it; every domain holding a Node the Pod may use counts",
    "nodeAffinityPolicy": "remove it; spreading counts the Nodes that pass the Pod's node "
    "affinity, as the default (Honor) does",
    "nodeTaintsPolicy": "remove it; spreading counts the Nodes that pass the Pod's node "
    "affinity, tainted or not, as Kubernetes 1.20 does (the default, Ignore)",
    "matchLabelKeys": "remove it and put those labels (with their values) in labelSelector",
}

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class PlacedPod:
    """A Pod already bound to a Node, as far as the rules of other Pods can see it."""

    namespace: str
    labels: Mapping[str, str]
    node: str  # the Kubernetes Node it is bound to
    terminating: bool = False  # deletionTimestamp set: spreading does not count it


@dataclass(frozen=True)
class _Rule:
    """A required (anti-)affinity term or a spread constraint, read once."""

    field: str  # where it is in the Pod, for Problems
    kind: str  # "podAffinity", "podAntiAffinity" or "spread"
    body: Obj
    namespaces: tuple[str, ...]
    selector: Obj | None  # None matches no Pod, {} every Pod

    @property
    def topology_key(self) -> str:
        return str(self.body.get("topologyKey") or "")

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return namespace in self.namespaces and selector_matches(self.selector, labels)


# ---- public API -----------------------------------------------------------------------------


def needs_placed_pods(pod: Obj) -> bool:
    """Whether the Pod has a rule about other Pods, so the caller must list the placed ones."""
    return bool(_hard_rules(pod))


def selector_queries(pod: Obj) -> list[tuple[str, str]]:
    """(namespace, labelSelector) pairs to list the placed Pods the rules can see, so the caller
    asks the API server only for those. A query may return more than the rule matches (an
    expression it cannot render is left out); `excluded_nodes` matches again, exactly."""
    queries: dict[tuple[str, str], None] = {}
    for rule in _hard_rules(pod):
        if rule.selector is None:
            continue  # matches no Pod: nothing to list
        text = selector_string(rule.selector)
        for namespace in rule.namespaces:
            queries[(namespace, text)] = None
    return list(queries)


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
    keys = [rule.topology_key for rule in _spread_rules(pod)]
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
    """The candidates the Pod must not go to because of the required anti-affinity of Pods
    already bound (kube-scheduler's symmetric check): a bound Pod whose term selects this Pod
    keeps it out of the bound Pod's domain. `placed` are bound Pods (dicts, spec.nodeName
    set), typically the ones this scheduler placed: on Slurm nodes other Pods are not
    supported (seed 003). As kube-scheduler, a bound Pod one of whose anti-affinity
    selectors is invalid has no anti-affinity terms at all."""
    pool = list(dict.fromkeys(candidates))
    topology = _Topology(node_labels)
    namespace, labels = _namespace(pod), _labels(pod)
    excluded: set[str] = set()
    for other in placed:
        node = (other.get("spec") or {}).get("nodeName")
        if not node or other is pod:
            continue
        terms = [rule for rule in _terms(other) if rule.kind == "podAntiAffinity"]
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
    rules = _spread_rules(pod)
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


def topology_problems(pod: Obj) -> list[Problem]:
    """What in the Pod's inter-pod rules we cannot honour, each with what to do instead."""
    problems: list[Problem] = []
    for rule in _terms(pod):
        if rule.body.get("namespaceSelector") is not None:
            problems.append(
                Problem(
                    f"{rule.field}.namespaceSelector",
                    "namespaceSelector is not supported (inter-pod affinity follows Kubernetes "
                    "1.20); list the namespaces in namespaces instead",
                )
            )
        problems.extend(_rule_problems(rule))
    problems.extend(_preferred_problems(pod))
    for index, constraint in enumerate(_spread_constraints(pod)):
        problems.extend(_constraint_problems(pod, index, constraint))
    return problems


def unlabelled_keys(
    pod: Obj, node_labels: Mapping[str, Mapping[str, str]], candidates: Iterable[str]
) -> list[Problem]:
    """Rules whose topologyKey no candidate Node carries: they would exclude every Node (or, for
    anti-affinity, none), so the Pod is refused with a reason instead. No candidates, no
    problems: the caller has a better reason to give then."""
    pool = list(candidates)
    if not pool:
        return []
    topology = _Topology(node_labels)
    problems = []
    for rule in _hard_rules(pod):
        key = rule.topology_key
        if key and not any(topology.value(node, key) is not None for node in pool):
            problems.append(
                Problem(
                    f"{rule.field}.topologyKey",
                    f"topologyKey {key!r} is a label of none of the Nodes that host Slurm nodes, "
                    "so this rule cannot be honoured; label those Nodes or use "
                    f"{HOSTNAME}",
                )
            )
    return problems


def gang_rule_problems(pod: Obj, members: Iterable[Obj]) -> list[Problem]:
    """Rules that select other members of the Pod's gang. Every member gets a node of its own
    in one job, so hostname anti-affinity and hostname spread between members hold by
    construction; any other rule between members would need their placement decided
    together, which one Slurm job cannot express here: refused, not ignored."""
    others = [m for m in members if m is not pod]
    problems = []
    for rule in _hard_rules(pod):
        if rule.kind != "podAffinity" and rule.topology_key == HOSTNAME:
            continue
        if any(rule.matches(_namespace(m), _labels(m)) for m in others):
            problems.append(
                Problem(
                    rule.field,
                    "selects other members of the Pod's gang; between the members of a gang "
                    f"only anti-affinity and spread on {HOSTNAME} are honoured (each member "
                    "gets a node of its own): narrow the selector to Pods outside the gang",
                )
            )
    return problems


# ---- reading the Pod ------------------------------------------------------------------------


def _namespace(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "default")


def _labels(pod: Obj) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def _terms(pod: Obj) -> list[_Rule]:
    """Required affinity and anti-affinity terms; preferred ones are ignored (soft)."""
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    rules = []
    for kind in ("podAffinity", "podAntiAffinity"):
        for index, term in enumerate((affinity.get(kind) or {}).get(REQUIRED) or ()):
            # An empty namespaces list means the Pod's own namespace (no namespaceSelector).
            namespaces = tuple(term.get("namespaces") or ()) or (_namespace(pod),)
            field = f"spec.affinity.{kind}.{REQUIRED}[{index}]"
            rules.append(_Rule(field, kind, term, namespaces, term.get("labelSelector")))
    return rules


def _spread_constraints(pod: Obj) -> list[Obj]:
    return list((pod.get("spec") or {}).get("topologySpreadConstraints") or ())


def _hard_rules(pod: Obj) -> list[_Rule]:
    """Every rule that can exclude a Node: required terms and DoNotSchedule constraints."""
    rules = _terms(pod)
    for index, constraint in enumerate(_spread_constraints(pod)):
        if constraint.get("whenUnsatisfiable") == HARD:
            rules.append(_spread_rule(pod, index, constraint))
    return rules


def _spread_rule(pod: Obj, index: int, constraint: Obj) -> _Rule:
    """Spreading counts Pods of the Pod's own namespace only."""
    field = f"{SPREAD}[{index}]"
    selector = constraint.get("labelSelector")
    return _Rule(field, "spread", constraint, (_namespace(pod),), selector)


def _spread_rules(pod: Obj) -> list[_Rule]:
    """The DoNotSchedule constraints `excluded_nodes` can read (a key, a maxSkew)."""
    rules = [r for r in _hard_rules(pod) if r.kind == "spread" and r.topology_key]
    return [r for r in rules if _max_skew(r.body) is not None]


# ---- problems -------------------------------------------------------------------------------


def _rule_problems(rule: _Rule) -> list[Problem]:
    problems = []
    if not rule.topology_key:
        problems.append(
            Problem(
                f"{rule.field}.topologyKey",
                f"a topologyKey is required, e.g. {HOSTNAME} (one Node) or "
                "topology.kubernetes.io/zone",
            )
        )
    return problems + _selector_problems(rule.field, rule.selector)


def _selector_problems(field: str, selector: Obj | None) -> list[Problem]:
    """A selector Kubernetes cannot build: kube-scheduler schedules such a Pod nowhere (and the
    API server refuses it), so neither do we."""
    error = selector_error(selector)
    if error is None:
        return []
    return [Problem(f"{field}.labelSelector", f"{error} (not a valid label selector)")]


def _preferred_problems(pod: Obj) -> list[Problem]:
    """Preferred terms are ignored, but one with an invalid selector makes kube-scheduler 1.20
    refuse the whole Pod (the Pod's affinity does not parse)."""
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    problems = []
    for kind in ("podAffinity", "podAntiAffinity"):
        for index, weighted in enumerate((affinity.get(kind) or {}).get(PREFERRED) or ()):
            term = (weighted or {}).get("podAffinityTerm") or {}
            field = f"spec.affinity.{kind}.{PREFERRED}[{index}].podAffinityTerm"
            problems.extend(_selector_problems(field, term.get("labelSelector")))
    return problems


def _constraint_problems(pod: Obj, index: int, constraint: Obj) -> list[Problem]:
    field = f"{SPREAD}[{index}]"
    when = constraint.get("whenUnsatisfiable")
    if when not in WHEN_UNSATISFIABLE:
        return [
            Problem(
                f"{field}.whenUnsatisfiable",
                f"must be {' or '.join(WHEN_UNSATISFIABLE)}, got {when!r}",
            )
        ]
    if when != HARD:
        # A preference, ignored; but kube-scheduler refuses the Pod if its selector is invalid.
        return _selector_problems(field, constraint.get("labelSelector"))
    problems = [
        Problem(f"{field}.{name}", f"not supported (spreading follows Kubernetes 1.20): {advice}")
        for name, advice in UNSUPPORTED_SPREAD_FIELDS.items()
        if constraint.get(name) is not None
    ]
    if _max_skew(constraint) is None:
        problems.append(
            Problem(
                f"{field}.maxSkew",
                f"must be a whole number of 1 or more, got {constraint.get('maxSkew')!r}",
            )
        )
    return problems + _rule_problems(_spread_rule(pod, index, constraint))


def _max_skew(constraint: Obj) -> int | None:
    skew = constraint.get("maxSkew")
    if isinstance(skew, bool) or not isinstance(skew, int) or skew < 1:
        return None
    return skew


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
    for rule in _terms(pod):
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
    rules = [r for r in _terms(pod) if r.kind == "podAffinity" and r.topology_key]
    if not rules:
        return set()
    domains: list[set[str]] = [set() for _ in rules]
    for placed_pod in placed:
        if all(rule.matches(placed_pod.namespace, placed_pod.labels) for rule in rules):
            for values, rule in zip(domains, rules, strict=True):
                value = topology.value(placed_pod.node, rule.topology_key)
                if value is not None:
                    values.add(value)
    first = not any(domains) and all(rule.matches(_namespace(pod), _labels(pod)) for rule in rules)
    excluded = set()
    for node in pool:
        values = [topology.value(node, rule.topology_key) for rule in rules]
        if None in values or not (first or all(map(set.__contains__, domains, values))):
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
    rules = _spread_rules(pod)
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
            key, self_match = rule.topology_key, int(selector_matches(rule.selector, _labels(pod)))
            if key not in labels:
                excluded.add(node)
                break
            if key not in floor:
                continue  # no domain at all: kube-scheduler's minimum is MaxInt32
            skew = counts.get((key, labels[key]), 0) + self_match - floor[key]
            if skew > (_max_skew(rule.body) or 1):
                excluded.add(node)
                break
    return excluded
