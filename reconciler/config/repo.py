"""A config repo's files -> merged values and the layers node definitions may use (pure).

Files arrive as a mapping of repo-relative path -> text; `reconciler.config.files` reads them
from disk. Layout (documented in the README, "The config repo"):

    reconciler.yaml        optional: release, namespace
    values.yaml            required: SUNK chart values
    values.d/*.yaml        optional: merged after values.yaml in lexical order (layering rules)
    compute-defs/**.yaml   optional: extra layers, same format as the shipped library
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.config.accounting import check_accounting, note_accounting
from reconciler.config.cluster_labels import (
    GPU_RESOURCE_PATH,
    check_gpu_resource,
    renamed_layer,
    renames,
)
from reconciler.config.keys import ALL_VALUES
from reconciler.config.layering import deep_update, tag
from reconciler.config.limits import MAX_NODE_SETS, ValueBudget
from reconciler.config.policy_file import Override, Policy, parse_policy_file
from reconciler.config.rendered_values import check_rendered_values
from reconciler.config.reservations import check_reservations
from reconciler.config.slurm_words import check_layer_words, check_slurm_values
from reconciler.config.values_file import check_layer_file, check_values_file
from reconciler.config.values_view import ValuesView
from reconciler.config.yamlfile import KeyPath, YamlFile, check_yaml_limits, lookup, parse_yaml
from reconciler.errors import ConfigTypeError, Location, ReconcilerError, Warning_
from reconciler.kuberules.validation import is_dns1123_label

VALUES_FILE = "values.yaml"
SETTINGS_FILE = "reconciler.yaml"
LIBRARY_PREFIX = "library/"
POLICIES_DIR = "policies/"


@dataclass(frozen=True)
class Layer:
    """A named layer: shipped in the library, in the repo's compute-defs, or under compute.nodes."""

    name: str
    data: dict[str, Any]
    where: Location
    # Where this layer writes each of WATCHED_KEYS (the plan's warnings name the line).
    key_locations: Mapping[KeyPath, Location] = field(default_factory=dict)


# Keys of a node definition whose silent effect a plan warning names with its file and line:
# `enabled` (no nodes) and the image (a repository without a tag).
WATCHED_KEYS: tuple[KeyPath, ...] = (("enabled",), ("image", "repository"), ("image", "tag"))
# The control-plane components whose `image.repository` and `image.tag` are watched the same way.
IMAGE_COMPONENTS = ("controller", "login", "rest", "accounting", "mysql")


@dataclass(frozen=True)
class RepoSettings:
    release: str = "slurm"
    namespace: str = "slurm"


@dataclass(frozen=True)
class Config:
    values: dict[str, Any]
    file_layers: dict[str, Layer]
    node_locations: dict[str, Location]
    settings: RepoSettings
    partitions_where: Location | None = None
    warnings: tuple[Warning_, ...] = field(default=())
    # The repo's own policies/*.yaml, parsed; shipped ones are added when they are compiled.
    policies: tuple[Policy | Override, ...] = field(default=())
    # slurmConfig.reservations: name -> key ("" for the entry itself) -> where it was last set.
    reservation_locations: dict[str, dict[str, Location]] = field(default_factory=dict)
    # slurmConfig.accounting: "<section>/<name>" -> where the entry was last set.
    accounting_locations: dict[str, Location] = field(default_factory=dict)
    # compute.topology: where it was last set (errors only the merge shows point there).
    topology_where: Location | None = None
    # Where WATCHED_KEYS of compute.nodes entries and the image keys of IMAGE_COMPONENTS were
    # last set, by full key path.
    value_locations: dict[KeyPath, Location] = field(default_factory=dict)

    @functools.cached_property
    def view(self) -> ValuesView:
        """The values' settings, parsed at the first look and kept (a CompileError, such as
        a suspendTime that is no number of seconds, is raised there, as the compiler did)."""
        return ValuesView.of(self.values)

    def layer(self, name: str) -> Layer | None:
        """compute.nodes entries win over files of the same name, as in SUNK's chart."""
        nodes = self.values.get("compute", {}).get("nodes") or {}
        if name in nodes:
            prefix = ("compute", "nodes", name)
            keys = {key: where for key in WATCHED_KEYS
                    if (where := self.value_locations.get((*prefix, *key)))}  # fmt: skip
            return Layer(name, nodes[name] or {}, self.node_locations[name], keys)
        return self.file_layers.get(name)

    def layer_names(self) -> list[str]:
        nodes = self.values.get("compute", {}).get("nodes") or {}
        return sorted({*nodes, *self.file_layers})


def is_repo_file(path: str) -> bool:
    """Which repo-relative paths the loader reads (the I/O side uses this to pick files)."""
    return (
        path in (VALUES_FILE, SETTINGS_FILE)
        or (path.startswith("values.d/") and path.count("/") == 1 and _is_yaml(path))
        or (path.startswith("compute-defs/") and _is_yaml(path))
        or (path.startswith(POLICIES_DIR) and path.count("/") == 1 and _is_yaml(path))
    )


def _is_yaml(path: str) -> bool:
    return path.endswith((".yaml", ".yml"))


def load_config(
    files: Mapping[str, str],
    library: Mapping[str, str],
    *,
    track_origins: bool = False,
    release: str | None = None,
    namespace: str | None = None,
) -> Config:
    """Parse, type-check and merge a repo. `library` maps file name -> text of shipped layers."""
    if VALUES_FILE not in files:
        raise ReconcilerError(
            f"no {VALUES_FILE} at the root of the config repo",
            hint="create values.yaml with at least `compute: {nodes: {}}` "
            "(see fixtures/config-repo)",
        )
    warnings: list[Warning_] = []
    budget = ValueBudget()  # one for the whole repo: many small alias bombs add up
    reservation_locations: dict[str, dict[str, Location]] = {}
    accounting_locations: dict[str, Location] = {}
    wheres: dict[str, Location] = {}
    value_locations: dict[KeyPath, Location] = {}
    values, node_locations, partitions_where = _merge_values(
        files, warnings, track_origins, reservation_locations, accounting_locations, budget,
        wheres, value_locations,
    )  # fmt: skip
    # The shipped layers say CoreWeave's GPU and Node label names; values may rename them.
    check_gpu_resource(values, wheres.get("gpuResource"))
    layers = _load_layers(library, LIBRARY_PREFIX, warnings, track_origins, budget,
                          renames(values))  # fmt: skip
    repo_layers = _load_layers(
        {p: t for p, t in files.items() if p.startswith("compute-defs/") and _is_yaml(p)},
        "",
        warnings,
        track_origins,
        budget,
    )
    layers.update(repo_layers)  # the repo may redefine a shipped layer
    settings = _settings(files, budget)
    if release or namespace:  # command-line flags win over reconciler.yaml
        settings = RepoSettings(
            release=_checked_label("--release", release or settings.release, None),
            namespace=_checked_label("--namespace", namespace or settings.namespace, None),
        )
    policies = _load_policies(files, budget)
    return Config(
        values,
        layers,
        node_locations,
        settings,
        partitions_where,
        tuple(warnings),
        policies,
        reservation_locations,
        accounting_locations,
        wheres.get("topology"),
        value_locations,
    )


def _merge_values(
    files: Mapping[str, str],
    warnings: list[Warning_],
    track_origins: bool,
    reservation_locations: dict[str, dict[str, Location]],
    accounting_locations: dict[str, Location],
    budget: ValueBudget,
    wheres: dict[str, Location],
    value_locations: dict[KeyPath, Location],
) -> tuple[dict[str, Any], dict[str, Location], Location | None]:
    names = [
        VALUES_FILE,
        *sorted(
            p for p in files if p.startswith("values.d/") and p.count("/") == 1 and _is_yaml(p)
        ),
    ]
    merged: dict[str, Any] = {}
    node_locations: dict[str, Location] = {}
    partitions_where = None
    for name in names:
        doc = parse_yaml(files[name], name, budget)
        _check_node_sets(doc, node_locations)
        check_values_file(doc, warnings)
        check_slurm_values(doc, ALL_VALUES)
        check_rendered_values(doc)
        check_reservations(doc, files[name], budget)
        _note_reservations(doc, reservation_locations)
        check_accounting(doc)
        note_accounting(doc, accounting_locations)
        _note_watched(doc, value_locations)
        for node_name in (doc.data.get("compute") or {}).get("nodes") or {}:
            node_locations.setdefault(node_name, doc.location(("compute", "nodes", node_name)))
        if "partitions" in (doc.data.get("compute") or {}):
            partitions_where = doc.location(("compute", "partitions"))
        if "topology" in (doc.data.get("compute") or {}):
            wheres["topology"] = doc.location(("compute", "topology"))
        if lookup(doc.data, GPU_RESOURCE_PATH)[1]:
            wheres["gpuResource"] = doc.location(GPU_RESOURCE_PATH)
        data = tag(doc.data, _origin(doc, _values_label)) if track_origins else doc.data
        merged = deep_update(merged, data)
    return merged, node_locations, partitions_where


def _note_watched(doc: YamlFile, locations: dict[KeyPath, Location]) -> None:
    """Where this file writes a watched key (a later file's write wins; its null removes)."""
    nodes = (doc.data.get("compute") or {}).get("nodes") or {}
    paths = [
        *(("compute", "nodes", name, *key) for name in nodes for key in WATCHED_KEYS),
        *((part, "image", key) for part in IMAGE_COMPONENTS for key in ("repository", "tag")),
    ]
    for path in paths:
        value, found = lookup(doc.data, path)
        if found and value is None:
            locations.pop(path, None)
        elif found:
            locations[path] = doc.location(path)


def _key_locations(doc: YamlFile, layer_name: str, data: dict[str, Any]) -> dict[KeyPath, Location]:
    return {key: doc.location((layer_name, *key)) for key in WATCHED_KEYS if lookup(data, key)[1]}


def _check_node_sets(doc: YamlFile, known: Mapping[str, Location]) -> None:
    """Counted as each file comes, before it is type-checked: a node definition of a few
    bytes naming layers is a StatefulSet of a few KB, composed and rendered."""
    nodes = (doc.data.get("compute") or {}).get("nodes") if isinstance(doc.data, dict) else None
    if not isinstance(nodes, dict) or len(known) + len(nodes) <= MAX_NODE_SETS:
        return
    new = [name for name in nodes if name not in known]
    if len(known) + len(new) > MAX_NODE_SETS:
        raise ConfigTypeError(
            f"more than {MAX_NODE_SETS:,} node definitions (counted up to this one); each is a "
            "StatefulSet",
            where=doc.location(("compute", "nodes", new[MAX_NODE_SETS - len(known)])),
            hint="real clusters have tens (one per node type and region): merge definitions "
            "that differ only in name",
        )


def _note_reservations(doc: YamlFile, locations: dict[str, dict[str, Location]]) -> None:
    """Where each reservation and each of its keys was last written; times YAML read as
    datetimes become ISO text again, so compiled values hold only plain YAML types."""
    reservations = (doc.data.get("slurmConfig") or {}).get("reservations") or {}
    for name, entry in reservations.items():
        path = ("slurmConfig", "reservations", name)
        if entry is None:  # removed by this file (Helm's null)
            locations.pop(name, None)
            continue
        where = locations.setdefault(name, {})
        where[""] = doc.location(path)
        for key, value in entry.items():
            where[key] = doc.location((*path, key))
            if value is None:
                where.pop(key)
            elif isinstance(value, datetime.date):
                entry[key] = value.isoformat()


def _load_layers(
    texts: Mapping[str, str],
    prefix: str,
    warnings: list[Warning_],
    track_origins: bool,
    budget: ValueBudget,
    names: dict[str, str] | None = None,
) -> dict[str, Layer]:
    """`names`: label and resource names to rename in these layers (compute.clusterLabels)."""
    layers: dict[str, Layer] = {}
    for name in sorted(texts):
        doc = parse_yaml(texts[name], prefix + name, budget)
        check_layer_file(doc, warnings)
        check_layer_words(doc)
        for layer_name, data in doc.data.items():
            where = doc.location((layer_name,))
            if layer_name in layers:
                raise ReconcilerError(
                    f"layer {layer_name!r} is defined twice (first at {layers[layer_name].where})",
                    where=where,
                    hint="rename one of them; layer names are global across compute-defs files",
                )
            data = renamed_layer(data or {}, names or {})
            if track_origins:
                data = tag(data, _origin(doc, _named(layer_name), (layer_name,)))
            keys = _key_locations(doc, layer_name, data)
            layers[layer_name] = Layer(str(layer_name), data, where, keys)
    return layers


def _load_policies(files: Mapping[str, str], budget: ValueBudget) -> tuple[Policy | Override, ...]:
    texts = {path: text for path, text in sorted(files.items()) if path.startswith(POLICIES_DIR)}
    for path, text in texts.items():  # the policy parser has no share of the repo's budget
        check_yaml_limits(text, path, budget)
    return tuple(
        doc for path, text in texts.items() for doc in parse_policy_file(text, path, "repo")
    )


def _values_label(path: KeyPath) -> str:
    if len(path) >= 3 and path[:2] == ("compute", "nodes"):
        return str(path[2])
    return "values"


def _named(name: str) -> Callable[[KeyPath], str]:
    """A label that is `name` whatever the path."""
    return lambda _path: name


def _origin(
    doc: YamlFile, label: Callable[[KeyPath], str], base: KeyPath = ()
) -> Callable[[KeyPath], str]:
    def origin_of(path: KeyPath) -> str:
        full = (*base, *path)
        where = doc.location(full)
        return f"{label(full)} ({where.file}:{where.line})"

    return origin_of


def _settings(files: Mapping[str, str], budget: ValueBudget) -> RepoSettings:
    if SETTINGS_FILE not in files:
        return RepoSettings()
    doc = parse_yaml(files[SETTINGS_FILE], SETTINGS_FILE, budget)
    data = doc.data if isinstance(doc.data, dict) else {}
    return RepoSettings(
        **{
            key: _checked_label(
                key, data.get(key, getattr(RepoSettings, key)), doc.location((key,))
            )
            for key in ("release", "namespace")
        }
    )


def _checked_label(key: str, value: object, where: Location | None) -> str:
    if not isinstance(value, str) or is_dns1123_label(value):
        raise ConfigTypeError(
            f"{key} must be a DNS label (lowercase letters, digits, '-', at most 63), got "
            f"{value!r}",
            where=where,
        )
    return value
