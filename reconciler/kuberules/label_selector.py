"""Kubernetes label selectors (LabelSelector: matchLabels and matchExpressions), as pure
functions over plain dicts, read as apimachinery 1.20's metav1.LabelSelectorAsSelector reads
them: whether one is valid, whether it selects a set of labels, and its ?labelSelector= text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from reconciler.kuberules.node_affinity import expression_matches

Obj = Mapping[str, Any]

OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")
# k8s.io/apimachinery/pkg/util/validation: IsQualifiedName, IsValidLabelValue,
# IsDNS1123Subdomain (a key's prefix).
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_NAME_MAX, _PREFIX_MAX = 63, 253


def selector_error(selector: Obj | None) -> str | None:
    """Why metav1.LabelSelectorAsSelector refuses the selector (the first reason, in its
    words), or None when it is valid. Null (matches nothing) and {} (everything) are valid;
    an unknown operator, In/NotIn without values, Exists/DoesNotExist with values, or a key or
    value that is not a valid label key or value are not."""
    if selector is None:
        return None
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        error = _key_error(key) or _value_error(key, value)
        if error:
            return error
    for expression in selector.get("matchExpressions") or ():
        error = _expression_error(expression)
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


def _expression_error(expression: Obj) -> str | None:
    key, operator = expression.get("key"), expression.get("operator")
    values = list(expression.get("values") or ())
    if operator not in OPERATORS:
        return f'"{operator}" is not a valid pod selector operator'
    error = _key_error(key)
    if error:
        return error
    if operator in ("In", "NotIn") and not values:
        return "for 'in', 'notin' operators, values set can't be empty"
    if operator in ("Exists", "DoesNotExist") and values:
        return "values set must be empty for exists and does not exist"
    for value in values:
        error = _value_error(key, value)
        if error:
            return error
    return None


def _key_error(key: object) -> str | None:
    """IsQualifiedName: an optional DNS-subdomain prefix and "/", then a name of 63 or fewer
    alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric."""
    parts = (key if isinstance(key, str) else "").split("/")
    if len(parts) > 2:
        return f"invalid label key \"{key}\": a qualified name has one '/' at the most"
    prefix, name = parts if len(parts) == 2 else ("", parts[0])
    reasons = []
    if len(parts) == 2 and not prefix:
        reasons.append("prefix part must be non-empty")
    elif prefix and (len(prefix) > _PREFIX_MAX or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        reasons.append("prefix part must be a lowercase RFC 1123 subdomain")
    if not name:
        reasons.append("name part must be non-empty")
    elif len(name) > _NAME_MAX:
        reasons.append(f"name part must be no more than {_NAME_MAX} characters")
    if not _NAME.fullmatch(name):
        reasons.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return f'invalid label key "{key}": {"; ".join(reasons)}' if reasons else None


def _value_error(key: object, value: object) -> str | None:
    """IsValidLabelValue: empty, or 63 or fewer name characters."""
    text = value if isinstance(value, str) else None
    if text is not None and len(text) <= _NAME_MAX and (not text or _NAME.fullmatch(text)):
        return None
    return (
        f'invalid label value: "{value}": at key: "{key}": a valid label must be an empty '
        f"string or consist of {_NAME_MAX} or fewer alphanumeric characters, '-', '_' or '.', "
        "and must start and end with an alphanumeric character"
    )


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
