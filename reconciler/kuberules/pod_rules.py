"""A Pod's required pod (anti-)affinity terms and topology spread constraints: read, and
checked against what we can honour (pure).

What a rule says, and whether we can honour it, does not depend on where other Pods are; that
is this module. Evaluating the rules against the Pods already placed, as kube-scheduler 1.20's
filters do, is `pod_affinity_spread.py`, which reads the rules through `required_terms` and
`spread_rules`. Preferred terms and ScheduleAnyway constraints are preferences, not rules, and
are ignored (only their selectors are checked, as kube-scheduler refuses a Pod whose selector
does not parse).

What we cannot honour (namespaceSelector, minDomains, the node inclusion policies,
matchLabelKeys) and what kube-scheduler would not schedule either (a selector
metav1.LabelSelectorAsSelector refuses) is reported by `topology_problems`, so the Pod is refused
with a reason rather than placed somewhere its rules do not hold; `unlabelled_keys` and
`gang_rule_problems` refuse the rules no Node or no single Slurm job can honour.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from reconciler.kuberules.label_selector import selector_error, selector_matches, selector_string
from reconciler.kuberules.problem import Problem
from reconciler.objects import ReadObj as Obj

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
# Kubernetes caps none of these lists; each rule is matched against every placed Pod and Node,
# so a Pod with 15,000 terms costs a worker 15,000 times one. Real manifests use 1 to 3 terms
# (a zone and a hostname) and kube-scheduler's documentation ("Assigning Pods to Nodes") warns
# that inter-pod affinity slows scheduling in clusters past a few hundred Nodes: 16 terms per
# list, 8 spread constraints (the API server already keeps each topologyKey and
# whenUnsatisfiable pair unique) and 16 namespaces named across a Pod's rules (each is a
# namespace whose Pods the scheduler follows) leave room for every real use.
MAX_TERMS: Final = 16
MAX_SPREAD_CONSTRAINTS: Final = 8
MAX_RULE_NAMESPACES: Final = 16
_TERM_LISTS: Final = (
    ("nodeAffinity", REQUIRED, "nodeSelectorTerms"),
    ("nodeAffinity", PREFERRED, None),
    ("podAffinity", REQUIRED, None),
    ("podAffinity", PREFERRED, None),
    ("podAntiAffinity", REQUIRED, None),
    ("podAntiAffinity", PREFERRED, None),
)


@dataclass(frozen=True)
class Rule:
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
    expression it cannot render is left out); `pod_affinity_spread.excluded_nodes` matches
    again, exactly."""
    queries: dict[tuple[str, str], None] = {}
    for rule in _hard_rules(pod):
        if rule.selector is None:
            continue  # matches no Pod: nothing to list
        text = selector_string(rule.selector)
        for namespace in rule.namespaces:
            queries[(namespace, text)] = None
    return list(queries)


def count_problems(pod: Obj) -> list[Problem]:
    """Lists of rules longer than we evaluate (MAX_TERMS, MAX_SPREAD_CONSTRAINTS, and the
    namespaces the rules name, MAX_RULE_NAMESPACES): counted, never evaluated, so a Pod with
    thousands of terms is refused at the cost of a len()."""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity")
    affinity = affinity if isinstance(affinity, Mapping) else {}
    lists: list[tuple[str, Any, int]] = []
    for kind, when, inner in _TERM_LISTS:
        part = (affinity.get(kind) or {}) if isinstance(affinity.get(kind), Mapping) else {}
        terms = part.get(when)
        field = f"spec.affinity.{kind}.{when}"
        if inner is not None:
            terms = terms.get(inner) if isinstance(terms, Mapping) else None
            field = f"{field}.{inner}"
        lists.append((field, terms, MAX_TERMS))
    lists.append((SPREAD, spec.get("topologySpreadConstraints"), MAX_SPREAD_CONSTRAINTS))
    problems = [
        Problem(field, f"has {len(items):,} entries; at most {cap} are accepted here")
        for field, items, cap in lists
        if isinstance(items, list) and len(items) > cap
    ]
    if problems:
        return problems
    named = {namespace for rule in _hard_rules(pod) for namespace in rule.namespaces}
    if len(named) > MAX_RULE_NAMESPACES:
        problems.append(
            Problem(
                "spec.affinity",
                f"the pod (anti-)affinity terms name {len(named):,} namespaces; at most "
                f"{MAX_RULE_NAMESPACES} are accepted here",
            )
        )
    return problems


def topology_problems(pod: Obj) -> list[Problem]:
    """What in the Pod's inter-pod rules we cannot honour, each with what to do instead."""
    problems: list[Problem] = []
    for rule in required_terms(pod):
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
    problems = []
    for rule in _hard_rules(pod):
        key = rule.topology_key
        if key and not any((node_labels.get(node) or {}).get(key) is not None for node in pool):
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
        if any(rule.matches(pod_namespace(m), pod_labels(m)) for m in others):
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


def pod_namespace(pod: Obj) -> str:
    """The Pod's namespace, "default" if it has none."""
    return str((pod.get("metadata") or {}).get("namespace") or "default")


def pod_labels(pod: Obj) -> Mapping[str, str]:
    """The Pod's labels, {} if it has none."""
    return (pod.get("metadata") or {}).get("labels") or {}


def required_terms(pod: Obj) -> list[Rule]:
    """Required affinity and anti-affinity terms; preferred ones are ignored (soft)."""
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    rules = []
    for kind in ("podAffinity", "podAntiAffinity"):
        for index, term in enumerate((affinity.get(kind) or {}).get(REQUIRED) or ()):
            # An empty namespaces list means the Pod's own namespace (no namespaceSelector).
            namespaces = tuple(term.get("namespaces") or ()) or (pod_namespace(pod),)
            field = f"spec.affinity.{kind}.{REQUIRED}[{index}]"
            rules.append(Rule(field, kind, term, namespaces, term.get("labelSelector")))
    return rules


def _spread_constraints(pod: Obj) -> list[Obj]:
    return list((pod.get("spec") or {}).get("topologySpreadConstraints") or ())


def _hard_rules(pod: Obj) -> list[Rule]:
    """Every rule that can exclude a Node: required terms and DoNotSchedule constraints."""
    rules = required_terms(pod)
    for index, constraint in enumerate(_spread_constraints(pod)):
        if constraint.get("whenUnsatisfiable") == HARD:
            rules.append(_spread_rule(pod, index, constraint))
    return rules


def _spread_rule(pod: Obj, index: int, constraint: Obj) -> Rule:
    """Spreading counts Pods of the Pod's own namespace only."""
    field = f"{SPREAD}[{index}]"
    selector = constraint.get("labelSelector")
    return Rule(field, "spread", constraint, (pod_namespace(pod),), selector)


def spread_rules(pod: Obj) -> list[Rule]:
    """The DoNotSchedule constraints `pod_affinity_spread.excluded_nodes` can read (a key,
    a maxSkew)."""
    rules = [r for r in _hard_rules(pod) if r.kind == "spread" and r.topology_key]
    return [r for r in rules if max_skew(r.body) is not None]


# ---- problems -------------------------------------------------------------------------------


def _rule_problems(rule: Rule) -> list[Problem]:
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
    if max_skew(constraint) is None:
        problems.append(
            Problem(
                f"{field}.maxSkew",
                f"must be a whole number of 1 or more, got {constraint.get('maxSkew')!r}",
            )
        )
    return problems + _rule_problems(_spread_rule(pod, index, constraint))


def max_skew(constraint: Obj) -> int | None:
    """A spread constraint's maxSkew; None unless it is a whole number of 1 or more."""
    skew = constraint.get("maxSkew")
    if isinstance(skew, bool) or not isinstance(skew, int) or skew < 1:
        return None
    return skew
