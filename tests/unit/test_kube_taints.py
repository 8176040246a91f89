"""Taints and tolerations as Kubernetes does them: its own test tables
(tests/unit/data/kube_taint_tables.py, each naming its upstream file, function and version)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.kuberules.tolerations import blocking_taints, tolerates_all
from tests.unit.data import kube_taint_tables as tables

Row = dict[str, Any]


def named(rows: list[Row], key: str = "name") -> Any:
    return pytest.mark.parametrize("row", rows, ids=[r[key][:80] for r in rows])


def expected(row: Row) -> bool:
    """Upstream's verdict, or ours where the row documents a deliberate difference."""
    if "ours" in row:
        assert row["why"], "a deliberate difference says why"
        return row["ours"]
    return row["want"]


def pod(tolerations: list[Row]) -> Row:
    return {"spec": {"tolerations": tolerations}}


@named(tables.TOLERATION_TOLERATES_TAINT + tables.TOLERATION_TOLERATES_TAINT_NEWER, "description")
def test_toleration_tolerates_taint(row: Row) -> None:
    assert tolerates_all(pod([row["toleration"]]), [row["taint"]]) is expected(row)


FILTERS = {
    None: lambda taint: True,  # no filter: every taint counts
    "all": lambda taint: True,
    "none": lambda taint: False,
    "NoExecute": lambda taint: taint["effect"] == "NoExecute",
}


@named(
    tables.TOLERATIONS_TOLERATE_TAINTS_WITH_FILTER + tables.FIND_MATCHING_UNTOLERATED_TAINT_NEWER,
    "description",
)
def test_tolerations_tolerate_taints_with_filter(row: Row) -> None:
    counted = [taint for taint in row["taints"] if FILTERS[row["filter"]](taint)]
    assert tolerates_all(pod(row["tolerations"]), counted) is expected(row)


@named(
    tables.TAINT_TOLERATION_FILTER
    + tables.TAINT_TOLERATION_FILTER_NEWER
    + tables.TAINT_TOLERATION_FILTER_WITH_FEATURE_GATE
)
def test_taint_toleration_filter(row: Row) -> None:
    node = {"spec": {"taints": row["taints"]}}
    assert tolerates_all(pod(row["tolerations"]), blocking_taints(node)) is expected(row)


@named(tables.NODE_UNSCHEDULABLE)
def test_node_unschedulable(row: Row) -> None:
    node = {"spec": {"unschedulable": row["unschedulable"]}}
    assert tolerates_all(pod(row["tolerations"]), blocking_taints(node)) is row["want"]
