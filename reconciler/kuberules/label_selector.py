"""Kubernetes label selectors (LabelSelector: matchLabels and matchExpressions), as pure
functions over plain dicts: whether one selects a set of labels, and its ?labelSelector= text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.kuberules.node_affinity import expression_matches

Obj = Mapping[str, Any]


def selector_matches(selector: Obj | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes LabelSelector semantics: null matches nothing, {} matches everything."""
    if selector is None:
        return False
    match_labels = selector.get("matchLabels") or {}
    if any(labels.get(key) != value for key, value in match_labels.items()):
        return False
    return all(expression_matches(e, labels) for e in selector.get("matchExpressions") or ())


def selector_string(selector: Obj) -> str:
    """The selector in the API's ?labelSelector= syntax: "a=b,c in (x,y),!d,e". An expression
    with an unknown operator, or In/NotIn without values, is left out (the query then returns
    more Pods, never fewer)."""
    parts = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or ():
        part = _expression_string(expression)
        if part:
            parts.append(part)
    return ",".join(parts)


def _expression_string(expression: Obj) -> str:
    key, operator = expression.get("key"), expression.get("operator")
    values = ",".join(sorted({str(v) for v in expression.get("values") or ()}))
    if operator == "Exists":
        return str(key)
    if operator == "DoesNotExist":
        return f"!{key}"
    if operator in ("In", "NotIn") and values:
        return f"{key} {operator.lower()} ({values})"
    return ""
