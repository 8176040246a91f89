"""resource_fit against kube-scheduler's NodeResourcesFit tables
(tests/unit/data/kube_resource_fit.yaml: 1.20's fit_test.go, and current upstream's new rows)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.kuberules.pod_requests import pod_requests, quantities
from reconciler.kuberules.resource_fit import (
    Insufficient,
    fits,
    insufficient_resources,
    is_extended_resource,
    is_scalar_resource,
    node_requested,
    scheduler_amounts,
)

TABLES = yaml.safe_load((Path(__file__).parent / "data" / "kube_resource_fit.yaml").read_text())


def _rows(key: str) -> list[Any]:
    return [
        pytest.param(TABLES[table]["allocatable"], row, id=f"{table}/{row['name']}")
        for table in ("TestEnoughRequests", "TestNotEnoughRequests", "TestStorageRequests")
        for row in TABLES[table]["rows"]
        if key in row
    ]


def _filter(allocatable: dict[str, str], row: dict[str, Any]) -> list[Insufficient]:
    """What the plugin's Filter sees: the Pod's requests, the Node, the Pods on it."""
    return insufficient_resources(
        pod_requests(row["pod"]),
        quantities(allocatable),
        node_requested(row["node_pods"]),
        pods_on_node=len(row["node_pods"]),
    )


def _scheduler_int(resource: str, amount: Decimal) -> Decimal:
    """Back to kube-scheduler's int64s: millicores for cpu."""
    return amount * 1000 if resource == "cpu" else amount


@pytest.mark.parametrize(("allocatable", "row"), _rows("want"))
def test_upstream_insufficient_resources(allocatable: dict[str, str], row: dict[str, Any]) -> None:
    got = [
        {"resource": i.resource, "reason": i.reason,
         "requested": _scheduler_int(i.resource, i.requested),
         "used": _scheduler_int(i.resource, i.used),
         "capacity": _scheduler_int(i.resource, i.capacity), "unresolvable": i.unresolvable}
        for i in _filter(allocatable, row)
    ]  # fmt: skip
    want = [{"unresolvable": False, **w} for w in row["want"]]
    assert got == want


@pytest.mark.parametrize(("allocatable", "row"), _rows("reasons"))
def test_upstream_filter_reasons(allocatable: dict[str, str], row: dict[str, Any]) -> None:
    assert [i.reason for i in _filter(allocatable, row)] == row["reasons"]


# ---- beyond upstream's tables ---------------------------------------------------------------

NODE = {"cpu": Decimal(4), "memory": Decimal(2**33), "pods": Decimal(110)}


def test_pods_come_first_and_a_node_without_a_pod_count_takes_none() -> None:
    wanted = {"cpu": Decimal(8), "example.com/b": Decimal(1), "example.com/a": Decimal(1)}
    got = insufficient_resources(wanted, {"cpu": Decimal(4)}, {}, pods_on_node=0)
    assert [i.reason for i in got] == [
        "Too many pods", "Insufficient cpu", "Insufficient example.com/a",
        "Insufficient example.com/b",
    ]  # fmt: skip
    assert got[0] == Insufficient("pods", "Too many pods", Decimal(1), Decimal(0), Decimal(0))


def test_a_full_node_takes_a_pod_that_asks_nothing_of_what_is_full() -> None:
    # Current upstream skips a zero request; 1.20 refused this Pod ("Insufficient cpu").
    used = {"cpu": Decimal(5)}  # over-committed, e.g. a Pod bound by nodeName
    assert fits({"memory": Decimal(1)}, NODE, used, pods_on_node=1)
    assert not fits({"cpu": Decimal("0.001")}, NODE, used, pods_on_node=1)


def test_amounts_are_rounded_as_kube_scheduler_holds_them() -> None:
    amounts = {"cpu": Decimal("0.0005"), "memory": Decimal("0.5"), "pods": Decimal(1),
               "example.com/gpu": Decimal(1), "storage": Decimal(1)}  # fmt: skip
    assert scheduler_amounts(amounts) == {
        "cpu": Decimal("0.001"), "memory": Decimal(1), "example.com/gpu": Decimal(1),
    }  # fmt: skip
    assert fits({"cpu": Decimal("3.9995")}, NODE, {}, pods_on_node=0)  # 4000m of 4000m
    assert not fits({"cpu": Decimal("3.9995")}, NODE, {"cpu": Decimal("0.0001")}, pods_on_node=0)


def test_node_requested_counts_each_bound_pod_with_its_resize_status() -> None:
    status = {"containerStatuses": [{"name": "c", "allocatedResources": {"cpu": "2"}}]}
    resizing = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                "status": status}  # fmt: skip
    plain = {"spec": {"containers": [{"resources": {"limits": {"memory": "1Gi"}}}]}}
    assert node_requested([resizing, plain]) == {"cpu": Decimal(2), "memory": Decimal(2**30)}


@pytest.mark.parametrize(
    ("name", "extended", "scalar"),
    [("example.com/gpu", True, True), ("nvidia.com/gpu", True, True),
     ("kubernetes.io/something", False, True), ("subdomain.kubernetes.io/x", False, True),
     ("hugepages-2Mi", False, True), ("attachable-volumes-aws-ebs", False, True),
     ("cpu", False, False), ("pods", False, False), ("storage", False, False),
     ("requests.example.com/x", False, False), ("example.com/a/b", False, False),
     ("Example.com/gpu", False, False), ("example.com/-gpu", False, False)],
)  # fmt: skip
def test_which_resources_kube_scheduler_tracks(name: str, extended: bool, scalar: bool) -> None:
    assert is_extended_resource(name) is extended
    assert is_scalar_resource(name) is scalar
