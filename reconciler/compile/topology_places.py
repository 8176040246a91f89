"""Where each Slurm node sits in one topology (pure): its block, or its switches, read from the
labels of the Kubernetes Node its slurmd Pod is bound to. topology.conf and topology.yaml are
two spellings of what this computes.

A node whose place is not known (no Pod bound yet, a FUTURE spare, a Node without the label) is
put in the block or leaf switch UNPLACED rather than left out: Slurm runs no job on a node the
topology leaves out (checked on 24.11.5: "Requested topology configuration is not available",
for block and tree alike). slurmctld stops (fatal) on a block with fewer nodes than the base
block size, the first of BlockSizes, so such a block is never written: its nodes are unplaced
too, and only if UNPLACED itself is too small are they left out, with a note.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import hostlist

from reconciler.compile.topology_spec import TopologySpec

# No label value can start with "_" (Kubernetes: alphanumeric first), so no block or switch
# named after one can be this.
UNPLACED = "_unplaced"
# Slurm's default aggregation levels when BlockSizes is not set: 1, 2, 4 and 8 base blocks.
DEFAULT_LEVELS = (1, 2, 4, 8)
MAX_SWITCH_NAME = 64  # topology.conf(5), topology.yaml(5): a switch is at most 64 characters
# A label value as Kubernetes allows it: the only names we write into the topology.
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


@dataclass(frozen=True)
class TopologyInputs:
    """What the cluster says, read by the caller: each Kubernetes Node's labels, and the Node
    each Slurm node's slurmd Pod is bound to."""

    node_labels: Mapping[str, Mapping[str, str]]
    hosts: Mapping[str, str]


@dataclass(frozen=True)
class Blocks:
    """(block, its nodes) in order, the unplaced block last; the block sizes to write."""

    blocks: tuple[tuple[str, str], ...]
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class Switch:
    name: str
    nodes: str = ""  # a leaf's nodes (a hostlist)
    switches: str = ""  # an upper switch's children (a hostlist)


def places(
    spec: TopologySpec, nodes: list[str], inputs: TopologyInputs
) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """Slurm node -> its place (label values in spec.labels order), and the unplaced ones."""
    placed: dict[str, tuple[str, ...]] = {}
    unplaced: list[str] = []
    for node in nodes:
        labels = inputs.node_labels.get(inputs.hosts.get(node, ""), {})
        place = tuple(labels.get(key, "") for key in spec.labels)
        if all(_LABEL_VALUE.fullmatch(value) for value in place):
            placed[node] = place
        else:
            unplaced.append(node)
    return placed, unplaced


def blocks_of(
    spec: TopologySpec,
    placed: Mapping[str, tuple[str, ...]],
    unplaced: list[str],
    notes: list[str],
    file: str = "topology.conf",
) -> Blocks:
    blocks: dict[str, list[str]] = {}
    for node, (value,) in placed.items():
        blocks.setdefault(value, []).append(node)
    base = spec.block_sizes[0] if spec.block_sizes else 1
    for name in sorted(blocks):
        if len(blocks[name]) < base:
            notes.append(
                f"block {name} has {len(blocks[name])} node(s), fewer than "
                f"blockSizes[0] = {base}: its nodes are listed in {UNPLACED}"
            )
            unplaced += blocks.pop(name)
    if unplaced and len(unplaced) < base:
        notes.append(
            f"{hostlist_of(unplaced)} left out of {file}: {len(unplaced)} "
            f"unplaced node(s) cannot fill a block of {base}, and Slurm runs no job on "
            "them until their Nodes carry the label"
        )
    elif unplaced:
        blocks[UNPLACED] = unplaced
    if not blocks:
        return Blocks((), ())
    order = sorted(n for n in blocks if n != UNPLACED) + ([UNPLACED] if UNPLACED in blocks else [])
    sizes = spec.block_sizes or _default_sizes(min(len(b) for b in blocks.values()))
    return Blocks(tuple((name, hostlist_of(blocks[name])) for name in order), tuple(sizes))


def _default_sizes(smallest: int) -> tuple[int, ...]:
    """Slurm takes the first block's size as the base when BlockSizes is not set, and stops
    if a later block is smaller: the smallest block is the base here, with Slurm's levels."""
    return tuple(smallest * level for level in DEFAULT_LEVELS)


def switches_of(placed: Mapping[str, tuple[str, ...]], unplaced: list[str]) -> list[Switch]:
    """A switch is its label value and those above it (leaf first): a leaf value repeated
    under two spines names two switches. Top-level switches are not joined: jobs never span
    two values of the last label (two fabrics), nor unplaced and placed nodes."""
    leaves: dict[tuple[str, ...], list[str]] = {}
    for node, place in placed.items():
        leaves.setdefault(place, []).append(node)
    depth = max((len(p) for p in leaves), default=0)
    levels = [sorted({place[level:] for place in leaves}) for level in range(depth)]
    names = _switch_names([key for level in levels for key in level])
    switches = []
    for level, keys in enumerate(levels):
        for key in sorted(keys, key=lambda k: names[k]):
            if level == 0:
                switches.append(Switch(names[key], nodes=hostlist_of(leaves[key])))
            else:
                children = [names[c] for c in levels[level - 1] if c[1:] == key]
                switches.append(Switch(names[key], switches=hostlist_of(children)))
    if unplaced:
        switches.append(Switch(UNPLACED, nodes=hostlist_of(unplaced)))
    return switches


def _switch_names(keys: list[tuple[str, ...]]) -> dict[tuple[str, ...], str]:
    """A switch's own label value, where that value names one switch only; otherwise the value
    with a digest of the values above it, so two switches never share a name."""
    count: dict[str, int] = {}
    for key in keys:
        count[key[0]] = count.get(key[0], 0) + 1
    names = {}
    for key in keys:
        if count[key[0]] == 1:
            names[key] = key[0]
        else:
            digest = hashlib.sha256("/".join(key).encode()).hexdigest()[:8]
            names[key] = f"{key[0][: MAX_SWITCH_NAME - 9]}.{digest}"
    return names


def hostlist_of(names: Iterable[str]) -> str:
    """Slurm's hostlist syntax (python-hostlist writes what Slurm's parser expands back)."""
    return str(hostlist.collect_hostlist(sorted(names)))
