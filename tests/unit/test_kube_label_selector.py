"""apimachinery 1.20.2's label selector test tables, run against kuberules/label_selector.py.

Source: Kubernetes v1.20.2 (Debian's kubernetes 1.20.5+really1.20.2 source package),
staging/src/k8s.io/apimachinery/pkg/:
- apis/meta/v1/helpers_test.go, TestLabelSelectorAsSelector: every case (the selector's
  String() is compared with `selector_string`, which renders the same syntax).
- labels/selector_test.go, TestRequirementConstructor and TestRequirementSelectorMatching, the
  cases whose operator a LabelSelector can hold (In, NotIn, Exists, DoesNotExist), written as
  one-expression LabelSelectors. Left out: the Gt/Lt cases (4 and 2; metav1 refuses those
  operators in a LabelSelector before building a requirement, see the last rows here) and the
  zero-value Requirement of TestRequirementSelectorMatching (no LabelSelector is one).
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.kuberules.label_selector import selector_error, selector_matches, selector_string

MATCH_LABELS = {"foo": "bar"}
MATCH_EXPRESSIONS = [{"key": "baz", "operator": "In", "values": ["qux", "norf"]}]
BOTH = {"matchLabels": MATCH_LABELS, "matchExpressions": MATCH_EXPRESSIONS}

# TestLabelSelectorAsSelector: (in, out: String() of the selector, or None: an error).
AS_SELECTOR: list[tuple[dict[str, Any] | None, str | None]] = [
    (None, ""),  # labels.Nothing(): matches nothing, prints ""
    ({}, ""),  # labels.Everything()
    ({"matchLabels": MATCH_LABELS}, "foo=bar"),
    ({"matchExpressions": MATCH_EXPRESSIONS}, "baz in (norf,qux)"),
    (BOTH, "baz in (norf,qux),foo=bar"),
    ({"matchExpressions": [{"key": "baz", "operator": "Exists", "values": ["qux", "norf"]}]}, None),
]


@pytest.mark.parametrize(("selector", "out"), AS_SELECTOR)
def test_label_selector_as_selector(selector: dict[str, Any] | None, out: str | None) -> None:
    assert (selector_error(selector) is None) == (out is not None)
    if out is not None and selector is not None:
        assert selector_string(selector) == out


def test_null_selects_nothing_and_empty_everything() -> None:
    assert not selector_matches(None, {})
    assert not selector_matches(None, {"foo": "bar"})
    assert selector_matches({}, {})
    assert selector_matches({"matchLabels": {}, "matchExpressions": []}, {"foo": "bar"})


# TestRequirementConstructor: (key, operator, values, valid), and two rows of ours for what
# metav1.LabelSelectorAsSelector refuses before labels.NewRequirement (the operator).
CONSTRUCTOR: list[tuple[str, str, list[str] | None, bool]] = [
    ("x", "In", None, False),
    ("x", "NotIn", [], False),
    ("x", "In", ["foo"], True),
    ("x", "NotIn", ["foo"], True),
    ("x", "Exists", None, True),
    ("x", "DoesNotExist", None, True),
    ("1foo", "In", ["bar"], True),
    ("1234", "In", ["bar"], True),
    ("a" * 254, "Exists", None, False),  # upstream: "breaks DNS rule that len(key) <= 253"
    ("y", "Gt", ["1"], False),  # ours: not a LabelSelector operator
    ("x", "in", ["foo"], False),  # ours: operators are case-sensitive
]


@pytest.mark.parametrize(("key", "operator", "values", "valid"), CONSTRUCTOR)
def test_requirement_constructor(key: str, operator: str, values: list[str] | None,
                                 valid: bool) -> None:  # fmt: skip
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        expression["values"] = values
    assert (selector_error({"matchExpressions": [expression]}) is None) == valid


# TestRequirementSelectorMatching: (labels, [(key, operator, values)], match).
MATCHING: list[tuple[dict[str, str], list[tuple[str, str, list[str]]], bool]] = [
    ({"x": "foo", "y": "baz"}, [("x", "In", ["foo"]), ("y", "NotIn", ["alpha"])], True),
    ({"x": "foo", "y": "baz"}, [("x", "In", ["foo"]), ("y", "In", ["alpha"])], False),
    ({"y": ""}, [("x", "NotIn", [""]), ("y", "Exists", [])], True),
    ({"y": ""}, [("x", "DoesNotExist", []), ("y", "Exists", [])], True),
    ({"y": ""}, [("x", "NotIn", [""]), ("y", "DoesNotExist", [])], False),
    ({"y": "baz"}, [("x", "In", [""])], False),
]


@pytest.mark.parametrize(("labels", "requirements", "match"), MATCHING)
def test_requirement_selector_matching(
    labels: dict[str, str], requirements: list[tuple[str, str, list[str]]], match: bool
) -> None:
    selector = {
        "matchExpressions": [
            {"key": key, "operator": operator, "values": values}
            for key, operator, values in requirements
        ]
    }
    assert selector_error(selector) is None
    assert selector_matches(selector, labels) == match


def test_invalid_keys_and_values_are_refused_in_kubernetes_words() -> None:
    """The texts are what apimachinery 1.20.2 returns; the second is labels/selector_test.go's
    TestValidatedSelectorFromSet, which builds the same requirement."""
    assert selector_error({"matchLabels": {"app": "{{.bad-value.}}"}}) == (
        'invalid label value: "{{.bad-value.}}": at key: "app": a valid label must be an empty '
        "string or consist of alphanumeric characters, '-', '_' or '.', and must start and end "
        "with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
        "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    )
    too_long = "axahm2EJ8Phiephe2eixohbee9eGeiyees1thuozi1xoh0GiuH3diewi8iem7Nui"
    assert selector_error({"matchLabels": {"Key": too_long}}) == (
        f'invalid label value: "{too_long}": at key: "Key": must be no more than 63 characters'
    )
    assert selector_error({"matchLabels": {"example.com/app": ""}}) is None
    for key in ("/app", "Example.com/app", "a/b/c", "-app", ""):
        error = selector_error({"matchLabels": {key: "x"}})
        assert error is not None and error.startswith(f'invalid label key "{key}"'), key
    assert selector_error({"matchExpressions": [{"key": "a", "operator": "Gt"}]}) == (
        '"Gt" is not a valid pod selector operator'
    )
    assert selector_error({"matchExpressions": [{"key": "a", "operator": "In"}]}) == (
        "for 'in', 'notin' operators, values set can't be empty"
    )


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {"app": 1}},
        {"matchLabels": {"app": None}},
        {"matchExpressions": [{"key": "app", "operator": "In", "values": [1]}]},
        {"matchExpressions": [{"key": 1, "operator": "Exists"}]},
        {"matchExpressions": [{"operator": "Exists"}]},
    ],
)
def test_keys_and_values_that_are_no_strings_are_refused(selector: dict[str, Any]) -> None:
    """The API server would not decode them: YAML's 1 is no label value "1"."""
    assert selector_error(selector) is not None
