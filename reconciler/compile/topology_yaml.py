"""compute.topology -> topology.yaml, Slurm 25.05's file of several named topologies (pure).

topology.yaml(5): a list of topologies, each with its name (`topology`), `cluster_default`, and
one of `block` (`block_sizes`, `blocks` of `block` and `nodes`), `tree` (`switches` of
`switch` and `nodes` or `children`) or `flat: true`. Slurm reads it in place of topology.conf
when it exists, and the first topology marked cluster_default serves partitions that name
none (`Topology=` on a PartitionName line chooses another).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from reconciler.compile.topology_places import (
    TopologyInputs,
    blocks_of,
    places,
    switches_of,
)
from reconciler.compile.topology_spec import BLOCK, FLAT, TopologySet, TopologySpec

TOPOLOGY_YAML = "topology.yaml"
HEADER = "# Rendered by reconciler from compute.topology and the Nodes' labels; edit the repo.\n"


def render_topology_yaml(
    topologies: TopologySet, nodes: Sequence[str], inputs: TopologyInputs, notes: list[str]
) -> str:
    """topology.yaml for `nodes` (every Slurm node slurm.conf declares, FUTURE ones too); the
    cluster default is first (TopologySet keeps it there)."""
    entries = [
        {
            "topology": spec.name,
            "cluster_default": spec is topologies.default,
            **_section(spec, nodes, inputs, notes),
        }
        for spec in topologies.topologies
    ]
    return HEADER + yaml.safe_dump(entries, sort_keys=False, default_flow_style=False)


def _section(
    spec: TopologySpec, nodes: Sequence[str], inputs: TopologyInputs, notes: list[str]
) -> dict[str, Any]:
    if spec.plugin == FLAT:
        return {"flat": True}
    placed, unplaced = places(spec, sorted(set(nodes)), inputs)
    if spec.plugin == BLOCK:
        blocks = blocks_of(spec, placed, unplaced, notes, TOPOLOGY_YAML)
        if blocks.blocks:
            return {"block": {
                "block_sizes": list(blocks.sizes),
                "blocks": [{"block": name, "nodes": members} for name, members in blocks.blocks],
            }}  # fmt: skip
    else:
        switches = switches_of(placed, unplaced)
        if switches:
            return {"tree": {"switches": [
                {"switch": s.name, **({"nodes": s.nodes} if s.nodes else {"children": s.switches})}
                for s in switches
            ]}}  # fmt: skip
    notes.append(
        f"topology {spec.name} has no {spec.plugin} yet (no Slurm node has a place): "
        f"it is written as flat until one has"
    )
    return {"flat": True}
