"""pod_requests against Kubernetes' own tables for resource.PodRequests
(tests/unit/data/kube_pod_requests.yaml, ported from component-helpers' helpers_test.go)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.kuberules.pod_requests import is_pod_level_resource, pod_requests
from reconciler.kuberules.quantity import parse_quantity

TABLES = yaml.safe_load((Path(__file__).parent / "data" / "kube_pod_requests.yaml").read_text())
ROWS = [
    pytest.param(row, id=f"{table}/{row['name']}")
    for table, rows in TABLES.items()
    if table not in ("left_out", "TestIsSupportedPodLevelResource")
    for row in rows
]


def _amounts(raw: dict[str, Any]) -> dict[str, Decimal]:
    return {name: parse_quantity(value) for name, value in raw.items()}


@pytest.mark.parametrize("row", ROWS)
def test_upstream_pod_requests(row: dict[str, Any]) -> None:
    status = bool((row.get("options") or {}).get("UseStatusResources"))
    got = pod_requests(row["pod"], api_defaults=False, status_resources=status)
    assert got == _amounts(row["requests"])


@pytest.mark.parametrize("row", ROWS)
def test_upstream_pod_requests_once_the_api_server_has_defaulted_the_pod(
    row: dict[str, Any],
) -> None:
    status = bool((row.get("options") or {}).get("UseStatusResources"))
    want = row.get("defaulted", row["requests"])
    assert pod_requests(row["pod"], status_resources=status) == _amounts(want)


@pytest.mark.parametrize(
    "row", [pytest.param(r, id=r["name"]) for r in TABLES["TestIsSupportedPodLevelResource"]]
)
def test_upstream_supported_pod_level_resources(row: dict[str, Any]) -> None:
    assert is_pod_level_resource(row["resource"]) is row["expected"]


def test_no_row_is_both_ported_and_left_out() -> None:
    ported = {(t, r["name"]) for t, rows in TABLES.items() if t != "left_out" for r in rows}
    left_out = {(entry["table"], name) for entry in TABLES["left_out"] for name in entry["rows"]}
    assert not ported & left_out


# ---- beyond upstream's tables: the API server's defaulting, 1.20's answer --------------------


def _pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"spec": spec}


def test_a_request_wins_over_the_limit_and_a_limit_alone_is_the_request() -> None:
    resources = {"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    pod = _pod({"containers": [{"resources": resources}]})
    assert pod_requests(pod) == {"cpu": Decimal("0.5"), "memory": Decimal(2**30)}
    assert pod_requests(pod, api_defaults=False) == {"cpu": Decimal("0.5")}


def test_quantities_are_rounded_up_to_a_thousandth_as_the_api_server_stores_them() -> None:
    pod = _pod({"containers": [{"resources": {"requests": {"cpu": "100n"}}},
                               {"resources": {"requests": {"cpu": "1500u", "memory": "0.0001"}}}],
                "overhead": {"cpu": "1n"}})  # fmt: skip
    assert pod_requests(pod) == {"cpu": Decimal("0.004"), "memory": Decimal("0.001")}
    assert pod_requests(pod, api_defaults=False)["cpu"] == Decimal("0.001500101")


def test_a_pod_level_limit_without_a_request_is_the_request_where_no_container_asks() -> None:
    pod = _pod({"resources": {"limits": {"cpu": "4", "memory": "8Gi"}},
                "containers": [{"resources": {"requests": {"cpu": "1"}}},
                               {"resources": {"requests": {"cpu": "2"}}}]})  # fmt: skip
    # defaultPodRequests: cpu from the containers (3), memory, which none asks, from the limit.
    assert pod_requests(pod) == {"cpu": Decimal(3), "memory": Decimal(8 * 2**30)}
    assert pod_requests(pod, api_defaults=False) == {"cpu": Decimal(3)}


def test_pod_level_requests_replace_only_what_they_name() -> None:
    pod = _pod({"resources": {"requests": {"memory": "1Gi", "ephemeral-storage": "9Gi"}},
                "containers": [{"resources": {"requests": {"cpu": "1", "memory": "4Gi",
                                                           "ephemeral-storage": "1Gi",
                                                           "example.com/gpu": "2"}}}],
                "overhead": {"memory": "100Mi"}})  # fmt: skip
    assert pod_requests(pod) == {
        "cpu": Decimal(1),
        "memory": Decimal(2**30 + 100 * 2**20),  # pod-level, then the overhead
        "ephemeral-storage": Decimal(2**30),  # no pod-level ephemeral-storage request
        "example.com/gpu": Decimal(2),
    }


@pytest.mark.parametrize(
    ("containers", "inits", "overhead", "want"),
    [
        ([{"cpu": "2", "memory": "1G"}, {"cpu": "1", "memory": "1G"}],
         [{"cpu": "2", "memory": "1G"}, {"cpu": "2", "memory": "3G"}], None,
         {"cpu": "3", "memory": "3G"}),  # computePodResourceRequest's own example
        ([{"cpu": "1"}], [{"cpu": "4", "example.com/fpga": "1"}], {"cpu": "250m"},
         {"cpu": "4.25", "example.com/fpga": "1"}),  # a resource only an init container asks for
        ([{"cpu": "0"}], [], None, {"cpu": "0"}),  # a zero request is still there
    ],
)  # fmt: skip
def test_as_kubernetes_1_20_counts_a_pod_it_accepts(
    containers: list[dict[str, str]],
    inits: list[dict[str, str]],
    overhead: dict[str, str] | None,
    want: dict[str, str],
) -> None:
    # 1.20 (noderesources/fit.go computePodResourceRequest): containers summed, the largest init
    # container, plus the overhead; it has no sidecars and no pod-level resources.
    spec: dict[str, Any] = {
        "containers": [{"resources": {"requests": r}} for r in containers],
        "initContainers": [{"resources": {"requests": r}} for r in inits],
    }
    if overhead:
        spec["overhead"] = overhead
    assert pod_requests(_pod(spec)) == _amounts(want)


def test_status_counts_only_with_status_resources() -> None:
    status = {"containerStatuses": [{"name": "c", "allocatedResources": {"cpu": "3"}}]}
    pod = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
           "status": status}  # fmt: skip
    assert pod_requests(pod) == {"cpu": Decimal(1)}
    assert pod_requests(pod, status_resources=True) == {"cpu": Decimal(3)}
