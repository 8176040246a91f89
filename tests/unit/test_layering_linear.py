"""Named list items are merged through an index, in linear time. The result is the
one the scan per item gave, kept here as the reference."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.config.layering import (
    Sourced,
    _copy,
    _hashable,
    _leaf,
    _merge_by_key,
    _replace_lists,
    deep_update,
    plain,
)


def _reference(
    dest: list[dict[str, Any]], src: list[dict[str, Any]], ident: str, *, replace_lists: bool
) -> list[dict[str, Any]]:
    """_merge_by_key as it was before the index (a scan of `out` for each item)."""
    out = [_copy(item) for item in dest]
    for item in src:
        ident_value = _leaf(item.get(ident))
        found = [
            i
            for i, o in enumerate(out)
            if isinstance(o, dict) and _leaf(o.get(ident)) == ident_value
        ]
        index = found[0] if found and ident_value is not None else None
        if index is None:
            markers = {_hashable(plain(o)) for o in out}
            if ident_value is not None or _hashable(plain(item)) not in markers:
                out.append(_copy(item))
        elif replace_lists:
            out[index] = _replace_lists(out[index], item)
        else:
            out[index] = deep_update(out[index], item)
    return out


VALUES = st.one_of(st.sampled_from(["x", "y"]), st.integers(0, 2), st.booleans())
NAMES = st.one_of(st.none(), st.sampled_from(["A", "B", "C"]), st.integers(0, 2), st.just(["L"]))
ITEMS = st.builds(
    lambda name, value, sourced: {
        **({} if name is None else {"name": Sourced(name, "x") if sourced else name}),
        "value": value,
    },
    NAMES,
    VALUES,
    st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(ITEMS, max_size=6), st.lists(ITEMS, max_size=6), st.booleans())
def test_the_index_merges_as_the_scan_did(
    dest: list[dict[str, Any]], src: list[dict[str, Any]], replace_lists: bool
) -> None:
    got = _merge_by_key(dest, src, "name", replace_lists=replace_lists)
    assert got == _reference(dest, src, "name", replace_lists=replace_lists)
