"""`compute.topology` (ours) -> the topology file of the Slurm release the render targets, from
the labels of the Kubernetes Nodes the slurmd Pods run on (pure): topology.conf for one
topology/block or topology/tree topology before Slurm 25.05; topology.yaml, with every named
topology, from 25.05 on (compile/topology_yaml.py). Where nodes go: compile/topology_places.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.compile.lines import write_lines
from reconciler.compile.slurm_conf import Partition
from reconciler.compile.target_release import TargetRelease
from reconciler.compile.topology_places import (
    TopologyInputs,
    blocks_of,
    places,
    switches_of,
)
from reconciler.compile.topology_spec import (
    BLOCK,
    YAML_RELEASE,
    TopologySet,
    TopologySpec,
    check_release,
    topology_set,
    with_partition_topology,
)
from reconciler.compile.topology_yaml import TOPOLOGY_YAML, render_topology_yaml
from reconciler.config.repo import Config

TOPOLOGY_CONF = "topology.conf"
TOPOLOGY_FILES = (TOPOLOGY_CONF, TOPOLOGY_YAML)
HEADER = "# Rendered by reconciler from compute.topology and the Nodes' labels; edit the repo."
NOT_READ = (
    "{file} lists every Slurm node as unplaced: no Kubernetes Nodes were read "
    "(apply and the daemon read them)"
)


@dataclass(frozen=True)
class RenderedTopology:
    text: str
    notes: tuple[str, ...] = ()  # what an operator should know: shown as plan warnings
    files: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CompiledTopology:
    """What compute.topology adds to a compile: partitions with their exclusive-topology
    option where asked, the topology file for the slurm.conf ConfigMap, notes for the plan."""

    partitions: list[Partition]
    files: dict[str, str]
    notes: tuple[str, ...] = ()


def compiled_topology(
    config: Config,
    values: Mapping[str, Any],
    partitions: list[Partition],
    declared: Sequence[str],
    inputs: TopologyInputs | None,
    target: TargetRelease,
) -> CompiledTopology:
    where = config.topology_where
    topologies = topology_set(values, where)
    if topologies is not None:
        check_release(topologies, target, where)
    partitions = with_partition_topology(
        partitions, topologies, target, where, config.partitions_where
    )
    if topologies is None:
        return CompiledTopology(partitions, {})
    yaml = target.release.at_least(*YAML_RELEASE)
    rendered = render_topology_files(topologies, declared, inputs, yaml=yaml)
    return CompiledTopology(partitions, dict(rendered.files), rendered.notes)


def render_topology_files(
    topologies: TopologySet,
    nodes: Iterable[str],
    inputs: TopologyInputs | None,
    *,
    yaml: bool,
) -> RenderedTopology:
    """topology.yaml (`yaml`: Slurm 25.05 on), else topology.conf (the one topology)."""
    if not yaml:
        rendered = render_topology(topologies.default, nodes, inputs)
        return RenderedTopology(rendered.text, rendered.notes, {TOPOLOGY_CONF: rendered.text})
    notes: list[str] = []
    if inputs is None:
        notes.append(NOT_READ.format(file=TOPOLOGY_YAML))
        inputs = TopologyInputs({}, {})
    text = render_topology_yaml(topologies, sorted(set(nodes)), inputs, notes)
    return RenderedTopology(text, tuple(notes), {TOPOLOGY_YAML: text})


def render_topology(
    spec: TopologySpec, nodes: Iterable[str], inputs: TopologyInputs | None
) -> RenderedTopology:
    """topology.conf for `nodes` (every Slurm node slurm.conf declares, FUTURE ones too)."""
    notes: list[str] = []
    if inputs is None:
        notes.append(NOT_READ.format(file=TOPOLOGY_CONF))
        inputs = TopologyInputs({}, {})
    placed, unplaced = places(spec, sorted(set(nodes)), inputs)
    if spec.plugin == BLOCK:
        blocks = blocks_of(spec, placed, unplaced, notes)
        lines = [f"BlockName={name} Nodes={members}" for name, members in blocks.blocks]
        if lines:  # slurmctld reads a file without blocks as no topology at all
            lines.append("BlockSizes=" + ",".join(str(s) for s in blocks.sizes))
        else:
            lines = ["# no blocks: no Slurm node has a place yet"]
    else:
        lines = [
            f"SwitchName={s.name} Nodes={s.nodes}" if s.nodes
            else f"SwitchName={s.name} Switches={s.switches}"
            for s in switches_of(placed, unplaced)
        ] or ["# no switches: no Slurm node is declared"]  # fmt: skip
    text = write_lines(TOPOLOGY_CONF, [HEADER, *lines])
    return RenderedTopology(text, tuple(notes), {TOPOLOGY_CONF: text})
