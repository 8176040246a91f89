"""SUNK's "deep update" of node-definition layers (SUNK's "Slurm Workload Manager" page,
"Layering"), as a pure function.

`deep_update(dest, src)` returns a new value; neither argument is changed. The rules:

- dict + dict: recurse key by key; keys only in `src` are added.
- list of scalars + list of scalars: union, first-seen order, no duplicates. Except a
  container's `args` and `command`, where order and repeats matter: the later list replaces.
- list of dicts + list of dicts: items matched by `name` (recurse on a match, append
  otherwise); items without a `name` are appended unless an equal item is already there.
- nodeAffinity `nodeSelectorTerms`: SUNK assumes one term per definition, so terms are merged
  by position; inside a term, `matchExpressions` are matched by `key` and the later
  expression's `values` replace the earlier ones (that is how a region layer moves a
  definition from LAS1 to LGA1).
- anything else (scalars, or a type change): `src` wins. An explicit `null` removes the key,
  as it does in Helm values.

Leaves may be wrapped in `Sourced` to remember which layer set them (`compile --explain`);
every comparison looks through the wrapper, so the same code serves both uses.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

_NODE_SELECTOR_TERMS = "nodeSelectorTerms"
_MATCH_LISTS = {"matchExpressions": "key", "matchFields": "key"}
_ORDERED_LISTS = frozenset({"args", "command"})


@dataclass(frozen=True, slots=True)
class Sourced:
    """A leaf value and where it came from (a layer name and file:line)."""

    value: Any
    origin: str


def plain(value: Any) -> Any:
    """The value with every `Sourced` wrapper removed."""
    if isinstance(value, Sourced):
        return value.value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _leaf(value: Any) -> Any:
    """One level of unwrapping: enough for a leaf, and free for containers (never wrapped)."""
    return value.value if isinstance(value, Sourced) else value


def deep_update(dest: Any, src: Any, *, key: str | None = None) -> Any:
    """Apply layer `src` on top of `dest` and return the result (inputs are not modified)."""
    if isinstance(dest, dict) and isinstance(src, dict):
        return _update_dict(dest, src)
    if isinstance(dest, list) and isinstance(src, list):
        return _update_list(dest, src, key)
    return _copy(src, key)


def _update_dict(dest: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    out = {k: v if k in src else _copy(v, k) for k, v in dest.items()}
    for k, v in src.items():
        if _leaf(v) is None:
            out.pop(k, None)
        elif k in out:
            out[k] = deep_update(out[k], v, key=k)
        else:
            out[k] = _copy(v, k)
    return out


def _update_list(dest: list[Any], src: list[Any], key: str | None) -> list[Any]:
    if key == _NODE_SELECTOR_TERMS:
        return _merge_by_position(dest, src)
    if key in _MATCH_LISTS:
        return _merge_by_key(dest, src, _MATCH_LISTS[key], replace_lists=True)
    if key in _ORDERED_LISTS:
        return _copy(src, key)
    if _all_scalars(dest) and _all_scalars(src):
        return _union(dest, src)
    if _all_dicts(dest) and _all_dicts(src):
        return _merge_by_key(dest, src, "name", replace_lists=False)
    return _copy(src, key)


def _union(dest: list[Any], src: list[Any]) -> list[Any]:
    seen: set[Any] = set()
    out = []
    for item in (*dest, *src):
        marker = _hashable(_leaf(item))
        if marker not in seen:
            seen.add(marker)
            out.append(item)
    return out


def _merge_by_key(
    dest: list[dict[str, Any]], src: list[dict[str, Any]], ident: str, *, replace_lists: bool
) -> list[dict[str, Any]]:
    """Indexed by identity and by content as it goes, so a list of thousands of entries
    (a hostile repo's env, say) merges in linear time, not in a scan per item."""
    out = [_copy(item) for item in dest]
    index = _Index(out, ident)
    for item in src:
        ident_value = _leaf(item.get(ident))
        at = index.find(ident_value) if ident_value is not None else None
        if at is None:
            if ident_value is not None or not index.holds(_hashable(plain(item))):
                index.append(_copy(item))
        elif replace_lists:
            index.replace(at, _replace_lists(out[at], item))
        else:
            index.replace(at, deep_update(out[at], item))
    return out


class _Index:
    """`items` (changed only through it) with the first position of each identity, and a
    count of each item's content: what a scan of the list for each item would find."""

    def __init__(self, items: list[Any], ident: str) -> None:
        self.items, self.ident = items, ident
        self.first: dict[Any, int] = {}
        self.contents: dict[Any, int] = {}
        for position, item in enumerate(items):
            self._note(position, item)

    def find(self, value: Any) -> int | None:
        try:
            return self.first.get(value)
        except TypeError:  # an unhashable identity (a list as a name): scan, as before
            return _find(self.items, self.ident, value)

    def holds(self, content: Any) -> bool:
        return self.contents.get(content, 0) > 0

    def append(self, item: Any) -> None:
        self.items.append(item)
        self._note(len(self.items) - 1, item)

    def replace(self, position: int, item: Any) -> None:
        """The identity stays (the item matched by it); the content may change."""
        self._count(self.items[position], -1)
        self.items[position] = item
        self._count(item, 1)

    def _count(self, item: Any, step: int) -> None:
        content = _hashable(plain(item))
        self.contents[content] = self.contents.get(content, 0) + step

    def _note(self, position: int, item: Any) -> None:
        self._count(item, 1)
        value = _leaf(item.get(self.ident)) if isinstance(item, dict) else None
        with contextlib.suppress(TypeError):  # an unhashable identity is found by a scan
            self.first.setdefault(value, position)


def _replace_lists(dest: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    """A match expression: `values` (and every other key) from the later layer win."""
    out = {k: _copy(v, k) for k, v in dest.items() if k not in src}
    for k, v in src.items():
        if _leaf(v) is None:
            out.pop(k, None)
        else:
            out[k] = _copy(v, k)
    return out


def _merge_by_position(dest: list[Any], src: list[Any]) -> list[Any]:
    out = [_copy(item) for item in dest]
    for index, item in enumerate(src):
        if index < len(out):
            out[index] = deep_update(out[index], item)
        else:
            out.append(_copy(item))
    return out


def _find(items: list[dict[str, Any]], ident: str, value: Any) -> int | None:
    for index, item in enumerate(items):
        if isinstance(item, dict) and _leaf(item.get(ident)) == value:
            return index
    return None


def _all_scalars(items: list[Any]) -> bool:
    return all(not isinstance(i, dict | list) for i in items)


def _all_dicts(items: list[Any]) -> bool:
    return all(isinstance(i, dict) for i in items)


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return (type(value).__name__, value)


def _copy(value: Any, key: str | None = None) -> Any:
    """Copy containers so results never share mutable structure with the layers.

    A list is copied by merging it into an empty list under the same rules, so duplicates
    within one layer (two env entries named A, a repeated feature) collapse exactly as they
    would against an earlier layer, and applying a layer twice gives the same result.
    """
    if isinstance(value, dict):
        return {k: _copy(v, k) for k, v in value.items() if _leaf(v) is not None}
    if isinstance(value, list):
        if key not in _ORDERED_LISTS and (
            key in _MATCH_LISTS
            or key == _NODE_SELECTOR_TERMS
            or _all_scalars(value)
            or _all_dicts(value)
        ):
            return _update_list([], value, key)
        return [_copy(v) for v in value]
    return value


def tag(value: Any, origin_of: Any) -> Any:
    """Wrap every leaf of `value` in `Sourced`; `origin_of(path)` names its origin."""
    return _tag(value, (), origin_of)


def _tag(value: Any, path: tuple[Any, ...], origin_of: Any) -> Any:
    if isinstance(value, dict):
        return {k: _tag(v, (*path, k), origin_of) for k, v in value.items()}
    if isinstance(value, list):
        return [_tag(v, (*path, i), origin_of) for i, v in enumerate(value)]
    return Sourced(value, origin_of(path))
