"""Bin-packing weights and the fragmentation figure, over plain SlurmNode values."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.adapters.slurm.model import SlurmNode
from reconciler.scheduler.decide.packing_decide import (
    fragmentation,
    gpus,
    packing_weights,
    weight_changes,
)


def node(name: str, *, gpus_used: int = 0, cpus_used: int = 0, **fields: Any) -> SlurmNode:
    values: dict[str, Any] = {
        "name": name, "state": "IDLE", "flags": frozenset(), "reason": "",
        "reason_set_by": None, "reason_changed_at": None, "cpus": 4, "alloc_cpus": cpus_used,
        "real_memory": 8192, "alloc_memory": 0, "gres": "gpu:quadro_rtx_4000:4",
        "gres_used": f"gpu:quadro_rtx_4000:{gpus_used}(IDX:N/A)", "features": (),
        "active_features": (), "partitions": ("all",), "address": "", "hostname": "",
        "weight": 1,
    }  # fmt: skip
    values.update(fields)
    return SlurmNode(**values)


@pytest.mark.parametrize(
    ("gres", "count"),
    [("gpu:4", 4), ("gpu:quadro_rtx_4000:4", 4), ("gpu:h100:8(IDX:0-7)", 8),
     ("gpu:a:2,gpu:b:1", 3), ("", 0), ("gpu:quadro_rtx_4000:0(IDX:N/A)", 0)],
)  # fmt: skip
def test_gpus_are_read_from_every_gres_spelling(gres: str, count: int) -> None:
    assert gpus(gres) == count


def test_the_fullest_node_gets_the_lowest_weight() -> None:
    nodes = [node("n0"), node("n1", gpus_used=3, cpus_used=3), node("n2", gpus_used=1)]
    weights = packing_weights(nodes, {"all"})
    assert sorted(weights, key=weights.__getitem__) == ["n1", "n2", "n0"]


def test_idle_nodes_get_distinct_weights_in_name_order() -> None:
    """A burst submitted before any weight changes still fills one node after another."""
    weights = packing_weights([node(f"n{i}") for i in (3, 1, 0, 2)], {"all"})
    assert sorted(weights, key=weights.__getitem__) == ["n0", "n1", "n2", "n3"]
    assert len(set(weights.values())) == 4


def test_a_gpu_outweighs_any_number_of_cpus() -> None:
    cpu_full = node("a", cpus_used=4, cpus=4)
    one_gpu_used = node("b", gpus_used=1, cpus=256)
    weights = packing_weights([cpu_full, one_gpu_used], {"all"})
    assert weights["b"] < weights["a"]


def test_only_nodes_of_the_packed_partitions_are_weighted() -> None:
    nodes = [node("n0"), node("c0", partitions=("cpu",))]
    assert set(packing_weights(nodes, {"all"})) == {"n0"}


def test_only_changed_weights_are_set() -> None:
    nodes = [node("n0", weight=5), node("n1", weight=1)]
    assert weight_changes(nodes, {"n0": 5, "n1": 7}) == {"n1": 7}


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=30))
def test_weights_are_valid_distinct_and_ordered_by_free_resources(
    used: list[tuple[int, int]],
) -> None:
    nodes = [node(f"n{i:02d}", gpus_used=g, cpus_used=c) for i, (g, c) in enumerate(used)]
    weights = packing_weights(nodes, {"all"})
    assert len(set(weights.values())) == len(nodes)
    assert all(1 <= w < 2**32 - 1 for w in weights.values())
    for a in nodes:
        for b in nodes:
            if (4 - gpus(a.gres_used), 4 - a.alloc_cpus) < (
                4 - gpus(b.gres_used),
                4 - b.alloc_cpus,
            ):
                assert weights[a.name] < weights[b.name]


def test_fragmentation_counts_idle_nodes_and_stranded_gpus() -> None:
    spread = [node(f"n{i}", gpus_used=2, cpus_used=2) for i in range(4)]
    packed = [node("n0", gpus_used=4, cpus_used=4), node("n1", gpus_used=4, cpus_used=4),
              node("n2"), node("n3")]  # fmt: skip
    assert str(fragmentation(spread)) == (
        "0 of 4 nodes idle, 4 partly used with 8 GPUs stranded on them"
    )
    figure = fragmentation(packed)
    assert (figure.idle_nodes, figure.partly_used_nodes, figure.stranded_gpus) == (2, 0, 0)
