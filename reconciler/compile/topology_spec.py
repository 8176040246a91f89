"""`compute.topology` merged and checked (pure): one topology (`plugin: block|tree` and its
keys, the shape since topology.conf) or several named ones (`topologies:`, Slurm 25.05's
topology.yaml), what the target Slurm release can read, and the partitions that name them
(`Topology=`, `ExclusiveTopo`/`Exclusive=TOPO`).

Each file's keys were checked where they were written (config/topology.py); what only the
merged values show (a plugin without its label, a partition naming an unknown topology) is
checked here and names the last file that set compute.topology, or compute.partitions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.compile.slurm_conf import Partition
from reconciler.compile.slurm_keys import exclusive_topo
from reconciler.compile.target_release import TargetRelease
from reconciler.config.limits import MAX_TOPOLOGIES
from reconciler.config.topology import (
    ENTRY_PLUGINS,
    PLUGIN_HINT,
    PLUGINS,
    SINGLE_KEYS,
    TOO_MANY_TOPOLOGIES_HINT,
    named_twice,
    too_many_topologies,
)
from reconciler.errors import CompileError, Location

BLOCK, FLAT = "block", "flat"
# The one topology of the single shape, named in topology.yaml on Slurm 25.05+.
DEFAULT_NAME = "default"
# Slurm releases that first have what a key asks for, per Slurm's NEWS: topology/block 23.11;
# ExclusiveTopo, --segment and --exclusive=topo 24.05; topology.yaml and a partition's
# Topology= 25.05 (CHANGELOG/slurm-25.05.md: Add ability to configure multiple topology
# plugins via the new topology.yaml configuration file).
BLOCK_RELEASE = (23, 11)
EXCLUSIVE_TOPO_RELEASE = (24, 5)
YAML_RELEASE = (25, 5)


@dataclass(frozen=True)
class TopologySpec:
    """One topology: its plugin and where a node's place is read from."""

    plugin: str
    block_label: str = ""
    block_sizes: tuple[int, ...] = ()
    switch_labels: tuple[str, ...] = ()  # the leaf's label first
    exclusive_partitions: tuple[str, ...] = ()
    name: str = DEFAULT_NAME
    default: bool = False  # cluster_default in topology.yaml

    @property
    def labels(self) -> tuple[str, ...]:
        """The Node labels a Slurm node's place is read from."""
        if self.plugin == FLAT:
            return ()
        return (self.block_label,) if self.plugin == BLOCK else self.switch_labels


@dataclass(frozen=True)
class TopologySet:
    """compute.topology: its topologies, the cluster default first. `named`: written as
    `topologies:` (topology.yaml only); otherwise the one topology of the single shape."""

    topologies: tuple[TopologySpec, ...]
    named: bool = False

    @property
    def default(self) -> TopologySpec:
        return self.topologies[0]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(k for t in self.topologies for k in t.labels))

    def names(self) -> list[str]:
        return [t.name for t in self.topologies]


def topology_set(values: Mapping[str, Any], where: Location | None = None) -> TopologySet | None:
    """The merged compute.topology, or None when it is not set."""
    raw = (values.get("compute") or {}).get("topology")
    if not raw:
        return None
    entries = raw.get("topologies")
    if entries is None:
        return TopologySet((_spec(raw, "compute.topology", PLUGINS, where),))
    mixed = [k for k in SINGLE_KEYS if raw.get(k) not in (None, [], "")]
    if mixed:
        raise CompileError(
            f"compute.topology.{mixed[0]} is set beside compute.topology.topologies",
            where=where,
            hint=f"move {mixed[0]} into the topology of compute.topology.topologies it "
            "belongs to (one file may set the single shape, another the list: pick one)",
        )
    if len(entries) > MAX_TOPOLOGIES:  # each file was under the cap; together they are not
        raise CompileError(
            too_many_topologies(len(entries)), where=where, hint=TOO_MANY_TOPOLOGIES_HINT
        )
    specs = [
        _spec(e, f"compute.topology.topologies[{i}]", ENTRY_PLUGINS, where)
        for i, e in enumerate(entries)
    ]
    if not specs:
        raise CompileError("compute.topology.topologies is empty", where=where)
    return TopologySet(_default_first(specs, where), named=True)


def _spec(raw: Mapping[str, Any], path: str, plugins: Sequence[str], where: Location | None
          ) -> TopologySpec:  # fmt: skip
    plugin = raw.get("plugin")
    if plugin not in plugins:
        raise CompileError(
            f"{path}.plugin must be one of {', '.join(plugins)}, got {plugin!r}",
            where=where,
            hint=PLUGIN_HINT,
        )
    spec = TopologySpec(
        plugin=str(plugin),
        block_label=raw.get("blockLabel") or "",
        block_sizes=tuple(raw.get("blockSizes") or ()),
        switch_labels=tuple(raw.get("switchLabels") or ()),
        exclusive_partitions=tuple(raw.get("exclusivePartitions") or ()),
        name=str(raw.get("name") or DEFAULT_NAME),
        default=bool(raw.get("default")),
    )
    _check_plugin_keys(spec, path, where)
    return spec


def _default_first(specs: list[TopologySpec], where: Location | None) -> tuple[TopologySpec, ...]:
    twice = named_twice(s.name for s in specs)
    if twice is not None:
        raise CompileError(f"compute.topology.topologies names {twice!r} twice", where=where)
    defaults = [s for s in specs if s.default]
    if len(defaults) > 1:
        raise CompileError(
            f"compute.topology.topologies: {defaults[0].name!r} and {defaults[1].name!r} "
            "are both default: true",
            where=where,
            hint="one topology is the cluster default (without one, the first is)",
        )
    first = defaults[0] if defaults else specs[0]
    return (first, *(s for s in specs if s is not first))


def _check_plugin_keys(spec: TopologySpec, path: str, where: Location | None) -> None:
    needs = {BLOCK: ("blockLabel", spec.block_label), "tree": ("switchLabels", spec.switch_labels)}
    if spec.plugin in needs and not needs[spec.plugin][1]:
        key = needs[spec.plugin][0]
        raise CompileError(
            f"{path}.plugin {spec.plugin} needs {path}.{key}",
            where=where,
            hint="blockLabel: the Node label whose value names the block, e.g. "
            "nvidia.com/gpu.clique"
            if key == "blockLabel"
            else "switchLabels: the Node "
            "labels naming each node's switches, leaf first: [example.com/leaf, example.com/spine]",
        )
    read = {
        BLOCK: ("blockLabel", "blockSizes", "exclusivePartitions"),
        "tree": ("switchLabels",),
        FLAT: (),
    }[spec.plugin]
    given = {
        "blockLabel": spec.block_label,
        "blockSizes": spec.block_sizes,
        "switchLabels": spec.switch_labels,
        "exclusivePartitions": spec.exclusive_partitions,
    }
    wrong = [k for k, v in given.items() if v and k not in read]
    if wrong:
        raise CompileError(
            f"{path}.{wrong[0]} is not read with plugin {spec.plugin}",
            where=where,
            hint="blockLabel, blockSizes and exclusivePartitions are for block; switchLabels "
            "for tree; flat reads none",
        )


def check_release(
    topologies: TopologySet | TopologySpec, target: TargetRelease | tuple[int, int],
    where: Location | None,
) -> None:  # fmt: skip
    """Refuse what the targeted Slurm cannot read: slurmctld would not start on it."""
    if isinstance(topologies, TopologySpec):
        topologies = TopologySet((topologies,))
    have, running = _release(target)
    if topologies.named and have < YAML_RELEASE:
        raise CompileError(
            f"compute.topology.topologies needs Slurm 25.05 or later (topology.yaml); "
            f"this render targets {running}",
            where=where,
            hint="for an older Slurm write one topology (compute.topology.plugin and its "
            "keys); for a newer one set slurmConfig.release",
        )
    for spec in topologies.topologies:
        if spec.plugin == BLOCK and have < BLOCK_RELEASE:
            raise CompileError(
                f"compute.topology.plugin block needs Slurm 23.11 or later (topology/block); "
                f"this render targets {running}",
                where=where,
                hint="use plugin: tree with switchLabels, or upgrade Slurm",
            )
        if spec.exclusive_partitions and have < EXCLUSIVE_TOPO_RELEASE:
            raise CompileError(
                f"compute.topology.exclusivePartitions needs Slurm 24.05 or later (the "
                f"partition option ExclusiveTopo); this render targets {running}",
                where=where,
                hint="remove exclusivePartitions, or upgrade Slurm",
            )


def _release(target: TargetRelease | tuple[int, int]) -> tuple[tuple[int, int], str]:
    if isinstance(target, TargetRelease):
        release = target.release
        return (release.major, release.minor), str(target)
    return target, f"Slurm {target[0]}.{target[1]:02d}"


def with_partition_topology(
    partitions: Sequence[Partition],
    topologies: TopologySet | None,
    target: TargetRelease,
    where: Location | None,
    partitions_where: Location | None = None,
) -> list[Partition]:
    """Check each partition's `Topology=` against the topologies defined, and add the
    exclusive-topology option to the partitions exclusivePartitions names."""
    names = topologies.names() if topologies is not None else []
    defined = set(names)
    chosen = {}
    for partition in partitions:
        name = partition.option("Topology")
        if name is None:
            continue
        if not target.release.at_least(*YAML_RELEASE):
            raise CompileError(
                f"partition {partition.name!r} sets Topology={name}, which needs Slurm 25.05 "
                f"or later (topology.yaml); this render targets {target}",
                where=partitions_where,
                hint="remove Topology= from the partition, or set slurmConfig.release",
            )
        if name not in defined or topologies is None or not topologies.named:
            listed = ", ".join(names) if topologies and topologies.named else "none"
            raise CompileError(
                f"partition {partition.name!r} names topology {name!r} (Topology=), which "
                f"compute.topology.topologies does not define (defined: {listed})",
                where=partitions_where,
                hint="name one of compute.topology.topologies in Topology=, or add a "
                f"topology named {name!r} there",
            )
        chosen[partition.name] = name
    if topologies is None:
        return list(partitions)
    return _with_exclusive(partitions, topologies, chosen, target, where)


def _with_exclusive(
    partitions: Sequence[Partition],
    topologies: TopologySet,
    chosen: Mapping[str, str],
    target: TargetRelease,
    where: Location | None,
) -> list[Partition]:
    """ExclusiveTopo=YES (Exclusive=TOPO from 26.05) on the partitions a topology's
    exclusivePartitions names: one job per block of that topology."""
    known = {p.name for p in partitions}
    exclusive: set[str] = set()
    for spec in topologies.topologies:
        for name in spec.exclusive_partitions:
            if name not in known:
                raise CompileError(
                    f"compute.topology.exclusivePartitions names {name!r}, which is not a "
                    "partition of compute.partitions",
                    where=where,
                    hint="partitions: " + ", ".join(sorted(known)),
                )
            uses = chosen.get(name, topologies.default.name)
            if uses != spec.name:
                raise CompileError(
                    f"topology {spec.name!r} lists partition {name!r} in exclusivePartitions, "
                    f"but that partition uses topology {uses!r}",
                    where=where,
                    hint=f"write Topology={spec.name} on partition {name}, or list it under "
                    f"topology {uses!r}",
                )
            exclusive.add(name)
    option = exclusive_topo(target.release)
    return [
        Partition(p.name, (*p.options, option))
        if p.name in exclusive and not _has_exclusive(p)
        else p
        for p in partitions
    ]


def _has_exclusive(partition: Partition) -> bool:
    return any(partition.option(key) is not None for key in ("ExclusiveTopo", "Exclusive"))
