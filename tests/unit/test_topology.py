"""compute.topology -> topology.conf (pure): blocks and switches from Node labels, the rules that
keep slurmctld from stopping on it (a block never smaller than the base size, no node left out
while it can have a place), and the checks that name the file, line and key."""

from __future__ import annotations

import re
from collections.abc import Mapping

import hostlist
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.compile.desired import compile_desired_state
from reconciler.compile.topology import render_topology
from reconciler.compile.topology_places import UNPLACED, TopologyInputs
from reconciler.compile.topology_spec import TopologySpec, check_release
from reconciler.errors import CompileError, ConfigTypeError
from tests.unit.conftest import config_from

RACK = "example.com/nvlink-domain"
LEAF, SPINE = "example.com/leaf", "example.com/spine"
BLOCK = TopologySpec(plugin="block", block_label=RACK, block_sizes=(2,))
NODES = [f"slurm-gpu-{i}" for i in range(6)]


def _inputs(racks: Mapping[str, str | None], **kw: object) -> TopologyInputs:
    """Slurm node -> the rack label of the Node it runs on (one Node each; None: no label)."""
    labels = {f"k8s-{n}": ({RACK: v} if v is not None else {}) for n, v in racks.items()}
    return TopologyInputs(labels, {n: f"k8s-{n}" for n in racks}, **kw)  # type: ignore[arg-type]


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#")]


def _parsed(text: str) -> dict[str, dict[str, list[str]]]:
    """BlockName/SwitchName -> {"Nodes": [...], "Switches": [...]}, as Slurm expands them."""
    out: dict[str, dict[str, list[str]]] = {}
    for line in _lines(text):
        key, _, rest = line.partition(" ")
        if not key.startswith(("BlockName=", "SwitchName=")):
            continue
        fields = dict(token.split("=", 1) for token in rest.split())
        out[key.split("=", 1)[1]] = {k: hostlist.expand_hostlist(v) for k, v in fields.items()}
    return out


def test_one_block_per_label_value_and_unplaced_nodes_in_their_own_block() -> None:
    racks = {"slurm-gpu-0": "rack-a", "slurm-gpu-2": "rack-a", "slurm-gpu-1": "rack-b",
             "slurm-gpu-3": "rack-b", "slurm-gpu-4": None}  # fmt: skip
    rendered = render_topology(BLOCK, NODES, _inputs(racks))
    assert _lines(rendered.text) == [
        "BlockName=rack-a Nodes=slurm-gpu-[0,2]",
        "BlockName=rack-b Nodes=slurm-gpu-[1,3]",
        f"BlockName={UNPLACED} Nodes=slurm-gpu-[4-5]",  # no label; no Pod bound
        "BlockSizes=2",
    ]
    assert rendered.notes == ()


def test_a_block_smaller_than_the_base_size_is_never_written() -> None:
    """slurmctld 24.11.5 stops on one: "Block configuration (b2) children count lower than
    bblock_node_cnt"."""
    racks = {"slurm-gpu-0": "rack-a", "slurm-gpu-1": "rack-a", "slurm-gpu-2": "rack-b"}
    spec = TopologySpec(plugin="block", block_label=RACK, block_sizes=(2, 4))
    rendered = render_topology(spec, NODES[:4], _inputs(racks))
    assert _parsed(rendered.text) == {
        "rack-a": {"Nodes": ["slurm-gpu-0", "slurm-gpu-1"]},
        UNPLACED: {"Nodes": ["slurm-gpu-2", "slurm-gpu-3"]},
    }
    assert "block rack-b has 1 node(s), fewer than blockSizes[0] = 2" in rendered.notes[0]
    # Too few to fill even the unplaced block: left out, and said so.
    rendered = render_topology(spec, NODES[:3], _inputs(racks))
    assert set(_parsed(rendered.text)) == {"rack-a"}
    assert "slurm-gpu-2 left out of topology.conf" in rendered.notes[-1]


def test_without_block_sizes_the_smallest_block_is_the_base_with_slurms_levels() -> None:
    spec = TopologySpec(plugin="block", block_label=RACK)
    racks = {n: ("rack-a" if i < 3 else "rack-b") for i, n in enumerate(NODES)}
    racks["slurm-gpu-5"] = None
    text = render_topology(spec, NODES, _inputs(racks)).text
    assert _lines(text)[-1] == "BlockSizes=1,2,4,8"  # the unplaced block holds one node


def test_no_node_placed_yet_makes_one_unplaced_block_and_says_why() -> None:
    rendered = render_topology(BLOCK, NODES, None)
    assert _lines(rendered.text) == [f"BlockName={UNPLACED} Nodes=slurm-gpu-[0-5]",
                                     "BlockSizes=2"]  # fmt: skip
    assert "no Kubernetes Nodes were read" in rendered.notes[0]
    empty = render_topology(BLOCK, [], None)
    assert _lines(empty.text) == []  # slurmctld reads a file without blocks as no topology


def test_a_label_value_slurm_could_misread_is_no_place() -> None:
    racks = {"slurm-gpu-0": "a b", "slurm-gpu-1": "x=y", "slurm-gpu-2": ""}
    text = render_topology(BLOCK, NODES[:3], _inputs(racks)).text
    assert _lines(text) == [f"BlockName={UNPLACED} Nodes=slurm-gpu-[0-2]", "BlockSizes=2"]


def test_tree_switches_from_leaf_and_spine_labels() -> None:
    spec = TopologySpec(plugin="tree", switch_labels=(LEAF, SPINE))
    places = {"slurm-gpu-0": ("l1", "s1"), "slurm-gpu-1": ("l1", "s1"),
              "slurm-gpu-2": ("l2", "s1"), "slurm-gpu-3": ("l3", "s2")}  # fmt: skip
    labels = {f"k{n}": {LEAF: leaf, SPINE: spine} for n, (leaf, spine) in places.items()}
    inputs = TopologyInputs(labels, {n: f"k{n}" for n in places})
    assert _lines(render_topology(spec, NODES[:5], inputs).text) == [
        "SwitchName=l1 Nodes=slurm-gpu-[0-1]",
        "SwitchName=l2 Nodes=slurm-gpu-2",
        "SwitchName=l3 Nodes=slurm-gpu-3",
        "SwitchName=s1 Switches=l[1-2]",
        "SwitchName=s2 Switches=l3",
        f"SwitchName={UNPLACED} Nodes=slurm-gpu-4",  # Slurm runs no job on a node left out
    ]


def test_a_leaf_value_repeated_under_two_spines_names_two_switches() -> None:
    spec = TopologySpec(plugin="tree", switch_labels=(LEAF, SPINE))
    labels = {"a": {LEAF: "1", SPINE: "s1"}, "b": {LEAF: "1", SPINE: "s2"}}
    inputs = TopologyInputs(labels, {"slurm-gpu-0": "a", "slurm-gpu-1": "b"})
    switches = _parsed(render_topology(spec, NODES[:2], inputs).text)
    leaves = sorted(n for n, switch in switches.items() if "Nodes" in switch)
    assert len(leaves) == 2 and all(re.fullmatch(r"1\.[0-9a-f]{8}", n) for n in leaves)
    assert {tuple(switches[n]["Nodes"]) for n in leaves} == {("slurm-gpu-0",), ("slurm-gpu-1",)}
    assert switches["s1"]["Switches"] != switches["s2"]["Switches"]


def test_block_needs_slurm_23_11_and_exclusive_topo_24_05() -> None:
    with pytest.raises(CompileError, match=r"compute.topology.plugin block needs Slurm 23.11 "
                       r"or later \(topology/block\); this render targets "
                       r"Slurm 22.05"):  # fmt: skip
        check_release(BLOCK, (22, 5), None)
    check_release(BLOCK, (23, 11), None)
    exclusive = TopologySpec(plugin="block", block_label=RACK, exclusive_partitions=("all",))
    with pytest.raises(CompileError, match=r"exclusivePartitions needs Slurm 24\.05"):
        check_release(exclusive, (23, 11), None)
    check_release(exclusive, (24, 11), None)
    check_release(TopologySpec(plugin="tree", switch_labels=(LEAF,)), (22, 5), None)


# ---- properties ----------------------------------------------------------------------------

_value = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,6}[a-z0-9])?", fullmatch=True)
_node = st.builds(lambda d, i: f"slurm-{d}-{i}", st.sampled_from(["gpu", "cpu2", "a"]),
                  st.integers(0, 40))  # fmt: skip


@given(
    st.dictionaries(_node, st.one_of(st.none(), _value), max_size=30),
    st.lists(_node, max_size=10),
    st.sampled_from([(), (1,), (2,), (3, 6), (2, 8, 16)]),
)
def test_blocks_partition_the_nodes_and_none_is_below_the_base(
    racks: dict[str, str | None], spares: list[str], sizes: tuple[int, ...]
) -> None:
    spec = TopologySpec(plugin="block", block_label=RACK, block_sizes=sizes)
    nodes = sorted({*racks, *spares})
    rendered = render_topology(spec, nodes, _inputs(racks))
    blocks = _parsed(rendered.text)
    listed = [n for b in blocks.values() for n in b["Nodes"]]
    assert len(listed) == len(set(listed))  # no node in two blocks
    assert set(listed) <= set(nodes)
    left_out = set(nodes) - set(listed)
    assert not left_out or any("left out" in note for note in rendered.notes)
    sizes_line = [x for x in _lines(rendered.text) if x.startswith("BlockSizes=")]
    if blocks:
        base = int(sizes_line[0].split("=")[1].split(",")[0])
        assert all(len(b["Nodes"]) >= base for b in blocks.values())
    for name, block in blocks.items():  # a node's block is its label's, or unplaced
        assert name == UNPLACED or all(racks.get(n) == name for n in block["Nodes"])


@given(st.dictionaries(_node, st.tuples(_value, _value, _value), max_size=25))
def test_every_tree_node_hangs_under_exactly_one_top_switch(
    places: dict[str, tuple[str, str, str]],
) -> None:
    labels = ("l0", "l1", "l2")
    spec = TopologySpec(plugin="tree", switch_labels=labels)
    node_labels = {f"k-{n}": dict(zip(labels, p, strict=True)) for n, p in places.items()}
    inputs = TopologyInputs(node_labels, {n: f"k-{n}" for n in places})
    switches = _parsed(render_topology(spec, sorted(places), inputs).text)
    assert all(len(name) <= 64 for name in switches)
    children = [c for s in switches.values() for c in s.get("Switches", [])]
    assert len(children) == len(set(children)) and set(children) <= set(switches)

    def under(name: str) -> list[str]:
        s = switches[name]
        return s.get("Nodes", []) + [n for c in s.get("Switches", []) for n in under(c)]

    tops = [name for name in switches if name not in children]
    reached = [n for top in tops for n in under(top)]
    assert sorted(reached) == sorted(places)
    for node, place in places.items():  # nodes share a top switch exactly when they share l2
        top = next(t for t in tops if node in under(t))
        assert {n for n in under(top)} == {m for m, p in places.items() if p[2] == place[2]}


# ---- values checks -------------------------------------------------------------------------


def _topology(body: str) -> str:
    return "compute:\n  topology:\n" + "".join(f"    {line}\n" for line in body.splitlines())


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ("plugin: torus", 3, "compute.topology.plugin must be one of block, tree, got 'torus'"),
        ("plugin: block\nblockLabel: 'a b'", 4, "'a b' is not a Kubernetes label key"),
        ("plugin: block\nblockLabel: x\nblockSizes: [2, 6]", 5, r"blockSizes\[1\] = 6"),
        ("plugin: block\nblockLabel: x\nblockSizes: [0]", 5, r"blockSizes\[0\] must be an int"),
        ("plugin: tree\nswitchLabels: []", 4, "switchLabels is empty"),
        ("plugin: tree\nswitchLabels: [a, a]", 4, "names a label twice"),
        ("plugin: tree\nswitchLabels: a", 4, "switchLabels must be a list of strings"),
    ],
)
def test_a_bad_value_names_its_file_line_and_key(body: str, line: int, message: str) -> None:
    with pytest.raises(ConfigTypeError, match=message) as err:
        config_from(_topology(body))
    assert err.value.where is not None and err.value.where.line == line


def test_what_only_the_merge_shows_names_the_last_file_that_set_topology() -> None:
    later = {"values.d/20-t.yaml": "compute:\n  topology:\n    blockSizes: [2]\n"}
    config = config_from("compute:\n  topology: {plugin: block}\n", later)
    with pytest.raises(CompileError, match=r"block needs compute\.topology\.blockLabel") as e:
        compile_desired_state(config)
    assert str(e.value.where) == "values.d/20-t.yaml:2 (compute.topology)"
    config = config_from(_topology("plugin: tree\nswitchLabels: [a]\nblockSizes: [2]"))
    with pytest.raises(CompileError, match="blockSizes is not read with plugin tree"):
        compile_desired_state(config)
