"""Bin-packing through Slurm's own node weights, and the fragmentation figure. Pure.

Slurm allocates the lowest-weight nodes that fit first, and node weight comes before LLN and
node order. So the most-allocated nodes get the lowest weights: a small job fills a partly used
node before it touches an idle one, and Slurm still decides what fits. Weights are distinct
(free resources first, then the node's place in name order), so a burst of jobs submitted
before any weight changes still fills one node after another instead of spreading.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from reconciler.adapters.slurm.model import SlurmNode
from reconciler.adapters.slurm.model import gres_gpus as gpus

# A GPU outweighs any number of CPUs: GPUs are what fragmentation strands.
CPU_SLOTS = 4096
MAX_WEIGHT = 2**32 - 2  # Slurm's weight is a uint32; INFINITE is reserved


@dataclass(frozen=True)
class Fragmentation:
    """What a placement leaves for the next big job."""

    nodes: int
    idle_nodes: int  # nothing allocated: a whole-node job fits
    partly_used_nodes: int
    stranded_gpus: int  # free GPUs on partly used nodes: no whole-node job can use them

    def __str__(self) -> str:
        return (
            f"{self.idle_nodes} of {self.nodes} nodes idle, {self.partly_used_nodes} partly "
            f"used with {self.stranded_gpus} GPUs stranded on them"
        )


def packing_weights(nodes: Sequence[SlurmNode], partitions: Collection[str]) -> dict[str, int]:
    """The weight each node of `partitions` should have: lowest for the fullest."""
    packed = sorted((n for n in nodes if set(n.partitions) & set(partitions)), key=_name)
    stride = max(len(packed), 1)
    weights: dict[str, int] = {}
    for index, node in enumerate(packed):
        free = _free_gpus(node) * CPU_SLOTS + min(
            max(node.cpus - node.alloc_cpus, 0), CPU_SLOTS - 1
        )
        weights[node.name] = min(1 + free * stride + index, MAX_WEIGHT)
    return weights


def weight_changes(nodes: Sequence[SlurmNode], wanted: Mapping[str, int]) -> dict[str, int]:
    """Only the nodes whose weight differs from what Slurm has."""
    current = {n.name: n.weight for n in nodes}
    return {name: w for name, w in wanted.items() if current.get(name) != w}


def fragmentation(nodes: Sequence[SlurmNode]) -> Fragmentation:
    used = [n for n in nodes if n.alloc_cpus > 0 or gpus(n.gres_used) > 0]
    partly = [n for n in used if _free_gpus(n) > 0 or n.alloc_cpus < n.cpus]
    return Fragmentation(
        nodes=len(nodes),
        idle_nodes=len(nodes) - len(used),
        partly_used_nodes=len(partly),
        stranded_gpus=sum(_free_gpus(n) for n in partly),
    )


def _free_gpus(node: SlurmNode) -> int:
    return max(gpus(node.gres) - gpus(node.gres_used), 0)


def _name(node: SlurmNode) -> str:
    return node.name
