"""Field-level differences between two plain shapes (pure)."""

from __future__ import annotations

from typing import Any

from reconciler.plan.model import FieldChange


def field_changes(before: Any, after: Any, path: str = "") -> list[FieldChange]:
    """Leaf-level differences; lists compare whole unless both are lists of named items."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[FieldChange] = []
        for key in [*before, *(k for k in after if k not in before)]:
            sub = (
                f"{path}{key}"
                if str(key).startswith("[")
                else (f"{path}.{key}" if path else str(key))
            )
            out += field_changes(before.get(key), after.get(key), sub)
        return out
    if isinstance(before, list) and isinstance(after, list) and _named(before) and _named(after):
        return field_changes(_by_name(before), _by_name(after), path)
    if before != after:
        return [FieldChange(path, before, after)]
    return []


def _named(items: list[Any]) -> bool:
    names = [i.get("name") for i in items if isinstance(i, dict)]
    return len(names) == len(items) and None not in names and len(set(names)) == len(names)


def _by_name(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {f"[name={item['name']}]": item for item in items}
