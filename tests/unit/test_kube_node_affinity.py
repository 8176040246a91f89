"""Node selection as Kubernetes does it: its own test tables (tests/unit/data/
kube_node_affinity_tables.py, each naming its upstream file, function and version) and the
degenerate inputs around them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.kuberules.node_affinity import (
    LABEL_SELECTOR_OPERATORS,
    expression_matches,
    field_requirement_error,
    has_node_constraints,
    node_matches,
    node_selector_matches,
    requirement_error,
)
from tests.unit.data import kube_node_affinity_tables as tables

Row = dict[str, Any]


def named(rows: list[Row], key: str = "name") -> Any:
    return pytest.mark.parametrize("row", rows, ids=[str(r[key])[:80] for r in rows])


def expected(row: Row, want: str = "want") -> bool:
    """Upstream's verdict, or ours where the row documents a deliberate difference."""
    if "ours" in row or "ours_valid" in row:
        assert row["why"], "a deliberate difference says why"
        return row.get("ours", row.get("ours_valid"))
    return row[want]


@named(tables.POD_MATCHES_NODE_SELECTOR_AND_AFFINITY_TERMS)
def test_pod_matches_node_selector_and_affinity_terms(row: Row) -> None:
    assert node_matches(row["pod"], row["labels"], row["node_name"]) is row["want"]


@named(tables.NODE_AFFINITY_ADDED_AFFINITY + tables.NODE_AFFINITY_SINCE_1_20)
def test_node_affinity_filter(row: Row) -> None:
    assert node_matches(row["pod"], row["labels"], row["node_name"]) is expected(row)


def node_args(node: Row | None) -> tuple[dict[str, str] | None, str | None]:
    return (None, None) if node is None else (node["labels"], node["name"])


@named(tables.MATCH_NODE_SELECTOR_TERMS)
def test_match_node_selector_terms(row: Row) -> None:
    labels, name = node_args(row["node"])
    assert node_selector_matches(row["node_selector"] or {}, labels, name) is row["want"]


@named(tables.MATCH_NODE_SELECTOR_TERMS_STATELESS)
def test_match_node_selector_terms_leaves_the_selector_as_it_was(row: Row) -> None:
    before = copy.deepcopy(row["node_selector"])
    node_selector_matches(row["node_selector"] or {}, *node_args(row["node"]))
    assert row["node_selector"] == before


def invalid_requirements(node_selector: Row) -> list[str]:
    """NewNodeSelector's error paths: every invalid requirement of every term."""
    paths = []
    for i, term in enumerate(node_selector.get("nodeSelectorTerms") or []):
        for kind, check in (("matchExpressions", requirement_error),
                            ("matchFields", field_requirement_error)):  # fmt: skip
            paths += [
                f"nodeSelectorTerms[{i}].{kind}[{j}]"
                for j, requirement in enumerate(term.get(kind) or [])
                if check(requirement)
            ]
    return paths


@named(tables.NODE_SELECTOR_MATCH)
def test_node_selector_match(row: Row) -> None:
    assert invalid_requirements(row["node_selector"]) == row["want_errors"]
    labels, name = node_args(row["node"])
    assert node_selector_matches(row["node_selector"], labels, name) is row["want_match"]


@pytest.mark.parametrize("row", tables.NODE_SELECTOR_REQUIREMENTS_AS_SELECTOR)
def test_node_selector_requirements_as_selector(row: Row) -> None:
    requirements = row["in"] or []
    assert any(requirement_error(r) for r in requirements) is row["want_error"]
    if row["out"] == "":  # labels.Nothing(): a term without requirements selects no Node
        term = {"nodeSelectorTerms": [{"matchExpressions": requirements}]}
        assert not node_selector_matches(term, {"foo": "bar"}, "node")


@named(tables.REQUIREMENT_CONSTRUCTOR + tables.REQUIREMENT_CONSTRUCTOR_NEWER, "key")
def test_requirement_constructor(row: Row) -> None:
    requirement = {"key": row["key"], "operator": row["operator"], "values": row["values"]}
    assert (requirement_error(requirement) is None) is expected(row, "valid")


@pytest.mark.parametrize("row", tables.REQUIREMENT_SELECTOR_MATCHING)
def test_requirement_selector_matching(row: Row) -> None:
    matches = all(expression_matches(r, row["labels"]) for r in row["requirements"])
    assert matches is row["match"]


_NAME_PATTERN = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_VALUE_PATTERN = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


@pytest.mark.parametrize(
    ("key", "operator", "values", "error"),
    [
        ("a", "in", ["x"], '"in" is not a valid node selector operator'),
        ("-a", "In", ["x"], f'invalid label key "-a": name part {_NAME_PATTERN}'),
        ("a", "In", [], "for 'in', 'notin' operators, values set can't be empty"),
        ("a", "Exists", ["x"], "values set must be empty for exists and does not exist"),
        ("a", "Gt", ["1", "2"], "for 'Gt', 'Lt' operators, exactly one value is required"),
        ("a", "Lt", ["x"], "for 'Gt', 'Lt' operators, the value must be an integer"),
        ("a", "In", ["x", "-1"], f'invalid label value: "-1": at key: "a": {_VALUE_PATTERN}'),
    ],
)
def test_requirements_are_refused_in_kubernetes_words(
    key: str, operator: str, values: list[str], error: str
) -> None:
    """What nodeSelectorRequirementsAsSelector and NewRequirement (1.20.2) return, run there."""
    requirement = {"key": key, "operator": operator, "values": values}
    assert requirement_error(requirement) == error


# ---- the degenerate inputs, one by one -----------------------------------------------------


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def with_required(node_selector: Any) -> Row:
    return {"spec": {"affinity": {"nodeAffinity": {REQUIRED: node_selector}}}}


def required(*expressions: Row, fields: tuple[Row, ...] = ()) -> Row:
    term: Row = {"matchExpressions": list(expressions)}
    if fields:
        term["matchFields"] = list(fields)
    return with_required({"nodeSelectorTerms": [term]})


@pytest.mark.parametrize(
    ("expression", "labels", "matches"),
    [
        # Gt/Lt: exactly one int64 value; a label that is no integer makes the requirement false
        ({"key": "k", "operator": "Gt", "values": ["4"]}, {"k": "8"}, True),
        ({"key": "k", "operator": "Gt", "values": ["4"]}, {"k": "eight"}, False),
        ({"key": "k", "operator": "Gt", "values": ["4"]}, {"k": " 8"}, False),
        ({"key": "k", "operator": "Gt", "values": ["4"]}, {"k": "9223372036854775808"}, False),
        ({"key": "k", "operator": "Lt", "values": ["4"]}, {"k": "-8"}, True),
        ({"key": "k", "operator": "Gt", "values": ["four"]}, {"k": "8"}, False),
        ({"key": "k", "operator": "Gt", "values": ["4", "5"]}, {"k": "8"}, False),
        ({"key": "k", "operator": "Gt", "values": []}, {"k": "8"}, False),
        ({"key": "k", "operator": "Lt", "values": ["-1"]}, {"k": "-8"}, False),  # no label value
        # In/NotIn need values; Exists/DoesNotExist take none
        ({"key": "k", "operator": "NotIn", "values": []}, {}, False),
        ({"key": "k", "operator": "In", "values": []}, {"k": ""}, False),
        ({"key": "k", "operator": "Exists", "values": ["a"]}, {"k": "a"}, False),
        ({"key": "k", "operator": "DoesNotExist", "values": ["a"]}, {}, False),
        # the key and every value must be valid label parts, NotIn included
        ({"key": "k", "operator": "NotIn", "values": ["a b"]}, {"k": "c"}, False),
        ({"key": "bad key", "operator": "NotIn", "values": ["a"]}, {}, False),
        ({"key": "example.com/k", "operator": "In", "values": ["a"]}, {"example.com/k": "a"}, True),
        ({"key": "Example.com/k", "operator": "Exists"}, {"Example.com/k": "a"}, False),
        ({"operator": "DoesNotExist"}, {}, False),
        ({"key": "k", "operator": "in", "values": ["a"]}, {"k": "a"}, False),
    ],
)
def test_each_requirement_is_validated_then_matched(
    expression: Row, labels: dict[str, str], matches: bool
) -> None:
    assert node_matches(required(expression), labels) is matches


def test_an_invalid_term_leaves_the_other_terms_matching() -> None:
    """LazyErrorNodeSelector (component-helpers, already so in 1.20.2)."""
    invalid = {"matchExpressions": [{"key": "k", "operator": "NotIn", "values": []}]}
    valid = {"matchExpressions": [{"key": "k", "operator": "Exists"}]}
    pod = with_required({"nodeSelectorTerms": [invalid, valid]})
    assert node_matches(pod, {"k": "a"})
    assert not node_matches(pod, {})


@pytest.mark.parametrize(
    ("field", "name", "matches"),
    [
        ({"key": "metadata.name", "operator": "In", "values": ["n1"]}, "n1", True),
        ({"key": "metadata.name", "operator": "In", "values": ["n1"]}, "n2", False),
        ({"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}, "n2", True),
        ({"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}, "n1", False),
        ({"key": "metadata.name", "operator": "In", "values": []}, "n1", False),
        ({"key": "metadata.name", "operator": "Exists"}, "n1", False),
        # the matcher reads any key as a field the Node lacks ("" ); the API server allows
        # metadata.name only
        ({"key": "spec.unschedulable", "operator": "NotIn", "values": ["x"]}, "n1", True),
        # a Node without a name has no fields: matchFields are skipped
        ({"key": "metadata.name", "operator": "In", "values": ["n1"]}, "", True),
    ],
)
def test_match_fields_compare_the_node_name(field: Row, name: str, matches: bool) -> None:
    assert node_matches(required(fields=(field,)), {}, name) is matches


def test_the_node_name_defaults_to_the_hostname_label() -> None:
    pod = required(fields=({"key": "metadata.name", "operator": "In", "values": ["n1"]},))
    assert node_matches(pod, {"kubernetes.io/hostname": "n1"})
    assert not node_matches(pod, {"kubernetes.io/hostname": "n1"}, "n2")


@pytest.mark.parametrize(
    ("pod", "constrained", "matches"),
    [
        ({"spec": {}}, False, True),
        ({"spec": {"nodeSelector": None}}, False, True),
        ({"spec": {"nodeSelector": {}}}, False, True),
        ({"spec": {"affinity": None}}, False, True),
        ({"spec": {"affinity": {"nodeAffinity": None}}}, False, True),
        (with_required(None), False, True),
        # a present required affinity is a rule, even an empty one: it matches no Node
        (with_required({}), True, False),
        (with_required({"nodeSelectorTerms": None}), True, False),
        (with_required({"nodeSelectorTerms": [{}, {"matchFields": []}, None]}), True, False),
    ],
)
def test_null_imposes_nothing_and_empty_required_matches_nothing(
    pod: Row, constrained: bool, matches: bool
) -> None:
    assert has_node_constraints(pod) is constrained
    assert node_matches(pod, {"a": "b"}, "node") is matches


def test_a_node_selector_is_compared_as_written() -> None:
    """labels.SelectorFromSet validates nothing (1.20.2 and current; a 1.20 API server refuses
    an invalid value, so only hand-made Pods carry one)."""
    pod = {"spec": {"nodeSelector": {"k": "a b"}}}
    assert node_matches(pod, {"k": "a b"})
    assert not node_matches(pod, {"k": "a"})
    assert not node_matches({"spec": {"nodeSelector": {"k": ""}}}, {})


def test_label_selectors_refuse_gt_and_lt() -> None:
    """LabelSelectorAsSelector knows In, NotIn, Exists and DoesNotExist only."""
    expression = {"key": "k", "operator": "Gt", "values": ["1"]}
    assert expression_matches(expression, {"k": "2"})
    assert not expression_matches(expression, {"k": "2"}, operators=LABEL_SELECTOR_OPERATORS)
    assert requirement_error(expression, operators=LABEL_SELECTOR_OPERATORS)


label_parts = st.from_regex(r"[a-z0-9]([a-z0-9._-]{0,8}[a-z0-9])?", fullmatch=True)


@given(
    st.sampled_from(sorted(LABEL_SELECTOR_OPERATORS)),
    label_parts,
    st.lists(label_parts, min_size=1, max_size=3),
    st.dictionaries(label_parts, label_parts, max_size=3),
)
def test_valid_label_selector_requirements_keep_their_plain_meaning(
    operator: str, key: str, values: list[str], labels: dict[str, str]
) -> None:
    """What label_selector relies on: on valid requirements, the plain set semantics."""
    takes_values = operator in ("In", "NotIn")
    expression = {"key": key, "operator": operator, "values": values if takes_values else []}
    plain = {
        "In": key in labels and labels[key] in values,
        "NotIn": key not in labels or labels[key] not in values,
        "Exists": key in labels,
        "DoesNotExist": key not in labels,
    }[operator]
    assert expression_matches(expression, labels, operators=LABEL_SELECTOR_OPERATORS) is plain
