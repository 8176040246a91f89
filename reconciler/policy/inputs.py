"""What a compiled CEL expression can read: the paths it names under `object`, `params` and
`namespaceObject` (`object.spec.containers`, `params.killWait`, ...).

A policy's verdict is a pure function of the values at those paths, so it can be remembered
by them: Pods of one Deployment or Job differ in name and uid, which a policy rarely reads,
and are then judged once. A bare `object` (passed whole to a function) is a path too, the
whole object, so the memo is never wrong, only less useful.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from lark import Tree

ROOTS: Final = frozenset({"object", "params", "namespaceObject"})
Path = tuple[str, ...]
_MISSING: Final = "\x00missing"


def paths_read(ast: Tree) -> set[Path]:
    """Maximal static member chains from a root variable, e.g. ('object', 'spec')."""
    found: set[Path] = set()
    _walk(ast, found, is_base=False)
    return found


def covering(paths: Iterable[Path]) -> tuple[Path, ...]:
    """The shortest prefixes: ('object','spec') covers ('object','spec','containers')."""
    kept: list[Path] = []
    for path in sorted(set(paths), key=len):
        if not any(path[: len(k)] == k for k in kept):
            kept.append(path)
    return tuple(sorted(kept))


def inputs_key(
    paths: tuple[Path, ...], roots: Mapping[str, Any], seen: dict[Path, str] | None = None
) -> str:
    """The values at `paths`, as one canonical string (the JSON of their list). `seen` keeps
    each path's JSON for the other policies judging the same object (many read
    object.spec.containers)."""
    seen = {} if seen is None else seen
    parts = []
    for path in paths:
        text = seen.get(path)
        if text is None:
            text = seen[path] = json.dumps(_value_at(roots, path), sort_keys=True, default=str)
        parts.append(text)
    return "[" + ", ".join(parts) + "]"


def _walk(tree: Tree, found: set[Path], *, is_base: bool) -> None:
    """Adds the chains under `tree`; an explicit stack, not recursion, since a parse tree is
    ten levels deep per CEL operation (cost.MAX_NESTING of them: too deep for Python's)."""
    stack = [(tree, is_base)]
    while stack:
        node, base = stack.pop()
        if node.data == "member_dot":
            if not base:
                chain = _chain(node)
                if chain is not None:
                    found.add(chain)
            stack.append((node.children[0], True))
            continue
        if node.data in ("member", "primary"):
            if node.data == "primary" and not base:
                chain = _chain(node)
                if chain is not None:
                    found.add(chain)
            inner = base and len(node.children) == 1
        else:
            inner = False
        stack.extend((child, inner) for child in node.children if isinstance(child, Tree))


def _chain(tree: Tree) -> Path | None:
    if tree.data == "member_dot":
        base = _chain(tree.children[0])
        return None if base is None else (*base, str(tree.children[1]))
    if tree.data in ("member", "primary") and len(tree.children) == 1:
        child = tree.children[0]
        return _chain(child) if isinstance(child, Tree) else None
    if tree.data == "ident" and str(tree.children[0]) in ROOTS:
        return (str(tree.children[0]),)
    return None


def _value_at(roots: Mapping[str, Any], path: Path) -> Any:
    value: Any = roots
    for step in path:
        if not isinstance(value, Mapping):
            return [_MISSING, step, value]  # the expression errors here: the key says so
        if step not in value:
            return _MISSING
        value = value[step]
    return value
