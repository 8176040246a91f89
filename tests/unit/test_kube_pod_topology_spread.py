"""kube-scheduler 1.20.2's PodTopologySpread filter test tables, run against topology.py.

The rows are data (tests/unit/data/kube_pod_topology_spread.yaml: upstream file, functions,
version and what was left out are written there); every row must hold as upstream wants it.
"""

from __future__ import annotations

import pytest

from reconciler.kuberules.pod_affinity_spread import excluded_nodes, spread_counts
from reconciler.kuberules.pod_rules import topology_problems
from tests.unit.kube_tables import cases, feasible, load, placed_pods, pod_object, wanted

TABLES = load("kube_pod_topology_spread.yaml")
FILTER_TABLES = ("TestSingleConstraint", "TestMultipleConstraints")
FILTER_CASES = cases(TABLES, *FILTER_TABLES)
STATE_CASES = cases(TABLES, "TestPreFilterState")


@pytest.mark.parametrize("case", FILTER_CASES)
def test_filter_decides_each_node_as_kube_scheduler(case: dict) -> None:
    assert topology_problems(pod_object(case["pod"])) == []
    assert feasible(case) == wanted(case)


@pytest.mark.parametrize("case", STATE_CASES)
def test_pods_are_counted_per_domain_as_kube_scheduler(case: dict) -> None:
    pod = pod_object(case["pod"])
    assert topology_problems(pod) == []
    counts = spread_counts(pod, placed_pods(case.get("pods") or []), case["nodes"])
    want = {tuple(pair.split("=", 1)): count for pair, count in case["want_counts"].items()}
    assert counts == want


def test_the_tables_are_all_there() -> None:
    """Upstream's count of cases, less the 4 left out of TestPreFilterState (see the data)."""
    sizes = {table: len(TABLES[table]) for table in (*FILTER_TABLES, "TestPreFilterState")}
    assert sizes == {"TestSingleConstraint": 11, "TestMultipleConstraints": 7,
                     "TestPreFilterState": 13 - 4}  # fmt: skip


def test_a_domain_with_no_node_passing_node_affinity_does_not_hold_others_back() -> None:
    """The nodeAffinity row once more, but with node-b and node-x filtered out beforehand, as
    a real cluster's NodeAffinity filter does (and as our scheduler passes candidates)."""
    [case] = [c for c in TABLES["TestSingleConstraint"] if "nodeAffinity" in c["name"]]
    pod = pod_object(case["pod"])
    placed = placed_pods(case["pods"])
    assert excluded_nodes(pod, placed, case["nodes"], ["node-a", "node-y"]) == {"node-y"}
