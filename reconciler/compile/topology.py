"""`compute.topology` (ours) -> topology.conf for Slurm's topology/block or topology/tree plugin,
from the labels of the Kubernetes Nodes the slurmd Pods run on (pure).

A Slurm node's place is read from the Node its slurmd Pod is bound to: with `block`, the value
of `blockLabel` names its block; with `tree`, the values of `switchLabels` (leaf first) name its
switches. Slurm runs no job on a node that topology.conf leaves out (checked on 24.11.5: "Requested
topology configuration is not available", for block and tree alike), so a node whose place is
not known (no Pod bound yet, a FUTURE spare, a Node without the label) is listed in the block or
leaf switch UNPLACED rather than left out. slurmctld stops (fatal) on a block with fewer nodes
than the base block size, the first of BlockSizes, so such a block is never written: its nodes
are unplaced too, and only if UNPLACED itself is too small are they left out, with a note.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import hostlist

from reconciler.compile.lines import write_lines
from reconciler.compile.slurm_conf import Partition
from reconciler.config.repo import Config
from reconciler.config.topology import PLUGINS
from reconciler.errors import CompileError, Location

BLOCK = "block"
# No label value can start with "_" (Kubernetes: alphanumeric first), so no block or switch
# named after one can be this.
UNPLACED = "_unplaced"
# Slurm releases that first have what a key asks for (topology/block: 23.11; ExclusiveTopo,
# --segment and --exclusive=topo: 24.05, per Slurm's NEWS); checked against the running one.
BLOCK_RELEASE = (23, 11)
EXCLUSIVE_TOPO_RELEASE = (24, 5)
# Slurm's default aggregation levels when BlockSizes is not set: 1, 2, 4 and 8 base blocks.
DEFAULT_LEVELS = (1, 2, 4, 8)
MAX_SWITCH_NAME = 64  # topology.conf(5): a SwitchName is at most 64 characters
HEADER = "# Rendered by reconciler from compute.topology and the Nodes' labels; edit the repo."
# A label value as Kubernetes allows it: the only names we write into topology.conf.
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


@dataclass(frozen=True)
class TopologySpec:
    """compute.topology, merged and checked (config/topology.py checks each file's keys)."""

    plugin: str
    block_label: str = ""
    block_sizes: tuple[int, ...] = ()
    switch_labels: tuple[str, ...] = ()  # the leaf's label first
    exclusive_partitions: tuple[str, ...] = ()

    @property
    def labels(self) -> tuple[str, ...]:
        """The Node labels a Slurm node's place is read from."""
        return (self.block_label,) if self.plugin == BLOCK else self.switch_labels


@dataclass(frozen=True)
class TopologyInputs:
    """What the cluster says, read by the caller: each Kubernetes Node's labels, the Node each
    Slurm node's slurmd Pod is bound to, and the Slurm release running (None: not known)."""

    node_labels: Mapping[str, Mapping[str, str]]
    hosts: Mapping[str, str]
    slurm_release: tuple[int, int] | None = None


@dataclass(frozen=True)
class RenderedTopology:
    text: str
    notes: tuple[str, ...] = ()  # what an operator should know: shown as plan warnings


@dataclass(frozen=True)
class CompiledTopology:
    """What compute.topology adds to a compile: partitions with ExclusiveTopo where asked,
    topology.conf for the slurm.conf ConfigMap, and notes for the plan."""

    partitions: list[Partition]
    files: dict[str, str]
    notes: tuple[str, ...] = ()


def compiled_topology(
    config: Config,
    values: Mapping[str, Any],
    partitions: list[Partition],
    declared: Sequence[str],
    inputs: TopologyInputs | None,
) -> CompiledTopology:
    where = config.topology_where
    spec = topology_spec(values, where)
    if spec is None:
        return CompiledTopology(partitions, {})
    check_release(spec, inputs.slurm_release if inputs else None, where)
    rendered = render_topology(spec, declared, inputs)
    return CompiledTopology(
        with_exclusive_topo(partitions, spec, where),
        {"topology.conf": rendered.text},
        rendered.notes,
    )


def topology_spec(values: Mapping[str, Any], where: Location | None = None) -> TopologySpec | None:
    """The merged compute.topology, or None when it is not set. Each file's keys were checked
    where they were written; what only the merge shows (a plugin without its label) is here."""
    raw = (values.get("compute") or {}).get("topology")
    if not raw:
        return None
    plugin = raw.get("plugin")
    if plugin not in PLUGINS:
        raise CompileError(
            f"compute.topology.plugin must be one of {', '.join(PLUGINS)}, got {plugin!r}",
            where=where,
            hint="block: one block per value of blockLabel; tree: switches from switchLabels",
        )
    spec = TopologySpec(
        plugin=plugin,
        block_label=raw.get("blockLabel") or "",
        block_sizes=tuple(raw.get("blockSizes") or ()),
        switch_labels=tuple(raw.get("switchLabels") or ()),
        exclusive_partitions=tuple(raw.get("exclusivePartitions") or ()),
    )
    _check_plugin_keys(spec, where)
    return spec


def _check_plugin_keys(spec: TopologySpec, where: Location | None) -> None:
    wrong = []
    if spec.plugin == BLOCK:
        if not spec.block_label:
            raise CompileError(
                "compute.topology.plugin block needs compute.topology.blockLabel",
                where=where,
                hint="the Node label whose value names the block, "
                "e.g. blockLabel: nvidia.com/gpu.clique",
            )
        wrong = ["switchLabels"] if spec.switch_labels else []
    else:
        if not spec.switch_labels:
            raise CompileError(
                "compute.topology.plugin tree needs compute.topology.switchLabels",
                where=where,
                hint="the Node labels naming each node's switches, "
                "leaf first: switchLabels: [example.com/leaf, example.com/spine]",
            )
        wrong = [
            k
            for k, v in (
                ("blockLabel", spec.block_label),
                ("blockSizes", spec.block_sizes),
                ("exclusivePartitions", spec.exclusive_partitions),
            )
            if v
        ]
    if wrong:
        raise CompileError(
            f"compute.topology.{wrong[0]} is not read with plugin {spec.plugin}",
            where=where,
            hint="blockLabel, blockSizes and exclusivePartitions are for block; switchLabels "
            "for tree",
        )


def check_release(
    spec: TopologySpec, release: tuple[int, int] | None, where: Location | None
) -> None:
    """Refuse what the Slurm running cannot read: slurmctld would not start on it."""
    if release is None:  # not known (offline, or Slurm silent): slurmctld's log will say
        return
    running = f"{release[0]}.{release[1]:02d}"
    if spec.plugin == BLOCK and release < BLOCK_RELEASE:
        raise CompileError(
            f"compute.topology.plugin block needs Slurm 23.11 or later (topology/block); "
            f"this cluster runs Slurm {running}",
            where=where,
            hint="use plugin: tree with switchLabels, or upgrade Slurm",
        )
    if spec.exclusive_partitions and release < EXCLUSIVE_TOPO_RELEASE:
        raise CompileError(
            f"compute.topology.exclusivePartitions needs Slurm 24.05 or later (the partition "
            f"option ExclusiveTopo); this cluster runs Slurm {running}",
            where=where,
            hint="remove exclusivePartitions, or upgrade Slurm",
        )


def with_exclusive_topo(
    partitions: Sequence[Partition], spec: TopologySpec | None, where: Location | None
) -> list[Partition]:
    """ExclusiveTopo=YES on the partitions exclusivePartitions names: one job per block."""
    names = spec.exclusive_partitions if spec is not None else ()
    known = {p.name for p in partitions}
    missing = [n for n in names if n not in known]
    if missing:
        raise CompileError(
            f"compute.topology.exclusivePartitions names {missing[0]!r}, which is not a "
            "partition of compute.partitions",
            where=where,
            hint="partitions: " + ", ".join(sorted(known)),
        )
    return [
        Partition(p.name, (*p.options, ("ExclusiveTopo", "YES")))
        if p.name in names and p.option("ExclusiveTopo") is None
        else p
        for p in partitions
    ]


# ---- rendering ---------------------------------------------------------------------------


def render_topology(
    spec: TopologySpec, nodes: Iterable[str], inputs: TopologyInputs | None
) -> RenderedTopology:
    """topology.conf for `nodes` (every Slurm node slurm.conf declares, FUTURE ones too)."""
    notes: list[str] = []
    if inputs is None:
        notes.append(
            "topology.conf lists every Slurm node as unplaced: no Kubernetes Nodes "
            "were read (apply and the daemon read them)"
        )
        inputs = TopologyInputs({}, {})
    places, unplaced = _places(spec, sorted(set(nodes)), inputs)
    if spec.plugin == BLOCK:
        lines = _block_lines(spec, places, unplaced, notes)
    else:
        lines = _tree_lines(places, unplaced)
    return RenderedTopology(write_lines("topology.conf", [HEADER, *lines]), tuple(notes))


def _places(
    spec: TopologySpec, nodes: list[str], inputs: TopologyInputs
) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """Slurm node -> its place (label values in spec.labels order), and the unplaced ones."""
    places: dict[str, tuple[str, ...]] = {}
    unplaced: list[str] = []
    for node in nodes:
        labels = inputs.node_labels.get(inputs.hosts.get(node, ""), {})
        place = tuple(labels.get(key, "") for key in spec.labels)
        if all(_LABEL_VALUE.fullmatch(value) for value in place):
            places[node] = place
        else:
            unplaced.append(node)
    return places, unplaced


def _block_lines(
    spec: TopologySpec,
    places: Mapping[str, tuple[str, ...]],
    unplaced: list[str],
    notes: list[str],
) -> list[str]:
    blocks: dict[str, list[str]] = {}
    for node, (value,) in places.items():
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
            f"{_hostlist(unplaced)} left out of topology.conf: {len(unplaced)} "
            f"unplaced node(s) cannot fill a block of {base}, and Slurm runs no job on "
            "them until their Nodes carry the label"
        )
    elif unplaced:
        blocks[UNPLACED] = unplaced
    if not blocks:  # slurmctld reads a file without blocks as no topology at all
        return ["# no blocks: no Slurm node has a place yet"]
    order = sorted(n for n in blocks if n != UNPLACED) + ([UNPLACED] if UNPLACED in blocks else [])
    lines = [f"BlockName={name} Nodes={_hostlist(blocks[name])}" for name in order]
    sizes = spec.block_sizes or _default_sizes(min(len(b) for b in blocks.values()))
    return [*lines, "BlockSizes=" + ",".join(str(s) for s in sizes)]


def _default_sizes(smallest: int) -> tuple[int, ...]:
    """Slurm takes the first block's size as the base when BlockSizes is not set, and stops
    if a later block is smaller: the smallest block is the base here, with Slurm's levels."""
    return tuple(smallest * level for level in DEFAULT_LEVELS)


def _tree_lines(places: Mapping[str, tuple[str, ...]], unplaced: list[str]) -> list[str]:
    """A switch is its label value and those above it (leaf first): a leaf value repeated
    under two spines names two switches. Top-level switches are not joined: jobs never span
    two values of the last label (two fabrics), nor unplaced and placed nodes."""
    leaves: dict[tuple[str, ...], list[str]] = {}
    for node, place in places.items():
        leaves.setdefault(place, []).append(node)
    depth = max((len(p) for p in leaves), default=0)
    levels = [sorted({place[level:] for place in leaves}) for level in range(depth)]
    names = _switch_names([key for level in levels for key in level])
    lines = []
    for level, keys in enumerate(levels):
        for key in sorted(keys, key=lambda k: names[k]):
            if level == 0:
                lines.append(f"SwitchName={names[key]} Nodes={_hostlist(leaves[key])}")
            else:
                children = [names[c] for c in levels[level - 1] if c[1:] == key]
                lines.append(f"SwitchName={names[key]} Switches={_hostlist(children)}")
    if unplaced:
        lines.append(f"SwitchName={UNPLACED} Nodes={_hostlist(unplaced)}")
    return lines or ["# no switches: no Slurm node is declared"]


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


def _hostlist(names: Iterable[str]) -> str:
    """Slurm's hostlist syntax (python-hostlist writes what Slurm's parser expands back)."""
    return str(hostlist.collect_hostlist(sorted(names)))
