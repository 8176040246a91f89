"""Inter-pod affinity, anti-affinity and topology spread turned into Nodes to exclude."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from reconciler.kuberules.label_selector import selector_string
from reconciler.kuberules.pod_affinity_spread import (
    PlacedPod,
    excluded_by_placed_rules,
    excluded_nodes,
    spread_counts,
)
from reconciler.kuberules.pod_rules import (
    gang_rule_problems,
    needs_placed_pods,
    selector_queries,
    topology_problems,
    unlabelled_keys,
)

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
WEB = {"matchLabels": {"app": "web"}}
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
# n1, n2 in zone a; n3 in zone b; n4 has no zone.
NODES = {
    "n1": {HOST: "n1", ZONE: "a"},
    "n2": {HOST: "n2", ZONE: "a"},
    "n3": {HOST: "n3", ZONE: "b"},
    "n4": {HOST: "n4"},
}
ALL = list(NODES)


def pod(
    *,
    labels: dict[str, str] | None = None,
    namespace: str = "ml",
    affinity: list[dict] | None = None,
    anti: list[dict] | None = None,
    spread: list[dict] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"affinity": {}}
    if affinity is not None:
        spec["affinity"]["podAffinity"] = {REQUIRED: affinity}
    if anti is not None:
        spec["affinity"]["podAntiAffinity"] = {REQUIRED: anti}
    if spread is not None:
        spec["topologySpreadConstraints"] = spread
    metadata = {"name": "p", "namespace": namespace, "labels": labels or {}}
    return {"metadata": metadata, "spec": spec}


def term(selector: dict | None = WEB, key: str = HOST, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": selector, "topologyKey": key, **extra}


def constraint(
    selector: dict | None = WEB, key: str = HOST, skew: Any = 1, when: str = "DoNotSchedule"
) -> dict[str, Any]:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": selector}  # fmt: skip


def web(node: str, namespace: str = "ml", app: str = "web") -> PlacedPod:
    return PlacedPod(namespace, {"app": app}, node)


# ---- anti-affinity ---------------------------------------------------------------------------


def test_hostname_anti_affinity_excludes_nodes_hosting_a_matching_pod_of_the_namespace() -> None:
    placed = [web("n1"), web("n2", namespace="other"), web("n3", app="db")]
    assert excluded_nodes(pod(anti=[term()]), placed, NODES, ALL) == {"n1"}


def test_anti_affinity_looks_in_the_namespaces_the_term_lists() -> None:
    placed = [web("n1"), web("n2", namespace="other")]
    rule = term(namespaces=["other"])
    assert excluded_nodes(pod(anti=[rule]), placed, NODES, ALL) == {"n2"}


def test_zone_anti_affinity_excludes_the_whole_zone_but_not_nodes_without_a_zone() -> None:
    placed = [web("n2"), web("n4")]
    assert excluded_nodes(pod(anti=[term(key=ZONE)]), placed, NODES, ALL) == {"n1", "n2"}


def test_a_node_without_the_hostname_label_is_in_no_hostname_domain() -> None:
    # As kube-scheduler: no special case for kubernetes.io/hostname (every kubelet sets it).
    nodes = {"n1": {}, "n2": {}}
    assert excluded_nodes(pod(anti=[term()]), [web("n1")], nodes, ["n1", "n2"]) == set()
    assert excluded_nodes(pod(affinity=[term()]), [web("n1")], nodes, ["n1", "n2"]) == {"n1", "n2"}
    spreading = spread_pod(constraint())
    assert excluded_nodes(spreading, [web("n1")], nodes, ["n1", "n2"]) == {"n1", "n2"}


def test_only_candidates_are_ever_excluded() -> None:
    placed = [web("n1"), web("elsewhere")]
    assert excluded_nodes(pod(anti=[term(key=ZONE)]), placed, NODES, ["n2", "n3"]) == {"n2"}


def test_preferred_terms_are_ignored() -> None:
    soft = pod()
    preferred = [{"weight": 1, "podAffinityTerm": term()}]
    soft["spec"]["affinity"]["podAntiAffinity"] = {
        "preferredDuringSchedulingIgnoredDuringExecution": preferred
    }
    assert not needs_placed_pods(soft)
    assert excluded_nodes(soft, [web("n1")], NODES, ALL) == set()


# ---- affinity --------------------------------------------------------------------------------


def test_affinity_keeps_the_pod_in_the_domain_of_a_matching_pod() -> None:
    placed = [web("n3"), web("n1", namespace="other")]
    assert excluded_nodes(pod(affinity=[term(key=ZONE)]), placed, NODES, ALL) == {"n1", "n2", "n4"}
    assert excluded_nodes(pod(affinity=[term()]), placed, NODES, ALL) == {"n1", "n2", "n4"}


def test_the_first_pod_of_a_group_matching_its_own_term_may_go_anywhere_with_the_key() -> None:
    first = pod(labels={"app": "web"}, affinity=[term(key=ZONE)])
    assert excluded_nodes(first, [web("n1", app="db")], NODES, ALL) == {"n4"}
    # Once a group member is placed, the rule applies.
    assert excluded_nodes(first, [web("n3")], NODES, ALL) == {"n1", "n2", "n4"}


def test_a_pod_not_matching_its_own_term_waits_for_a_matching_pod() -> None:
    lonely = pod(labels={"app": "db"}, affinity=[term()])
    assert excluded_nodes(lonely, [], NODES, ALL) == set(ALL)
    other_namespace = pod(labels={"app": "web"}, affinity=[term(namespaces=["other"])])
    assert excluded_nodes(other_namespace, [], NODES, ALL) == set(ALL)


def test_with_two_terms_a_placed_pod_counts_only_if_it_matches_both() -> None:
    # As kube-scheduler: the domains come from Pods matching every term.
    both = [term({"matchLabels": {"app": "web"}}), term({"matchLabels": {"tier": "front"}}, ZONE)]
    placed = [PlacedPod("ml", {"app": "web"}, "n1"), PlacedPod("ml", {"tier": "front"}, "n1")]
    assert excluded_nodes(pod(affinity=both), placed, NODES, ALL) == set(ALL)
    placed.append(PlacedPod("ml", {"app": "web", "tier": "front"}, "n2"))
    assert excluded_nodes(pod(affinity=both), placed, NODES, ALL) == {"n1", "n3", "n4"}


# ---- topology spread -------------------------------------------------------------------------


def spread_pod(*constraints: dict, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return pod(labels={"app": "web"} if labels is None else labels, spread=list(constraints))


def test_spread_max_skew_one_over_three_nodes_with_two_one_one_excludes_the_first() -> None:
    placed = [web("n1"), web("n1"), web("n2"), web("n3")]
    three = ["n1", "n2", "n3"]
    assert excluded_nodes(spread_pod(constraint()), placed, NODES, three, three) == {"n1"}
    assert excluded_nodes(spread_pod(constraint(skew=2)), placed, NODES, three, three) == set()
    # n4, empty, is a domain too when the Pod may run there: only it is allowed then.
    assert excluded_nodes(spread_pod(constraint()), placed, NODES, three) == set(three)


def test_spread_without_self_match_allows_one_more_than_the_minimum() -> None:
    unmatched = spread_pod(constraint(), labels={"app": "db"})
    placed = [web("n1"), web("n1"), web("n2"), web("n3")]
    three = ["n1", "n2", "n3"]
    assert excluded_nodes(unmatched, placed, NODES, three, three) == set()
    assert excluded_nodes(unmatched, [*placed, web("n1")], NODES, three, three) == {"n1"}


def test_spread_counts_only_the_pods_namespace_and_excludes_nodes_lacking_the_key() -> None:
    placed = [web("n1"), web("n3", namespace="other")]
    # Zones a (1 Pod) and b (0 in "ml"); n4 has no zone label.
    assert excluded_nodes(spread_pod(constraint(key=ZONE)), placed, NODES, ALL) == {
        "n1", "n2", "n4",
    }  # fmt: skip


def test_spread_domains_come_from_the_hosts_passing_node_affinity_tainted_or_not() -> None:
    # n3 (zone b) is no candidate, say it is tainted: zone b is a domain all the same, as in
    # kube-scheduler 1.20, and its emptiness holds zone a back.
    placed = [web("n1")]
    spreading = spread_pod(constraint(key=ZONE))
    assert excluded_nodes(spreading, placed, NODES, ["n1", "n2"]) == {"n1", "n2"}
    # Unless zone b hosts no Node the Pod could run on, or none that passes its node affinity.
    assert excluded_nodes(spreading, placed, NODES, ["n1", "n2"], ["n1", "n2"]) == set()
    spreading["spec"]["nodeSelector"] = {ZONE: "a"}
    assert excluded_nodes(spreading, placed, NODES, ["n1", "n2"]) == set()


def test_spread_counts_pods_on_any_node_of_a_domain_as_kubernetes_1_20_does() -> None:
    # n2 (zone a) fails the Pod's node selector, but zone a is a domain (n1 passes): 1.20
    # counts n2's Pod (later versions count only Nodes that pass). A Pod on n4 (no zone) or
    # a terminating one never counts.
    nodes = {name: {**labels, "gpu": "yes"} for name, labels in NODES.items()}
    nodes["n2"] = NODES["n2"]
    spreading = spread_pod(constraint(key=ZONE))
    spreading["spec"]["nodeSelector"] = {"gpu": "yes"}
    counts = spread_counts(spreading, [web("n2"), web("n4")], nodes)
    assert counts == {(ZONE, "a"): 1, (ZONE, "b"): 0}
    assert excluded_nodes(spreading, [web("n2")], nodes, ["n1", "n3"]) == {"n1"}
    leaving = PlacedPod("ml", {"app": "web"}, "n2", terminating=True)
    assert excluded_nodes(spreading, [leaving], nodes, ["n1", "n3"]) == set()


def test_schedule_anyway_is_ignored() -> None:
    soft = spread_pod(constraint(when="ScheduleAnyway"))
    assert not needs_placed_pods(soft)
    assert excluded_nodes(soft, [web("n1")] * 5, NODES, ALL) == set()


# ---- selectors -------------------------------------------------------------------------------


def test_a_null_selector_matches_no_pod_and_an_empty_one_every_pod() -> None:
    placed = [web("n1"), web("n2", app="db"), web("n3", namespace="other")]
    assert excluded_nodes(pod(anti=[term(None)]), placed, NODES, ALL) == set()
    assert excluded_nodes(pod(anti=[term({})]), placed, NODES, ALL) == {"n1", "n2"}
    # A null spread selector counts nothing and the Pod does not match it: no skew anywhere.
    assert excluded_nodes(spread_pod(constraint(None)), placed, NODES, ALL) == set()


def test_selector_string_renders_the_api_syntax() -> None:
    selector = {
        "matchLabels": {"a": "b"},
        "matchExpressions": [
            {"key": "c", "operator": "In", "values": ["y", "x"]},
            {"key": "d", "operator": "DoesNotExist"},
            {"key": "e", "operator": "Exists"},
            {"key": "f", "operator": "NotIn", "values": ["z"]},
        ],
    }
    assert selector_string(selector) == "a=b,c in (x,y),!d,e,f notin (z)"
    assert selector_string({}) == ""


def test_selector_queries_cover_every_rule_once_and_skip_null_selectors() -> None:
    rules = pod(
        anti=[term(namespaces=["ml", "other"]), term(None)],
        affinity=[term({"matchLabels": {"app": "db"}})],
        spread=[constraint(), constraint({}, when="ScheduleAnyway"), constraint({}, ZONE)],
    )
    assert selector_queries(rules) == [
        ("ml", "app=db"), ("ml", "app=web"), ("other", "app=web"), ("ml", ""),
    ]  # fmt: skip
    assert selector_queries(pod()) == []


def test_needs_placed_pods_for_any_required_rule() -> None:
    assert not needs_placed_pods(pod())
    assert needs_placed_pods(pod(anti=[term()]))
    assert needs_placed_pods(pod(affinity=[term()]))
    assert needs_placed_pods(spread_pod(constraint()))


# ---- problems --------------------------------------------------------------------------------

ANTI = f"spec.affinity.podAntiAffinity.{REQUIRED}[0]"


def fields(problems: list) -> list[str]:
    return [p.field for p in problems]


def test_a_supported_pod_has_no_problems() -> None:
    good = pod(anti=[term()], affinity=[term(key=ZONE)], spread=[constraint()])
    assert topology_problems(good) == []


def test_namespace_selector_is_refused_with_namespaces_as_the_way_out() -> None:
    [problem] = topology_problems(pod(anti=[term(namespaceSelector={})]))
    assert problem.field == f"{ANTI}.namespaceSelector"
    assert "not supported" in problem.message and "namespaces" in problem.message


def test_missing_topology_key_and_invalid_selectors_are_refused() -> None:
    bad = {"matchExpressions": [{"key": "a", "operator": "Exists"},
                                {"key": "b", "operator": "Gt", "values": ["1"]}]}  # fmt: skip
    problems = topology_problems(pod(anti=[term(bad, key="")], affinity=[{"labelSelector": {}}]))
    assert fields(problems) == [
        f"spec.affinity.podAffinity.{REQUIRED}[0].topologyKey",
        f"{ANTI}.topologyKey",
        f"{ANTI}.labelSelector",
    ]
    assert '"Gt" is not a valid pod selector operator' in problems[2].message


def test_an_invalid_selector_anywhere_refuses_the_pod_as_kube_scheduler_does() -> None:
    # kube-scheduler 1.20 schedules such a Pod nowhere, preferences included (its affinity
    # does not parse; PreScore fails on a ScheduleAnyway constraint); the API server refuses it.
    empty_in = {"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}
    soft = pod()
    soft["spec"]["affinity"]["podAffinity"] = {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": term(empty_in)}
        ]
    }
    [problem] = topology_problems(soft)
    assert problem.field == (
        "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
        ".podAffinityTerm.labelSelector"
    )
    assert "values set can't be empty" in problem.message
    [problem] = topology_problems(spread_pod(constraint(empty_in, when="ScheduleAnyway")))
    assert problem.field == "spec.topologySpreadConstraints[0].labelSelector"
    bad_value = {"matchLabels": {"app": "{{.bad-value.}}"}}
    [problem] = topology_problems(spread_pod(constraint(bad_value)))
    assert 'invalid label value: "{{.bad-value.}}": at key: "app"' in problem.message


def test_spread_fields_newer_than_1_20_are_refused() -> None:
    newer = constraint()
    newer.update(minDomains=2, nodeAffinityPolicy="Ignore", nodeTaintsPolicy="Honor",
                 matchLabelKeys=["pod-template-hash"])  # fmt: skip
    assert fields(topology_problems(spread_pod(newer))) == [
        f"spec.topologySpreadConstraints[0].{name}"
        for name in ("minDomains", "nodeAffinityPolicy", "nodeTaintsPolicy", "matchLabelKeys")
    ]


def test_max_skew_below_one_and_unknown_when_unsatisfiable_are_refused() -> None:
    problems = topology_problems(
        spread_pod(constraint(skew=0), constraint(when="Maybe"), constraint(key="", skew="2"))
    )
    assert fields(problems) == [
        "spec.topologySpreadConstraints[0].maxSkew",
        "spec.topologySpreadConstraints[1].whenUnsatisfiable",
        "spec.topologySpreadConstraints[2].maxSkew",
        "spec.topologySpreadConstraints[2].topologyKey",
    ]
    assert "got 0" in problems[0].message
    assert "DoNotSchedule or ScheduleAnyway" in problems[1].message


def test_a_topology_key_no_candidate_carries_is_reported() -> None:
    rack = "example.com/rack"
    rules = pod(anti=[term(key=rack), term()], spread=[constraint(key=ZONE)])
    [problem] = unlabelled_keys(rules, NODES, ALL)
    assert problem.field == f"{ANTI}.topologyKey"
    assert f"topologyKey {rack!r} is a label of none of the Nodes" in problem.message
    assert HOST in problem.message
    assert fields(unlabelled_keys(rules, NODES, ["n4"])) == [
        f"{ANTI}.topologyKey", "spec.topologySpreadConstraints[0].topologyKey",
    ]  # fmt: skip
    assert fields(unlabelled_keys(pod(anti=[term()]), {}, ["x"])) == [f"{ANTI}.topologyKey"]


# ---- property --------------------------------------------------------------------------------

zones = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=6)


@given(zones=zones, skew=st.integers(1, 3), use_zone=st.booleans(), picks=st.lists(
    st.integers(0, 1000), max_size=12))  # fmt: skip
def test_placing_on_any_allowed_candidate_keeps_the_spread_within_max_skew(
    zones: list[str], skew: int, use_zone: bool, picks: list[int]
) -> None:
    """Pods placed one by one, each on a Node the rule allows, never leave one domain more
    than maxSkew ahead of another; and some Node is always allowed."""
    nodes = {f"n{i}": {ZONE: zone, HOST: f"n{i}"} for i, zone in enumerate(zones)}
    key = ZONE if use_zone else HOST
    domain = {name: labels[ZONE] if use_zone else name for name, labels in nodes.items()}
    incoming = spread_pod(constraint(key=key, skew=skew))
    placed: list[PlacedPod] = [web("n0", app="db")]  # not matching: never counted
    for pick in picks:
        allowed = sorted(set(nodes) - excluded_nodes(incoming, placed, nodes, nodes))
        assert allowed
        placed.append(web(allowed[pick % len(allowed)]))
        counts = Counter(domain[p.node] for p in placed if p.labels["app"] == "web")
        per_domain = [counts[d] for d in set(domain.values())]
        assert max(per_domain) - min(per_domain) <= skew


# ---- rules between the members of one gang ----------------------------------------------------


def test_hostname_anti_affinity_and_spread_between_gang_members_hold_by_construction() -> None:
    a = pod(labels={"app": "web"}, anti=[term()], spread=[constraint()])
    b = pod(labels={"app": "web"})
    assert gang_rule_problems(a, [a, b]) == []


def test_zone_rules_or_affinity_that_select_other_gang_members_are_refused() -> None:
    for rules in ({"anti": [term(key=ZONE)]}, {"affinity": [term()]},
                  {"spread": [constraint(key=ZONE)]}):  # fmt: skip
        a = pod(labels={"app": "web"}, **rules)
        b = pod(labels={"app": "web"})
        problems = gang_rule_problems(a, [a, b])
        assert len(problems) == 1 and "selects other members of the Pod's gang" in str(
            problems[0]
        ), rules
        outsider = pod(labels={"app": "db"})
        assert gang_rule_problems(a, [a, outsider]) == [], "rules about others are fine"


# ---- the anti-affinity of Pods already bound (symmetric) ---------------------------------------


def bound(node: str, **rules: Any) -> dict[str, Any]:
    other = pod(labels={"app": "db"}, **rules)
    other["spec"]["nodeName"] = node
    return other


def test_a_bound_pods_anti_affinity_keeps_a_pod_it_selects_out_of_its_domain() -> None:
    incoming = pod(labels={"app": "web"})
    placed = [bound("n1", anti=[term()]), bound("n3", anti=[term(key=ZONE)])]
    assert excluded_by_placed_rules(incoming, placed, NODES, ALL) == {"n1", "n3"}


def test_a_bound_pods_anti_affinity_about_others_or_another_namespace_changes_nothing() -> None:
    incoming = pod(labels={"app": "web"}, namespace="other")
    placed = [bound("n1", anti=[term()]), bound("n2", anti=[term({"matchLabels": {"app": "x"}})])]
    assert excluded_by_placed_rules(incoming, placed, NODES, ALL) == set()
    unbound = pod(labels={"app": "db"}, anti=[term()])
    assert excluded_by_placed_rules(pod(labels={"app": "web"}), [unbound], NODES, ALL) == set()


def test_a_bound_pod_with_an_invalid_anti_affinity_selector_has_no_anti_affinity() -> None:
    # kube-scheduler 1.20 parses a Pod's required anti-affinity terms together: one selector
    # it cannot build and the Pod has none (NewPodInfo), so none of them keeps anyone out.
    invalid = {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": []}]}
    incoming = pod(labels={"app": "web"})
    placed = [bound("n1", anti=[term(), term(invalid)]), bound("n3", anti=[term(key=ZONE)])]
    assert excluded_by_placed_rules(incoming, placed, NODES, ALL) == {"n3"}
