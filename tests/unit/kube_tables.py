"""Kubernetes' own scheduler test tables (tests/unit/data/kube_*.yaml), read as data: Pods
built as upstream's test wrappers build them, and which Nodes our rules leave a Pod.

A Node is feasible for us iff it is a candidate and neither `excluded_nodes` (the Pod's own
rules against the placed Pods) nor `excluded_by_placed_rules` (the placed Pods' anti-affinity)
excludes it. Candidates are every Node of the case, as kube-scheduler runs each filter on
every Node whatever NodeAffinity says; spreading still takes its domains only from the Nodes
that pass the Pod's node affinity.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.kuberules.pod_affinity_spread import (
    PlacedPod,
    excluded_by_placed_rules,
    excluded_nodes,
)

DATA = Path(__file__).resolve().parent / "data"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
SUCCESS = "Success"

Row = dict[str, Any]


def load(name: str) -> dict[str, list[Row]]:
    return yaml.safe_load((DATA / name).read_text())


def cases(tables: dict[str, list[Row]], *names: str) -> list[Any]:
    """The rows of the named tables, as pytest params named "<table>: <upstream case name>"."""
    rows = [(name, row) for name in names for row in tables[name]]
    return [pytest.param(row, id=f"{name}: {row['name']}") for name, row in rows]


def pod_object(row: Row) -> dict[str, Any]:
    """A Pod as the test wrappers build it: st.MakePod()'s Name, Namespace, Label, Node,
    Terminating, NodeSelector, NodeAffinityIn/NotIn and SpreadConstraint
    (pkg/scheduler/testing/wrappers.go), and createPodWithAffinityTerms' required terms
    (interpodaffinity/filtering_test.go)."""
    metadata: dict[str, Any] = {
        "name": row.get("name", ""),
        "namespace": row.get("namespace", ""),
        "labels": dict(row.get("labels") or {}),
    }
    if row.get("terminating"):
        metadata["deletionTimestamp"] = "2021-01-13T00:00:00Z"
    spec: dict[str, Any] = {}
    if row.get("node"):
        spec["nodeName"] = row["node"]
    if row.get("nodeSelector"):
        spec["nodeSelector"] = dict(row["nodeSelector"])
    affinity: dict[str, Any] = {}
    for field, operator in (("nodeAffinityIn", "In"), ("nodeAffinityNotIn", "NotIn")):
        if field in row:
            key, values = row[field]
            expression = {"key": key, "operator": operator, "values": list(values)}
            terms = [{"matchExpressions": [expression]}]
            affinity["nodeAffinity"] = {REQUIRED: {"nodeSelectorTerms": terms}}
    for field, kind in (("affinity", "podAffinity"), ("antiAffinity", "podAntiAffinity")):
        if field in row:
            affinity[kind] = {REQUIRED: list(row[field])}
    if affinity:
        spec["affinity"] = affinity
    if "spread" in row:
        spec["topologySpreadConstraints"] = [
            {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
             "labelSelector": selector}
            for skew, key, when, selector in row["spread"]
        ]  # fmt: skip
    return {"metadata": metadata, "spec": spec}


def placed_pods(rows: list[Row]) -> list[PlacedPod]:
    return [
        PlacedPod(row.get("namespace") or "default", dict(row.get("labels") or {}), row["node"],
                  terminating=bool(row.get("terminating")))
        for row in rows
    ]  # fmt: skip


def feasible(case: Row) -> dict[str, bool]:
    """Node -> whether our rules leave the case's Pod that Node."""
    nodes = {name: dict(labels or {}) for name, labels in case["nodes"].items()}
    pod, existing = pod_object(case["pod"]), case.get("pods") or []
    candidates = list(nodes)
    excluded = excluded_nodes(pod, placed_pods(existing), nodes, candidates)
    excluded |= excluded_by_placed_rules(pod, [pod_object(p) for p in existing], nodes, candidates)
    return {node: node in candidates and node not in excluded for node in nodes}


def wanted(case: Row) -> dict[str, bool]:
    """Node -> whether kube-scheduler's Filter passes it (Success) in the upstream table."""
    return {node: code == SUCCESS for node, code in case["want"].items()}
