"""The keys of `compute.topology` (ours), checked in the file that writes them: a wrong value
names its file, line and key. Either one topology (`plugin` and its keys) or, for Slurm 25.05's
topology.yaml, several named ones (`topologies`, a list of the same keys with `name` and
`default`). What only the merged values show (block without blockLabel) is checked when
compiling (compile/topology_spec.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.config.limits import MAX_TOPOLOGIES
from reconciler.config.value_types import Key, Table, check_table
from reconciler.config.yamlfile import KeyPath, YamlFile, lookup
from reconciler.errors import ConfigTypeError
from reconciler.kuberules.validation import is_qualified_name
from reconciler.slurm_release import SlurmRelease

PLUGINS = ("block", "tree")
ENTRY_PLUGINS = (*PLUGINS, "flat")  # flat: no topology, for partitions that want none
PLUGIN_HINT = (
    "block (Slurm 23.11+): one block per value of blockLabel; tree: switches from "
    "switchLabels; flat (a named topology only): no topology"
)
TOPOLOGY_VALUES: Table = {
    "compute.topology": Key("mapping", "one topology, from the labels of the Nodes"),
    "compute.topology.plugin": Key(
        "string", "the topology plugin", choices=PLUGINS, hint=PLUGIN_HINT
    ),
    "compute.topology.blockLabel": Key("string", "the Node label whose value names a block"),
    "compute.topology.blockSizes": Key("list", "BlockSizes (block plugin)"),
    "compute.topology.switchLabels": Key(
        "list of strings", "Node labels of each switch level, leaf first (tree plugin)"
    ),
    "compute.topology.exclusivePartitions": Key(
        "list of strings", "partitions given ExclusiveTopo"
    ),
    "compute.topology.topologies": Key(
        "list of mappings", "several named topologies (Slurm 25.05+)"
    ),
}
# The single shape's keys, which `topologies` entries hold instead.
SINGLE_KEYS = ("plugin", "blockLabel", "blockSizes", "switchLabels", "exclusivePartitions")
ENTRY_VALUES: Table = {
    "name": Key("string", "the topology's name"),
    "default": Key("boolean", "the cluster default (else the first)"),
    **{key: TOPOLOGY_VALUES[f"compute.topology.{key}"] for key in SINGLE_KEYS},
    "plugin": Key("string", "the topology plugin", choices=ENTRY_PLUGINS, hint=PLUGIN_HINT),
}
# A topology name: a word of topology.yaml and of a partition's Topology= option.
_TOPOLOGY_NAME = re.compile(r"[A-Za-z0-9][-A-Za-z0-9_.]{0,62}")
# Slurm (block_record.c) accepts BlockSizes whose sizes are the first times a power of two,
# up to 2^15, and stops at start on anything else.
MAX_LEVEL = 15
_ROOT: KeyPath = ("compute", "topology")


def topology_settings(values: Mapping[str, Any], slurm: SlurmRelease) -> dict[str, str]:
    """The slurm.conf line compute.topology adds: TopologyPlugin before Slurm 25.05. From
    25.05 on, topology.yaml names each topology's plugin and Slurm, finding it, does not read
    TopologyPlugin (src/interfaces/topology.c), so none is written."""
    plugin = ((values.get("compute") or {}).get("topology") or {}).get("plugin")
    if plugin not in PLUGINS or slurm.at_least(25, 5):
        return {}
    return {"TopologyPlugin": f"topology/{plugin}"}


def check_topology(doc: YamlFile) -> None:
    """Values beyond their types (checked from TOPOLOGY_VALUES before this runs)."""
    topology, found = lookup(doc.data, list(_ROOT))
    if not found or not isinstance(topology, dict):
        return
    entries = topology.get("topologies")
    if entries is None:
        _check_keys(doc, _ROOT, topology)
        return
    mixed = [key for key in SINGLE_KEYS if key in topology]
    if mixed:
        raise ConfigTypeError(
            f"compute.topology.{mixed[0]} is set beside compute.topology.topologies",
            where=doc.location((*_ROOT, mixed[0])),
            hint=f"move {mixed[0]} into one of compute.topology.topologies (each holds "
            "name, plugin and that plugin's keys), or drop topologies for one topology",
        )
    if len(entries) > MAX_TOPOLOGIES:
        raise ConfigTypeError(
            too_many_topologies(len(entries)),
            where=doc.location((*_ROOT, "topologies", MAX_TOPOLOGIES)),
            hint=TOO_MANY_TOPOLOGIES_HINT,
        )
    for index, entry in enumerate(entries):
        _check_entry(doc, (*_ROOT, "topologies", index), entry)
    twice = named_twice(entry["name"] for entry in entries)
    if twice is not None:
        raise ConfigTypeError(
            f"compute.topology.topologies names {twice!r} twice",
            where=doc.location((*_ROOT, "topologies")),
        )


TOO_MANY_TOPOLOGIES_HINT = (
    "a partition uses one topology (Topology=) or the cluster default: write one per kind of "
    "placement your partitions need (a fabric tree, an NVLink block, flat)"
)


def too_many_topologies(count: int) -> str:
    return (
        f"compute.topology.topologies lists {count:,} topologies; at most {MAX_TOPOLOGIES} "
        "(each places every Slurm node again in topology.yaml)"
    )


def named_twice(names: Iterable[str]) -> str | None:
    """The first name that occurs more than once, in one pass (a hostile list is long)."""
    counts = Counter(names)
    return next((name for name, count in counts.items() if count > 1), None)


def _check_entry(doc: YamlFile, path: KeyPath, entry: dict[str, Any]) -> None:
    unknown = [key for key in entry if key not in ENTRY_VALUES]
    if unknown:
        raise ConfigTypeError(
            f"{_dotted(path)}.{unknown[0]} is not a key of a topology",
            where=doc.location((*path, unknown[0])),
            hint="a topology holds " + ", ".join(ENTRY_VALUES),
        )
    check_table(doc, path, entry, ENTRY_VALUES)
    name = entry.get("name")
    if not isinstance(name, str) or not _TOPOLOGY_NAME.fullmatch(name):
        raise ConfigTypeError(
            f"{_dotted(path)}.name must name the topology, got {name!r}",
            where=doc.location(path if name is None else (*path, "name")),
            hint="letters, digits, '-', '_', '.' (at most 63), e.g. name: nvlink; "
            "partitions choose it with Topology=<name>",
        )
    _check_keys(doc, path, entry)


def _check_keys(doc: YamlFile, root: KeyPath, data: dict[str, Any]) -> None:
    label = data.get("blockLabel")
    if label is not None:
        _check_label_key(doc, (*root, "blockLabel"), label)
    labels = data.get("switchLabels")
    if labels is not None:
        _check_switch_labels(doc, (*root, "switchLabels"), labels)
    sizes = data.get("blockSizes")
    if sizes is not None:
        _check_block_sizes(doc, (*root, "blockSizes"), sizes)


def _check_switch_labels(doc: YamlFile, path: KeyPath, labels: list[Any]) -> None:
    if not labels:
        raise ConfigTypeError(
            f"{_dotted(path)} is empty",
            where=doc.location(path),
            hint="the leaf switch's label first, then the ones above",
        )
    for index, key in enumerate(labels):
        _check_label_key(doc, (*path, index), key)
    if len(set(labels)) != len(labels):
        raise ConfigTypeError(f"{_dotted(path)} names a label twice", where=doc.location(path))


def _dotted(path: KeyPath) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _check_label_key(doc: YamlFile, path: KeyPath, key: Any) -> None:
    refused = is_qualified_name(str(key))
    if refused:
        raise ConfigTypeError(
            f"{_dotted(path)}: {key!r} is not a Kubernetes label key: {'; '.join(refused)}",
            where=doc.location(path),
            hint="an optional DNS prefix and '/', then letters, digits, '-', '_', '.' "
            "(at most 63), e.g. example.com/nvlink-domain",
        )


def _check_block_sizes(doc: YamlFile, path: KeyPath, sizes: list[Any]) -> None:
    for index, size in enumerate(sizes):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigTypeError(
                f"{_dotted(path)}[{index}] must be an integer of 1 or more, got {size!r}",
                where=doc.location((*path, index)),
            )
    if not sizes:
        raise ConfigTypeError(
            f"{_dotted(path)} is empty",
            where=doc.location(path),
            hint="leave it out for Slurm's default, or give the base block size first",
        )
    base = sizes[0]
    allowed = [base << level for level in range(MAX_LEVEL + 1)]
    for index, size in enumerate(sizes[1:], start=1):
        if size not in allowed or size <= sizes[index - 1]:
            raise ConfigTypeError(
                f"{_dotted(path)}[{index}] = {size}: each size must be larger than "
                f"the one before and the first ({base}) times a power of two",
                where=doc.location((*path, index)),
                hint=f"e.g. [{base}, {base * 2}, {base * 4}]; Slurm refuses to start otherwise",
            )
