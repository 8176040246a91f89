"""How big a config repo may be: caps no real repo comes near and every hostile one crosses.

A 460-byte file of nested YAML aliases expands to hundreds of millions of values; 900 nested
brackets overflow every recursive walk after the parser; a values.d file may be a link to
anything on the host. These limits refuse such input before anything expensive runs, with an
error that names the file (and line) and says what to do.

For scale: a SUNK values file with 2000 node definitions is 260 KB, about 36 000 values, and
nests 12 deep at most (a node affinity term).

Counts multiply too: `maxReplicas: 2000000` (54 bytes) made two million Slurm node names and
rendered for 29 s in 1.35 GB. The Slurm nodes of a config are capped at MAX_NODES, each
count where it is written and all node sets together when they are compiled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from reconciler import hostlists
from reconciler.errors import ConfigSyntaxError, Location

MIB = 2**20
MAX_FILE_BYTES = 4 * MIB
MAX_REPO_BYTES = 32 * MIB
MAX_FILES = 1000  # config files the loader reads (values.d, compute-defs, policies, ...)
MAX_DEPTH = 64
# Values (mapping keys and values, list items, scalars) once every alias is expanded, summed
# over all files of one load: what layering, type checks and `--explain` walk.
MAX_VALUES = 200_000
# Slurm nodes over all node sets, running and spare (maxReplicas). Five times the largest
# clusters we can justify (Frontier: 9,408 Slurm nodes; 100,000 GPUs at 8 a node: 12,500),
# and the hostlist cap itself: every node we declare is recorded in one hostlist (the
# slurm-nodes annotation) that plan reads back through hostlists.expand.
MAX_NODES = hostlists.MAX_NAMES
# Node definitions (compute.nodes entries of all values files): each is a StatefulSet (a few
# KB rendered from a few bytes naming layers) and a NodeName line. Real configs have tens (a
# node type per region); 2,048 keeps this repo's 2000-definition scale test (a render of
# about 3 s) where the value cap alone allows about 28,000 (8,000 took 9.8 s and 243 MB).
MAX_NODE_SETS = 2048
# Named topologies (compute.topology.topologies, over all values files). A partition uses one
# (Topology=) or the cluster default, and real clusters write two to four (a fabric tree, an
# NVLink block, flat): 16 is four times that. Each block or tree topology places every Slurm
# node again, in topology.yaml and at every render (the daemon renders it each node-sync
# interval): about 0.5 s and 210 KB per topology at the node cap, so 16 bound that to 8 s.
MAX_TOPOLOGIES = 16
_TOO_MANY = (
    "an alias (*name) repeats everything under its anchor: use fewer, or keep data that "
    "is not configuration out of the repo"
)


def check_file_size(size: int, name: str) -> None:
    if size > MAX_FILE_BYTES:
        raise ConfigSyntaxError(
            f"file is {size / MIB:.1f} MiB; a config file may be at most "
            f"{MAX_FILE_BYTES // MIB} MiB",
            where=Location(name),
            hint="split it into several values.d or compute-defs files",
        )


@dataclass
class ValueBudget:
    """Values left for the rest of one load (every file of a repo draws on the same budget),
    and node names left for the reservations' hostlists (each checked in its file)."""

    left: int = MAX_VALUES
    names_left: int = MAX_NODES

    def spend(self, count: int) -> None:
        self.left -= count


def check_events(loader: Any, name: str, budget: ValueBudget) -> None:
    """Stream the parser's events (nothing is built) and refuse a document that nests too
    deeply, refers to itself through an alias, or holds more values than the budget has
    left once aliases are expanded. An alias costs what its anchor holds: aliases make the
    document a DAG that is cheap to compose but walked once per use by everything after."""
    counter = _Counter(name, budget.left)
    while loader.check_event():
        counter.see(loader.get_event())
    budget.spend(counter.total)


@dataclass
class _Open:
    """A mapping or sequence whose end event has not come yet."""

    anchor: str | None
    size: int = 1
    height: int = 1


class _Counter:
    def __init__(self, name: str, limit: int) -> None:
        self.name, self.limit, self.total = name, limit, 0
        self.anchors: dict[str, tuple[int, int]] = {}  # anchor -> (values, height)
        self.open: list[_Open] = []

    def see(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.ScalarEvent):  # the most frequent first
            self._count(event, 1, 0)
            if event.anchor is not None:
                self.anchors[event.anchor] = (1, 0)
            self._add_to_parent(1, 0)
        elif isinstance(event, yaml.CollectionStartEvent):
            self._count(event, 1, 1)
            self.open.append(_Open(event.anchor))
        elif isinstance(event, yaml.CollectionEndEvent):
            done = self.open.pop()
            if done.anchor is not None:
                self.anchors[done.anchor] = (done.size, done.height)
            self._add_to_parent(done.size, done.height)
        elif isinstance(event, yaml.AliasEvent):
            self._alias(event)
        elif isinstance(event, yaml.DocumentStartEvent):
            self.anchors = {}  # anchors are per document

    def _alias(self, event: yaml.AliasEvent) -> None:
        if any(o.anchor == event.anchor for o in self.open):
            problem = "an alias refers to itself (a recursive anchor)"
            raise _error(event, self.name, problem, "remove the alias: a value cannot hold itself")
        if event.anchor not in self.anchors:
            return  # undefined: the composer reports it with its line
        size, height = self.anchors[event.anchor]
        self._count(event, size, height)
        self._add_to_parent(size, height)

    def _count(self, event: yaml.Event, size: int, height: int) -> None:
        """`height` levels of nesting start here, inside the open ones."""
        self.total += size
        if len(self.open) + height > MAX_DEPTH:
            problem = f"values are nested more than {MAX_DEPTH} levels deep"
            raise _error(event, self.name, problem, "no SUNK value nests this deep; flatten it")
        if self.total > self.limit:
            raise _error(
                event,
                self.name,
                f"the config repo holds more than {MAX_VALUES:,} values once YAML aliases "
                "are expanded; this file crossed the limit",
                _TOO_MANY,
            )

    def _add_to_parent(self, size: int, height: int) -> None:
        if self.open:
            parent = self.open[-1]
            parent.size += size
            parent.height = max(parent.height, height + 1)


def _error(event: yaml.Event, name: str, problem: str, hint: str) -> ConfigSyntaxError:
    line = event.start_mark.line + 1 if event.start_mark is not None else 0
    return ConfigSyntaxError(problem, where=Location(name, line), hint=hint)
