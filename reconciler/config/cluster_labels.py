"""`compute.clusterLabels` (ours): the names of the GPU resource and the Node labels that the
shipped layers (reconciler/library) request and select on. Their defaults are CoreWeave's, which
exist only on CoreWeave's clusters; elsewhere a cluster names them otherwise (nvidia.com/gpu,
say), and a layer's slurmd Pods would stay Pending. The key renames them in the shipped layers
only: a repo's own layers and node definitions say what they say (pure).

SUNK asks two resources of a GPU Node: slurmd Pods hold `sunk.coreweave.com/accelerator` while
the Pods the scheduler binds beside them request `nvidia.com/gpu` (the Pods of "Schedule
Kubernetes Pods with Slurm"). A gpuResource that is the scheduler's Pods' own resource would let
slurmd hold all of it, and no such Pod would ever fit on those Nodes: refused while the
scheduler runs."""

from __future__ import annotations

import re
from typing import Any

from reconciler import wellknown as wk
from reconciler.config.layering import plain
from reconciler.config.value_types import Key, Table
from reconciler.config.yamlfile import YamlFile, lookup
from reconciler.errors import ConfigTypeError, Location

_KEY = "compute.clusterLabels"
# subkey -> the CoreWeave name the shipped layers are written with.
DEFAULTS: dict[str, str] = {
    "gpuResource": wk.RESOURCE_SUNK_ACCELERATOR,
    "gpuClass": wk.NODE_LABEL_GPU_CLASS,
    "gpuModel": wk.NODE_LABEL_GPU_MODEL,
    "cpu": wk.NODE_LABEL_CW_CPU,
}
RESOURCE_KEYS = ("gpuResource",)
GPU_RESOURCE_PATH = ("compute", "clusterLabels", "gpuResource")
# What the Pods our scheduler binds request of a GPU: a slurmd Pod that holds it leaves them none.
SCHEDULED_POD_GPU_RESOURCES = (wk.RESOURCE_NVIDIA_GPU,)
# Where to advertise a second extended resource per GPU Node.
SECOND_RESOURCE_DOCS = "docs/node-definitions.md#two-gpu-resources-per-node"
_MEANS = {"gpuResource": "the GPU extended resource the shipped layers request",
          "gpuClass": "the Node label of a GPU's class", "gpuModel": "the Node label of a GPU's "
          "model", "cpu": "the Node label of a CPU's model"}  # fmt: skip
CLUSTER_LABEL_VALUES: Table = {
    _KEY: Key("mapping", "names the shipped layers request and select on"),
    **{f"{_KEY}.{key}": Key("string", _MEANS[key], default) for key, default in DEFAULTS.items()},
}
# A qualified name as Kubernetes takes one for a label key or an extended resource.
_NAME = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def check_cluster_labels(doc: YamlFile) -> None:
    for key in DEFAULTS:
        path = ("compute", "clusterLabels", key)
        value, found = lookup(doc.data, list(path))
        if found and value is not None and not _NAME.fullmatch(str(value)):
            raise ConfigTypeError(
                f"{_KEY}.{key}: {value!r} is not a Kubernetes label or resource name",
                where=doc.location(path),
                hint=f"a name such as {DEFAULTS[key]!r} (prefix/name), as your Nodes carry it",
            )


def check_gpu_resource(values: dict[str, Any], where: Location | None) -> None:
    """The merged gpuResource (`where`: the file and line that last set it): an extended
    resource, and not the one the scheduler's Pods request while the scheduler is enabled."""
    name = str(plain(lookup(values, list(GPU_RESOURCE_PATH))[0]) or "")
    if not name:
        return
    prefix, slash, _ = name.rpartition("/")
    if not slash or prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        raise ConfigTypeError(
            f"{_KEY}.gpuResource: {name!r} is one of Kubernetes' own resources, not an extended "
            "resource: the shipped GPU layers' GPU count would replace slurmd's own request",
            where=where,
            hint=f"a GPU extended resource your Nodes advertise for slurmd (default "
            f"{DEFAULTS['gpuResource']!r}; {SECOND_RESOURCE_DOCS})",
        )
    scheduler = plain(values.get("scheduler")) or {}
    if name in SCHEDULED_POD_GPU_RESOURCES and scheduler.get("enabled", True):
        raise ConfigTypeError(
            f"{_KEY}.gpuResource: {name!r} is the resource the scheduler's GPU Pods request, "
            "and scheduler.enabled is true (the default): each shipped GPU layer's slurmd Pod "
            "would hold all of it on its Node, so no GPU Pod could ever be bound there",
            where=where,
            hint=f"keep the default {DEFAULTS['gpuResource']!r}, or name another extended "
            f"resource, and advertise it on each GPU Node beside {name} "
            f"({SECOND_RESOURCE_DOCS}); or set scheduler.enabled: false if no Pod is "
            "scheduled through Slurm",
        )


def cluster_names(values: dict[str, Any]) -> dict[str, str]:
    """subkey -> the name this cluster uses (CoreWeave's where values set none)."""
    given = ((values.get("compute") or {}).get("clusterLabels")) or {}
    return {key: str(given.get(key) or default) for key, default in DEFAULTS.items()}


def renames(values: dict[str, Any]) -> dict[str, str]:
    """CoreWeave name -> this cluster's, for the names values change."""
    names = cluster_names(values)
    return {DEFAULTS[key]: name for key, name in names.items() if name != DEFAULTS[key]}


def key_for(name: str, values: dict[str, Any]) -> str | None:
    """The compute.clusterLabels key that sets `name`, if one does."""
    for key, given in cluster_names(values).items():
        if given == name:
            return f"{_KEY}.{key}"
    return None


def renamed_layer(data: Any, names: dict[str, str]) -> Any:
    """A shipped layer with its resource names, nodeSelector keys and node-affinity keys
    renamed; everything else as it was."""
    if not names or not isinstance(data, dict):
        return data
    out = dict(data)
    if isinstance(out.get("resources"), dict):
        out["resources"] = {part: _keys(amounts, names) if isinstance(amounts, dict) else amounts
                            for part, amounts in out["resources"].items()}  # fmt: skip
    if isinstance(out.get("nodeSelector"), dict):
        out["nodeSelector"] = _keys(out["nodeSelector"], names)
    if isinstance(out.get("affinity"), dict):
        out["affinity"] = _affinity(out["affinity"], names)
    return out


def _keys(mapping: dict[Any, Any], names: dict[str, str]) -> dict[Any, Any]:
    return {names.get(str(k), k): v for k, v in mapping.items()}


def _affinity(data: Any, names: dict[str, str]) -> Any:
    """Every `key` of a match expression under the affinity, at any depth."""
    if isinstance(data, list):
        return [_affinity(item, names) for item in data]
    if not isinstance(data, dict):
        return data
    out = {k: _affinity(v, names) for k, v in data.items()}
    if isinstance(out.get("key"), str) and "operator" in out:
        out["key"] = names.get(out["key"], out["key"])
    return out
