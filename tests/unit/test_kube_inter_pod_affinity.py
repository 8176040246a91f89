"""kube-scheduler 1.20.2's InterPodAffinity filter test tables, run against topology.py.

The rows are data (tests/unit/data/kube_inter_pod_affinity.yaml: upstream file, functions and
version are written there); every row must hold as upstream wants it. Where a row says
`ours: {refused: ...}`, we refuse the Pod with that reason instead of placing it nowhere
(kube-scheduler's outcome): only where upstream schedules it on no Node either.
"""

from __future__ import annotations

import pytest

from reconciler.kuberules.pod_rules import topology_problems
from tests.unit.kube_tables import cases, feasible, load, pod_object, wanted

TABLES = load("kube_inter_pod_affinity.yaml")
TABLE_NAMES = ("TestRequiredAffinitySingleNode", "TestRequiredAffinityMultipleNodes")
CASES = cases(TABLES, *TABLE_NAMES)


@pytest.mark.parametrize("case", CASES)
def test_filter_decides_each_node_as_kube_scheduler(case: dict) -> None:
    problems = topology_problems(pod_object(case["pod"]))
    refused = (case.get("ours") or {}).get("refused")
    if refused is None:
        assert problems == []
        assert feasible(case) == wanted(case)
    else:
        assert not any(wanted(case).values()), "we refuse only what Kubernetes places nowhere"
        assert any(refused in problem.message for problem in problems), problems


def test_the_tables_are_all_there() -> None:
    assert {table: len(TABLES[table]) for table in TABLE_NAMES} == {
        "TestRequiredAffinitySingleNode": 21,
        "TestRequiredAffinityMultipleNodes": 18,
    }
