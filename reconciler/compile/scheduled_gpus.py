"""The plan's word on a slurmd Pod that holds the GPUs the scheduler's Pods request (pure).

SUNK asks two resources of a GPU Node: slurmd holds `sunk.coreweave.com/accelerator`, and the
Pods our scheduler binds beside it request `nvidia.com/gpu`. config refuses
`compute.clusterLabels.gpuResource: nvidia.com/gpu` while the scheduler runs
(config/cluster_labels.py); a repo's own layer, which is not renamed, may still request it.
Its slurmd Pods then take every such GPU of their Node, and node_fit (like the kubelet) finds
no room there for any GPU Pod, Slurm allocating the node notwithstanding: named here, with the
layer and file that set it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reconciler.compile.nodesets import NodeSet, last_setter
from reconciler.config.cluster_labels import (
    DEFAULTS,
    SCHEDULED_POD_GPU_RESOURCES,
    SECOND_RESOURCE_DOCS,
)
from reconciler.config.repo import Config
from reconciler.errors import Warning_
from reconciler.kuberules.quantity import QuantityError, manifest_quantity
from reconciler.objects import Obj


def scheduled_gpu_warnings(
    config: Config, enabled: Iterable[tuple[NodeSet, Obj]]
) -> list[Warning_]:
    """One warning per enabled definition whose slurmd container asks for a resource the
    scheduler's GPU Pods request; none while scheduler.enabled is false."""
    if not config.view.scheduler_enabled:
        return []
    warnings = []
    for nodeset, definition in enabled:
        for resource, part in _held(definition.get("resources")):
            setter = last_setter(config, nodeset, ("resources", part, resource))
            by = (f", set by layer {setter.layer!r} ({setter.where})"
                  if setter is not None and setter.layer != nodeset.name else "")  # fmt: skip
            warnings.append(Warning_(str(nodeset.where), (
                f"node definition {nodeset.name!r}: its slurmd Pods request {resource} "
                f"(resources.{part}{by}), the resource the scheduler's GPU Pods request: slurmd "
                f"holds it on each of its Nodes, so the scheduler never binds a GPU Pod there "
                f"(Insufficient {resource}); request {DEFAULTS['gpuResource']} or another "
                f"extended resource the Nodes advertise beside it ({SECOND_RESOURCE_DOCS})"
            )))  # fmt: skip
    return warnings


def _held(resources: Any) -> list[tuple[str, str]]:
    """(resource, "limits" or "requests") for each scheduled Pods' resource asked for."""
    if not isinstance(resources, dict):
        return []
    found = []
    for resource in SCHEDULED_POD_GPU_RESOURCES:
        for part in ("limits", "requests"):
            amount = (resources.get(part) or {}).get(resource)
            if amount is not None and _positive(amount):
                found.append((resource, part))
                break
    return found


def _positive(amount: Any) -> bool:
    try:
        return manifest_quantity(amount) > 0
    except (QuantityError, TypeError):
        return True  # a bad quantity is the compiler's to refuse, not ours to hide
