"""The keys of `compute.topology` (ours), checked in the file that writes them: a wrong value
names its file, line and key. What only the merged values show (block without blockLabel) is
checked when compiling (compile/topology.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reconciler.config.yamlfile import KeyPath, YamlFile, lookup
from reconciler.errors import ConfigTypeError

TOPOLOGY_VALUES: dict[str, str] = {
    "compute.topology": "mapping",
    "compute.topology.plugin": "string",
    "compute.topology.blockLabel": "string",
    "compute.topology.blockSizes": "list",
    "compute.topology.switchLabels": "list of strings",
    "compute.topology.exclusivePartitions": "list of strings",
}
PLUGINS = ("block", "tree")
# Slurm (block_record.c) accepts BlockSizes whose sizes are the first times a power of two,
# up to 2^15, and stops at start on anything else.
MAX_LEVEL = 15
_ROOT: KeyPath = ("compute", "topology")
# A Kubernetes label key: an optional DNS-subdomain prefix and "/", then a name of at most 63.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_LABEL_KEY = re.compile(rf"({_PREFIX}/)?{_NAME}")


def topology_settings(values: Mapping[str, Any]) -> dict[str, str]:
    """The slurm.conf line compute.topology adds."""
    plugin = ((values.get("compute") or {}).get("topology") or {}).get("plugin")
    return {"TopologyPlugin": f"topology/{plugin}"} if plugin in PLUGINS else {}


def check_topology(doc: YamlFile) -> None:
    """Values beyond their types (checked from TOPOLOGY_VALUES before this runs)."""
    plugin, found = lookup(doc.data, [*_ROOT, "plugin"])
    if found and plugin not in PLUGINS:
        raise ConfigTypeError(
            f"compute.topology.plugin must be one of {', '.join(PLUGINS)}, got {plugin!r}",
            where=doc.location((*_ROOT, "plugin")),
            hint="block (Slurm 23.11+): one block per value of blockLabel; tree: switches "
            "from switchLabels",
        )
    label, found = lookup(doc.data, [*_ROOT, "blockLabel"])
    if found and label is not None:
        _check_label_key(doc, (*_ROOT, "blockLabel"), label)
    labels, found = lookup(doc.data, [*_ROOT, "switchLabels"])
    if found and labels is not None:
        if not labels:
            raise ConfigTypeError(
                "compute.topology.switchLabels is empty",
                where=doc.location((*_ROOT, "switchLabels")),
                hint="the leaf switch's label first, then the ones above",
            )
        for index, key in enumerate(labels):
            _check_label_key(doc, (*_ROOT, "switchLabels", index), key)
        if len(set(labels)) != len(labels):
            raise ConfigTypeError(
                "compute.topology.switchLabels names a label twice",
                where=doc.location((*_ROOT, "switchLabels")),
            )
    sizes, found = lookup(doc.data, [*_ROOT, "blockSizes"])
    if found and sizes is not None:
        _check_block_sizes(doc, sizes)


def _check_label_key(doc: YamlFile, path: KeyPath, key: Any) -> None:
    prefix, _, name = str(key).rpartition("/")
    if not _LABEL_KEY.fullmatch(str(key)) or len(prefix) > 253 or len(name) > 63:
        raise ConfigTypeError(
            f"{'.'.join(str(p) for p in path)}: {key!r} is not a Kubernetes label key",
            where=doc.location(path),
            hint="an optional DNS prefix and '/', then letters, digits, '-', '_', '.' "
            "(at most 63), e.g. example.com/nvlink-domain",
        )


def _check_block_sizes(doc: YamlFile, sizes: list[Any]) -> None:
    path = (*_ROOT, "blockSizes")
    for index, size in enumerate(sizes):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigTypeError(
                f"compute.topology.blockSizes[{index}] must be an integer of 1 or more, "
                f"got {size!r}",
                where=doc.location((*path, index)),
            )
    if not sizes:
        raise ConfigTypeError(
            "compute.topology.blockSizes is empty",
            where=doc.location(path),
            hint="leave it out for Slurm's default, or give the base block size first",
        )
    base = sizes[0]
    allowed = [base << level for level in range(MAX_LEVEL + 1)]
    for index, size in enumerate(sizes[1:], start=1):
        if size not in allowed or size <= sizes[index - 1]:
            raise ConfigTypeError(
                f"compute.topology.blockSizes[{index}] = {size}: each size must be larger than "
                f"the one before and the first ({base}) times a power of two",
                where=doc.location((*path, index)),
                hint=f"e.g. [{base}, {base * 2}, {base * 4}]; Slurm refuses to start otherwise",
            )
