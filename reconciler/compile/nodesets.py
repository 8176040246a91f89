"""Compose node definitions from layers (SUNK's "Slurm Workload Manager" page,
"Compute Node Definitions"), pure.

A definition that lists `definitions:` starts from the `base` layer, then each named layer in
order (a layer that itself lists `definitions:` contributes those first, then its own keys),
and its own keys last. A definition without `definitions:` is taken as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.config.layering import deep_update, plain
from reconciler.config.repo import Config, Layer
from reconciler.errors import LayerCycleError, Location, UnknownLayerError
from reconciler.suggest import did_you_mean

BASE_LAYER = "base"
DEFINITIONS_KEY = "definitions"


@dataclass(frozen=True)
class NodeSet:
    """One composed entry of compute.nodes."""

    name: str
    definition: dict[str, Any]
    layers: tuple[str, ...]
    where: Location

    @property
    def enabled(self) -> bool:
        # As in SUNK's chart: only a definition whose composed `enabled` is true makes nodes.
        return plain(self.definition.get("enabled")) is True


def compose_all(config: Config, only: str | None = None) -> list[NodeSet]:
    """Every compute.nodes entry, composed, sorted by name."""
    nodes = config.values.get("compute", {}).get("nodes") or {}
    names = sorted(nodes)
    if only is not None:
        if only not in nodes:
            raise UnknownLayerError(
                f"no node definition named {only!r} under compute.nodes",
                hint=_did_you_mean(only, names),
            )
        names = [only]
    expander = _Expander(config)
    return [compose_node_definition(name, config, expander) for name in names]


def compose_node_definition(
    name: str, config: Config, expander: _Expander | None = None
) -> NodeSet:
    expander = expander or _Expander(config)
    layer = config.layer(name)
    assert layer is not None, name  # callers pass compute.nodes keys
    refs = _refs(layer)
    if not refs:
        return NodeSet(name, _without_definitions(layer.data), (), layer.where)
    sequence = [*expander.expand(BASE_LAYER, (name,)), *_expand_refs(expander, layer, (name,))]
    composed: dict[str, Any] = {}
    for _, data in sequence:
        composed = deep_update(composed, data)
    composed = deep_update(composed, _without_definitions(layer.data))
    return NodeSet(name, composed, tuple(n for n, _ in sequence), layer.where)


class _Expander:
    """Flattens a layer into the primitive layers it applies, memoized per layer name."""

    def __init__(self, config: Config):
        self._config = config
        self._memo: dict[str, list[tuple[str, dict[str, Any]]]] = {}

    def expand(self, name: str, stack: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
        if name in stack:
            cycle = [*stack[stack.index(name) :], name]
            raise LayerCycleError(cycle, where=self._where(stack[0]))
        if name in self._memo:
            return self._memo[name]
        layer = self._config.layer(name)
        if layer is None:
            raise self._unknown(name, stack)
        sequence = [
            *_expand_refs(self, layer, (*stack, name)),
            (name, _without_definitions(layer.data)),
        ]
        self._memo[name] = sequence
        return sequence

    def _where(self, name: str) -> Location | None:
        layer = self._config.layer(name)
        return layer.where if layer else None

    def _unknown(self, name: str, stack: tuple[str, ...]) -> UnknownLayerError:
        via = f" (via {' -> '.join(stack)})" if len(stack) > 1 else ""
        return UnknownLayerError(
            f"node definition {stack[0]!r} uses unknown layer {name!r}{via}",
            where=self._where(stack[-1]),
            hint=_did_you_mean(name, self._config.layer_names()),
        )


def _expand_refs(
    expander: _Expander, layer: Layer, stack: tuple[str, ...]
) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for ref in _refs(layer):
        out.extend(expander.expand(ref, stack))
    return out


def _refs(layer: Layer) -> list[str]:
    return [str(plain(r)) for r in layer.data.get(DEFINITIONS_KEY) or []]


def _without_definitions(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != DEFINITIONS_KEY}


@dataclass(frozen=True)
class Setter:
    """The layer whose write of a key a composed definition keeps, and where it wrote it."""

    layer: str
    value: Any
    where: str  # "file:line"


def last_setter(config: Config, nodeset: NodeSet, key: tuple[str, ...]) -> Setter | None:
    """Which layer of `nodeset`'s composition (its own keys last) set `key` last, or None
    where none did. Layers apply in order and a later write wins (a null removes the key), so
    the last layer that writes it is the one the composed definition shows."""
    for name in reversed((*nodeset.layers, nodeset.name)):
        layer = config.layer(name)
        data: Any = layer.data if layer else None
        for part in key:
            data = data.get(part, _ABSENT) if isinstance(data, dict) else _ABSENT
        if layer is not None and data is not _ABSENT:
            where = layer.key_locations.get(key) or layer.where
            return Setter(name, plain(data), f"{where.file}:{where.line}")
    return None


_ABSENT = object()


def _did_you_mean(name: str, known: list[str]) -> str:
    return did_you_mean(name, known, limit=4) or "known layers: " + ", ".join(known)
