"""Kubernetes label selectors (LabelSelector: matchLabels and matchExpressions), as pure
functions over plain dicts, read as apimachinery 1.20's metav1.LabelSelectorAsSelector reads
them: whether one is valid, whether it selects a set of labels, and its ?labelSelector= text.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.kuberules.node_affinity import (
    LABEL_SELECTOR_OPERATORS,
    expression_matches,
    requirement_error,
)
from reconciler.objects import ReadObj as Obj


def selector_error(selector: Obj | None) -> str | None:
    """Why metav1.LabelSelectorAsSelector refuses the selector (the first reason, in its
    words), or None when it is valid. Null (matches nothing) and {} (everything) are valid;
    an unknown operator, In/NotIn without values, Exists/DoesNotExist with values, or a key or
    value that is not a valid label key or value are not."""
    if selector is None:
        return None
    # A matchLabels pair is NewRequirement(key, Equals, [value]), refused as In with that value is.
    pairs = sorted((selector.get("matchLabels") or {}).items())
    expressions = [{"key": key, "operator": "In", "values": [value]} for key, value in pairs]
    for expression in [*expressions, *(selector.get("matchExpressions") or ())]:
        error = requirement_error(expression, operators=LABEL_SELECTOR_OPERATORS)
        error = error or _not_strings(expression)
        if error:
            return error
    return None


def selector_matches(selector: Obj | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes LabelSelector semantics: null matches nothing, {} matches everything, else
    every matchLabels pair and every expression must hold. For a valid selector (see
    `selector_error`; Kubernetes would not build an invalid one)."""
    if selector is None:
        return False
    match_labels = selector.get("matchLabels") or {}
    if any(labels.get(key) != value for key, value in match_labels.items()):
        return False
    return all(expression_matches(e, labels) for e in selector.get("matchExpressions") or ())


def selector_string(selector: Obj) -> str:
    """The selector in the API's ?labelSelector= syntax, ordered by key as labels.Selector's
    String() orders it: "a=b,c in (x,y),!d,e". An expression with an unknown operator, or
    In/NotIn without values, is left out (the query then returns more Pods, never fewer)."""
    match_labels = (selector.get("matchLabels") or {}).items()
    parts = [(str(key), f"{key}={value}") for key, value in match_labels]
    for expression in selector.get("matchExpressions") or ():
        part = _expression_string(expression)
        if part:
            parts.append((str(expression.get("key")), part))
    return ",".join(part for _, part in sorted(parts, key=lambda item: item[0]))


def _not_strings(expression: Obj) -> str | None:
    """Label keys and values are strings on the wire. requirement_error reads another type as
    its text, but YAML's 1 or null is no label key or value: the API server would not decode it."""
    key, values = expression.get("key"), expression.get("values") or ()
    odd = [item for item in (key, *values) if not isinstance(item, str)]
    return f"label keys and values are strings, not {odd[0]!r}" if odd else None


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
