"""Property tests of the layering rules over generated node-definition-shaped data."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.config.layering import Sourced, deep_update, plain, tag

WORDS = st.sampled_from(["gpu", "las1", "lga1", "cu117", "ib", "x", "y"])
KEYS = st.sampled_from(
    ["features", "resources", "limits", "memory", "cpu", "image", "labels", "a", "b"]
)
SCALARS = st.one_of(WORDS, st.integers(-3, 3), st.booleans())
STRING_LISTS = st.lists(WORDS, max_size=5)
NAMED = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from(["A", "B", "C"]), "value": SCALARS}),
    max_size=4,
)
EXPRESSIONS = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(["topology.kubernetes.io/region", "gpu.nvidia.com/model"]),
            "operator": st.just("In"),
            "values": STRING_LISTS,
        }
    ),
    max_size=3,
)
AFFINITY = EXPRESSIONS.map(
    lambda exprs: {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": exprs}]
            }
        }
    }
)
TREES = st.recursive(
    st.one_of(SCALARS, STRING_LISTS, NAMED),
    lambda children: st.dictionaries(KEYS, children, max_size=4),
    max_leaves=12,
)
LAYERS = st.fixed_dictionaries(
    {},
    optional={
        "features": STRING_LISTS,
        "env": NAMED,
        "resources": TREES,
        "affinity": AFFINITY,
        "replicas": st.integers(0, 4),
        "image": st.fixed_dictionaries({}, optional={"repository": WORDS, "tag": WORDS}),
        "extra": TREES,
    },
)


@settings(max_examples=300)
@given(LAYERS, LAYERS)
def test_applying_a_layer_twice_changes_nothing(
    dest: dict[str, Any], layer: dict[str, Any]
) -> None:
    once = deep_update(dest, layer)
    assert deep_update(once, layer) == once


@settings(max_examples=300)
@given(st.lists(LAYERS, max_size=5), LAYERS)
def test_inline_keys_always_win(layers: list[dict[str, Any]], inline: dict[str, Any]) -> None:
    composed: dict[str, Any] = {}
    for layer in layers:
        composed = deep_update(composed, layer)
    result = deep_update(composed, inline)
    for path, value in _leaves(inline):
        got = _get(result, path)
        if isinstance(value, list) and all(not isinstance(v, dict) for v in value):
            assert all(v in got for v in value), (path, value, got)  # unioned, never lost
        elif not isinstance(value, list):
            assert got == value, (path, value, got)


@settings(max_examples=300)
@given(STRING_LISTS, STRING_LISTS)
def test_string_list_union_keeps_first_seen_order_without_duplicates(
    a: list[str], b: list[str]
) -> None:
    merged = deep_update({"features": a}, {"features": b})["features"]
    assert len(merged) == len(set(merged))
    assert set(merged) == set(a) | set(b)
    expected = list(dict.fromkeys([*a, *b]))
    assert merged == expected


@given(LAYERS, LAYERS)
def test_inputs_are_not_modified(dest: dict[str, Any], layer: dict[str, Any]) -> None:
    before = (copy.deepcopy(dest), copy.deepcopy(layer))
    result = deep_update(dest, layer)
    assert (dest, layer) == before
    _mutate_everything(result)
    assert (dest, layer) == before


@given(LAYERS, LAYERS)
def test_tracking_origins_does_not_change_the_result(
    dest: dict[str, Any], layer: dict[str, Any]
) -> None:
    tagged = deep_update(tag(dest, lambda p: "dest"), tag(layer, lambda p: "layer"))
    assert plain(tagged) == deep_update(dest, layer)


def test_origin_of_an_overridden_value_is_the_later_layer() -> None:
    result = deep_update(
        tag({"a": 1, "b": 2}, lambda p: "first"), tag({"a": 3}, lambda p: "second")
    )
    assert result == {"a": Sourced(3, "second"), "b": Sourced(2, "first")}


def test_null_removes_a_key_as_in_helm() -> None:
    assert deep_update({"a": 1, "b": {"c": 2}}, {"b": None}) == {"a": 1}


def test_args_and_command_are_replaced_not_unioned() -> None:
    dest = {"containers": [{"name": "s", "args": ["-v", "-v", "x"]}]}
    layer = {"containers": [{"name": "s", "args": ["-d", "-d"]}]}
    assert deep_update(dest, layer)["containers"][0]["args"] == ["-d", "-d"]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """Leaf paths of `value`; an empty mapping adds nothing, so it has no leaf to win."""
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, (*path, k))]
    return [(path, value)]


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def _mutate_everything(value: Any) -> None:
    if isinstance(value, dict):
        for v in value.values():
            _mutate_everything(v)
        value["__mutated__"] = True
    elif isinstance(value, list):
        for v in value:
            _mutate_everything(v)
        value.append("__mutated__")
