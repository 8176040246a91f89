"""`compile --explain`: every leaf of a composed definition and the layer and line that set it."""

from __future__ import annotations

import json
from typing import Any

from reconciler.compile.nodesets import NodeSet
from reconciler.config.layering import Sourced


def explain(nodesets: list[NodeSet]) -> str:
    blocks = []
    for nodeset in nodesets:
        order = " -> ".join((*nodeset.layers, nodeset.name)) if nodeset.layers else nodeset.name
        state = "enabled" if nodeset.enabled else "disabled: makes no nodes"
        rows = list(_leaves(nodeset.definition, ""))
        width = min(max((len(p) + len(v) for p, v, _ in rows), default=0) + 4, 60)
        lines = [f"# {nodeset.name} ({nodeset.where}; {state})", f"# applied: {order}"]
        for path, value, origin in rows:
            lines.append(f"{path} = {value}".ljust(width + 3) + f"# {origin}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _leaves(value: Any, path: str) -> Any:
    if isinstance(value, dict):
        if not value:
            yield path, "{}", "-"
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        if not value:
            yield path, "[]", "-"
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    elif isinstance(value, Sourced):
        yield path, json.dumps(value.value), value.origin
    else:
        yield path, json.dumps(value), "?"
