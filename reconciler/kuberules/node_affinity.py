"""Kubernetes node selection rules (nodeSelector and required node affinity) evaluated against
a Node's labels and name, as pure functions over plain dicts.

Used by the scheduler, to turn a Pod's node affinity into Slurm nodes to exclude, and by the
local node agent, which places slurmd Pods as the default scheduler would.

Each rule follows Kubernetes' own code, checked against v1.20.2 (the kube-scheduler we run as
an oracle) and the current upstream, which agree on every input a 1.20 API server accepts:

- node_matches: PodMatchesNodeSelectorAndAffinityTerms (1.20.2
  pkg/scheduler/framework/plugins/helper/node_affinity.go; now GetRequiredNodeAffinity(pod).Match
  in component-helpers/scheduling/corev1/nodeaffinity). A nodeSelector is compared as written
  (labels.SelectorFromSet validates nothing); a null required affinity imposes nothing, while a
  present one with no terms matches no Node.
- node_selector_matches: MatchNodeSelectorTerms and LazyErrorNodeSelector.Match
  (component-helpers/scheduling/corev1, the same code in 1.20.2): terms are ORed; an empty
  term, or one holding an invalid requirement, matches nothing, and the other terms still count.
- requirement_error: labels.NewRequirement behind nodeSelectorRequirementsAsSelector (apimachinery
  pkg/labels/selector.go), or with LABEL_SELECTOR_OPERATORS behind metav1.LabelSelectorAsSelector
  (label_selector's check), refusing in their words: the key must be a qualified name, every
  value a label value; In and NotIn need values, Exists and DoesNotExist none, Gt and Lt exactly
  one int64.
- field_requirement_error / matchFields: nodeSelectorRequirementsAsFieldSelector: In or NotIn
  with exactly one value, compared with the Node's fields, of which there is one, metadata.name.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from typing import Any, Final

from reconciler.kuberules.integers import parse_int
from reconciler.kuberules.validation import is_qualified_name, is_valid_label_value
from reconciler.objects import ReadObj as Obj

Parts = tuple[str, str, tuple[str, ...]]  # a requirement's key, operator and values

HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
NODE_NAME_FIELD: Final = "metadata.name"
# NodeSelectorOperator values; a LabelSelector (pod affinity, spread) has no Gt or Lt.
NODE_SELECTOR_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
LABEL_SELECTOR_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
FIELD_SELECTOR_OPERATORS: Final = frozenset({"In", "NotIn"})

# How a selector refuses an operator it does not know (nodeSelectorRequirementsAsSelector,
# metav1.LabelSelectorAsSelector; NewRequirement's own words for any other set).
_UNKNOWN_OPERATOR: Final = {
    NODE_SELECTOR_OPERATORS: '"{}" is not a valid node selector operator',
    LABEL_SELECTOR_OPERATORS: '"{}" is not a valid pod selector operator',
}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def node_matches(pod: Obj, node_labels: Mapping[str, str], node_name: str | None = None) -> bool:
    """Whether the Node satisfies the Pod's nodeSelector and required node affinity.
    `node_name` (matchFields' metadata.name) defaults to the Node's hostname label."""
    spec = pod.get("spec") or {}
    if not _node_selector_holds(spec.get("nodeSelector") or {}, node_labels):
        return False
    required = required_node_selector(spec.get("affinity"))
    return required is None or node_selector_matches(required, node_labels, node_name)


def has_node_constraints(pod: Obj) -> bool:
    """Whether the Pod's nodeSelector or required node affinity can rule any Node out."""
    spec = pod.get("spec") or {}
    required = required_node_selector(spec.get("affinity"))
    return bool(spec.get("nodeSelector")) or required is not None


def required_node_selector(affinity: Obj | None) -> Obj | None:
    """requiredDuringSchedulingIgnoredDuringExecution, or None where it is absent or null: a
    present one, even {}, is a rule (with no terms it matches no Node)."""
    node_affinity = (affinity or {}).get("nodeAffinity") or {}
    return node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")


def required_terms(affinity: Obj | None) -> list[Obj]:
    """The required nodeSelectorTerms as written ([] also when there is no requirement)."""
    return list((required_node_selector(affinity) or {}).get("nodeSelectorTerms") or [])


def node_selector_matches(
    node_selector: Obj, node_labels: Mapping[str, str] | None, node_name: str | None = None
) -> bool:
    """MatchNodeSelectorTerms: whether any term matches; `node_labels` None is no Node at all."""
    if node_labels is None:
        return False
    name = node_labels.get(HOSTNAME_LABEL, "") if node_name is None else node_name
    # extractNodeFields: a Node without a name has no fields, and matchFields are then skipped.
    fields = {NODE_NAME_FIELD: name} if name else {}
    terms = node_selector.get("nodeSelectorTerms") or []
    return any(_term_matches(term, node_labels, fields) for term in terms)


def _term_matches(term: Obj | None, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
    term = term or {}  # a null term decodes as an empty one
    expressions = [_parts(e) for e in term.get("matchExpressions") or []]
    field_rules = [_parts(f) for f in term.get("matchFields") or []]
    if not expressions and not field_rules:
        return False  # an empty term selects nothing
    if any(_error(p, NODE_SELECTOR_OPERATORS) for p in expressions):
        return False  # a parse error fails this term only
    if any(_field_error(p) for p in field_rules):
        return False
    if not all(_holds(p, labels) for p in expressions):
        return False
    return not fields or all(_field_holds(p, fields) for p in field_rules)


def expression_matches(
    expression: Obj,
    labels: Mapping[str, str],
    *,
    operators: Collection[str] = NODE_SELECTOR_OPERATORS,
) -> bool:
    """One requirement, validated as NewRequirement does (an invalid one matches nothing)."""
    parts = _parts(expression)
    return _error(parts, operators) is None and _holds(parts, labels)


def requirement_error(
    expression: Obj, *, operators: Collection[str] = NODE_SELECTOR_OPERATORS
) -> str | None:
    """Why Kubernetes refuses this requirement, in its words, or None if it is valid: the
    selector's operator switch (`operators`: a node or a label selector's), then NewRequirement."""
    return _error(_parts(expression), operators)


def _error(parts: Parts, operators: Collection[str]) -> str | None:
    key, operator, values = parts
    if operator not in operators:
        unknown = _UNKNOWN_OPERATOR.get(frozenset(operators), "operator '{}' is not recognized")
        return unknown.format(operator)
    return _new_requirement_error(key, operator, values)


# A Pod's requirements are checked against every Node: validate each distinct one once.
@functools.lru_cache(maxsize=4096)
def _new_requirement_error(key: str, operator: str, values: tuple[str, ...]) -> str | None:
    """labels.NewRequirement's refusal, in its words, or None: the key a qualified name; In
    and NotIn with values, Exists and DoesNotExist without, Gt and Lt with one int64; every
    value a label value. Asked once the selector has accepted the operator."""
    errors = is_qualified_name(key)
    if errors:
        return f'invalid label key "{key}": {"; ".join(errors)}'
    if operator in ("In", "NotIn") and not values:
        return "for 'in', 'notin' operators, values set can't be empty"
    if operator in ("Exists", "DoesNotExist") and values:
        return "values set must be empty for exists and does not exist"
    if operator in ("Gt", "Lt") and len(values) != 1:
        return "for 'Gt', 'Lt' operators, exactly one value is required"
    if operator in ("Gt", "Lt") and _int64(values[0]) is None:
        return "for 'Gt', 'Lt' operators, the value must be an integer"
    for value in values:
        errors = is_valid_label_value(value)
        if errors:
            return f'invalid label value: "{value}": at key: "{key}": {"; ".join(errors)}'
    return None


def _holds(parts: Parts, labels: Mapping[str, str]) -> bool:
    key, operator, values = parts
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator in ("Exists", "DoesNotExist"):
        return present == (operator == "Exists")
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        return _compare(operator, _int64(labels[key]), _int64(values[0]))
    return False


def _compare(operator: str, left: int | None, right: int | None) -> bool:
    # A label or a value that is no int64 makes the requirement false.
    if left is None or right is None:
        return False
    return left > right if operator == "Gt" else left < right


def field_requirement_error(expression: Obj) -> str | None:
    """nodeSelectorRequirementsAsFieldSelector: In or NotIn with exactly one value (the key is
    not checked here; the API server allows only metadata.name)."""
    return _field_error(_parts(expression))


def _field_error(parts: Parts) -> str | None:
    _, operator, values = parts
    if operator not in FIELD_SELECTOR_OPERATORS:
        return f"operator {operator!r} is not one of {sorted(FIELD_SELECTOR_OPERATORS)}"
    return None if len(values) == 1 else "matchFields need exactly one value"


def _field_holds(parts: Parts, fields: Mapping[str, str]) -> bool:
    # fields.OneTermEqualSelector / OneTermNotEqualSelector: a missing field reads as "".
    key, operator, values = parts
    return (fields.get(key, "") == values[0]) == (operator == "In")


def _node_selector_holds(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    return all(key in labels and labels[key] == value for key, value in selector.items())


def _parts(expression: Obj | None) -> Parts:
    expression = expression or {}  # a null requirement decodes as the zero (invalid) one
    key, operator = expression.get("key"), expression.get("operator")
    values = tuple(str(v) for v in expression.get("values") or ())
    return ("" if key is None else str(key)), ("" if operator is None else str(operator)), values


def _int64(text: str) -> int | None:
    """strconv.ParseInt(s, 10, 64), its digits counted before int() (integers.py)."""
    number = parse_int(text, _INT64_MIN, _INT64_MAX, plus=True)
    return number if isinstance(number, int) else None
