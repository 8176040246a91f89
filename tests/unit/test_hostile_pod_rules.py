"""How many pod (anti-)affinity terms and spread constraints a Pod may have. Kubernetes caps
none; each is matched against every placed Pod and Node, so a Pod with 15,000 terms held a
worker for as many rounds. Each test is the attack as written, and asserts the refusal the
Pod's author sees: the field, the count and the cap (16 terms per list, 8 spread constraints,
16 namespaces named: pod_rules.MAX_TERMS, MAX_SPREAD_CONSTRAINTS, MAX_RULE_NAMESPACES).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.scheduler.decide.admission import PodRequest, Rejection, admit

Obj = dict[str, Any]
ANTI = "podAntiAffinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
TERMS, SPREAD = 16, 8


def anti_term(index: int) -> Obj:
    return {"labelSelector": {"matchLabels": {"app": f"a{index}"}},
            "topologyKey": "kubernetes.io/hostname"}  # fmt: skip


def pod_with(**spec: Any) -> Obj:
    container = {"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    return {
        "metadata": {"name": "p", "namespace": "ml", "uid": "u"},
        "spec": {"terminationGracePeriodSeconds": 10, "containers": [container], **spec},
    }


def test_fifteen_thousand_anti_affinity_terms_are_refused_with_field_count_and_cap() -> None:
    pod = pod_with(affinity={ANTI: {REQUIRED: [anti_term(i) for i in range(15_000)]}})
    start = time.perf_counter()
    result = admit(pod, kill_wait_seconds=30)
    assert time.perf_counter() - start < 0.05
    assert isinstance(result, Rejection), "15,000 terms were admitted"
    assert (
        f"spec.affinity.{ANTI}.{REQUIRED}: has 15,000 entries; at most {TERMS} are accepted"
        in result.message()
    ), result.message()


@pytest.mark.parametrize(
    ("spec", "field", "cap"),
    [
        ({"topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": f"k{i}", "whenUnsatisfiable": "DoNotSchedule"}
            for i in range(SPREAD + 1)]},
         "spec.topologySpreadConstraints", SPREAD),
        ({"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "k", "operator": "Exists"}]}] * (TERMS + 1)}}}},
         f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms", TERMS),
        ({"affinity": {"nodeAffinity": {PREFERRED: [
            {"weight": 1, "preference": {"matchExpressions": []}}] * (TERMS + 1)}}},
         f"spec.affinity.nodeAffinity.{PREFERRED}", TERMS),
        ({"affinity": {"podAffinity": {REQUIRED: [anti_term(i) for i in range(TERMS + 1)]}}},
         f"spec.affinity.podAffinity.{REQUIRED}", TERMS),
        ({"affinity": {ANTI: {PREFERRED: [
            {"weight": 1, "podAffinityTerm": anti_term(i)} for i in range(TERMS + 1)]}}},
         f"spec.affinity.{ANTI}.{PREFERRED}", TERMS),
    ],
)  # fmt: skip
def test_one_past_each_cap_is_refused_and_the_cap_itself_is_admitted(
    spec: Obj, field: str, cap: int
) -> None:
    result = admit(pod_with(**spec), kill_wait_seconds=30)
    assert isinstance(result, Rejection), f"{cap + 1} entries in {field} were admitted"
    assert f"{field}: has {cap + 1:,} entries; at most {cap} are accepted" in result.message()
    at_cap = copy.deepcopy(spec)
    for value in _lists(at_cap):
        del value[cap:]
    assert isinstance(admit(pod_with(**at_cap), kill_wait_seconds=30), PodRequest)


def _lists(value: Any) -> Iterator[list[Any]]:
    if isinstance(value, list) and len(value) > 1:
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from _lists(inner)


def test_terms_naming_too_many_namespaces_are_refused() -> None:
    term = anti_term(0) | {"namespaces": [f"ns-{i}" for i in range(40)]}
    result = admit(pod_with(affinity={ANTI: {REQUIRED: [term]}}), kill_wait_seconds=30)
    assert isinstance(result, Rejection), "a term naming 40 namespaces was admitted"
    assert "name 40 namespaces; at most 16 are accepted" in result.message()
