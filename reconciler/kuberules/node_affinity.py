"""Kubernetes node selection rules (nodeSelector, required node affinity, taints) evaluated
against a Node's labels, as pure functions over plain dicts.

Used twice: by the scheduler, to turn a Pod's node affinity into Slurm nodes to exclude, and by
the local node agent, which places slurmd Pods as the default scheduler would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def node_matches(pod: Mapping[str, Any], node_labels: Mapping[str, str]) -> bool:
    """Whether a Node with these labels satisfies the Pod's nodeSelector and required affinity."""
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    if any(node_labels.get(k) != v for k, v in selector.items()):
        return False
    terms = required_terms(spec.get("affinity"))
    return not terms or any(_term_matches(term, node_labels) for term in terms)


def has_node_constraints(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return bool(spec.get("nodeSelector") or required_terms(spec.get("affinity")))


def required_terms(affinity: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    node_affinity = (affinity or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return list(required.get("nodeSelectorTerms") or [])


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    # matchFields (metadata.name) is the only field Kubernetes allows; the hostname label
    # carries the same value on every Node we know.
    fields = {"metadata.name": labels.get("kubernetes.io/hostname", "")}
    return all(expression_matches(e, labels) for e in term.get("matchExpressions") or []) and all(
        expression_matches(e, fields) for e in term.get("matchFields") or []
    )


def expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator = expression.get("key"), expression.get("operator")
    values = [str(v) for v in expression.get("values") or []]
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and values:
        try:
            left, right = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False
