"""The plan's word on node definitions that make no nodes, and why (pure).

SUNK's chart makes nodes only of a definition whose composed `enabled` is true; the base layer
sets it for every definition that lists `definitions:`, and any later layer may turn it off. A
long-form definition (SUNK's "Slurm Workload Manager" page writes `rtx4000` with `enabled:
false`) under a shipped layer's name replaces that layer, so every definition composed from
it makes no nodes either. Each such definition is named with the layer, file and line whose
`enabled` it keeps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from reconciler.compile.nodesets import DEFINITIONS_KEY, NodeSet, last_setter
from reconciler.config.repo import LIBRARY_PREFIX, Config
from reconciler.errors import Warning_


def no_nodes_warnings(config: Config, nodesets: Iterable[NodeSet]) -> list[Warning_]:
    """One warning per disabled definition; none for a compute.nodes entry that sets no
    `enabled` and is used as a layer by another (SUNK's "Layers as Values")."""
    nodesets = list(nodesets)
    used = {layer for n in nodesets for layer in n.layers}
    warnings = []
    for nodeset in nodesets:
        if nodeset.enabled:
            continue
        setter = last_setter(config, nodeset, ("enabled",))
        if setter is None and nodeset.name in used:
            continue
        if setter is None:
            why = (f"it sets no `enabled` and lists no `{DEFINITIONS_KEY}:` (written out "
                   "long-form, it does not get the base layer's `enabled: true`)")  # fmt: skip
        else:
            value = json.dumps(setter.value)
            by = "it sets" if setter.layer == nodeset.name else f"layer {setter.layer!r} sets"
            why = f"{by} `enabled: {value}` ({setter.where}){_hidden(config, setter.layer)}"
        fix = f"set `enabled: true` in {nodeset.name!r} to make its nodes"
        message = f"node definition {nodeset.name!r} makes no nodes: {why}; {fix}"
        warnings.append(Warning_(str(nodeset.where), message))
    return warnings


def _hidden(config: Config, name: str) -> str:
    """Where a compute.nodes entry replaces a layer of the same name from a file."""
    nodes = (config.values.get("compute") or {}).get("nodes") or {}
    shadowed = config.file_layers.get(name)
    if name not in nodes or shadowed is None:
        return ""
    where = shadowed.where
    shipped = "shipped " if where.file.startswith(LIBRARY_PREFIX) else ""
    return (f", and compute.nodes.{name} replaces the {shipped}layer {name!r} "
            f"({where.file}:{where.line}) for every definition that lists it")  # fmt: skip
