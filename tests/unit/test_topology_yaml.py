"""compute.topology on Slurm 25.05 and later: topology.yaml in the slurm.conf ConfigMap instead
of topology.conf, several named topologies (`topologies:`) chosen per partition with
`Topology=`, no TopologyPlugin in slurm.conf (topology.yaml names the plugins), and the errors
that name the key, the partition and the topology."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from reconciler.compile.desired import DesiredState, compile_desired_state, compile_shape
from reconciler.compile.topology_places import UNPLACED, TopologyInputs
from reconciler.errors import CompileError, ConfigTypeError
from reconciler.plan.diff import desired_objects, plan_changes
from reconciler.plan.model import SLURM_CONFIG, Action
from reconciler.slurm_release import SlurmRelease
from tests.unit.conftest import config_from

RACK, LEAF, SPINE = "example.com/rack", "example.com/leaf", "example.com/spine"
S24, S25, S26 = SlurmRelease(24, 11, 5), SlurmRelease(25, 11, 7), SlurmRelease(26, 5, 3)
SINGLE = f"""
compute:
  partitions: |
    PartitionName=all Nodes=ALL Default=YES State=UP
  topology: {{plugin: block, blockLabel: {RACK}, blockSizes: [2]}}
  nodes:
    cpu: {{definitions: [cpu-epyc], replicas: 4}}
"""
NAMED = f"""
compute:
  partitions: |
    PartitionName=all Nodes=ALL Default=YES State=UP
    PartitionName=train Nodes=ALL State=UP Topology=nvlink
    PartitionName=any Nodes=ALL State=UP Topology=none
  topology:
    topologies:
      - name: fabric
        plugin: tree
        switchLabels: [{LEAF}, {SPINE}]
        default: true
      - name: nvlink
        plugin: block
        blockLabel: {RACK}
        blockSizes: [2]
        exclusivePartitions: [train]
      - {{name: none, plugin: flat}}
  nodes:
    cpu: {{definitions: [cpu-epyc], replicas: 4}}
"""


def _inputs() -> TopologyInputs:
    """slurm-cpu-<i> on Node n<i>: racks a, b, a, b; leaves l0 (0, 1) and l1 (2, 3), one spine."""
    labels = {f"n{i}": {RACK: "ab"[i % 2], LEAF: f"l{i // 2}", SPINE: "s"} for i in range(4)}
    return TopologyInputs(labels, {f"slurm-cpu-{i}": f"n{i}" for i in range(4)})


def _state(values: str, live: SlurmRelease | None = S25, inputs: Any = "read") -> DesiredState:
    topology = _inputs() if inputs == "read" else inputs
    return compile_desired_state(config_from(values), topology=topology, live_release=live)


def _conf_map(state: DesiredState) -> dict[str, Any]:
    return next(o for o in state.kube_objects if o["metadata"]["name"] == "slurm-slurm-conf")


def test_the_single_shape_is_one_default_topology_in_topology_yaml_from_25_05() -> None:
    state = _state(SINGLE)
    data = _conf_map(state)["data"]
    assert "topology.conf" not in data and set(state.topology_files) == {"topology.yaml"}
    assert yaml.safe_load(data["topology.yaml"]) == [
        {
            "topology": "default",
            "cluster_default": True,
            "block": {
                "block_sizes": [2],
                "blocks": [
                    {"block": "a", "nodes": "slurm-cpu-[0,2]"},
                    {"block": "b", "nodes": "slurm-cpu-[1,3]"},
                ],
            },
        }
    ]
    assert data["topology.yaml"].startswith("# Rendered by reconciler")
    assert "TopologyPlugin" not in state.slurm_conf  # topology.yaml names the plugin
    older = _state(SINGLE, S24)
    assert set(older.topology_files) == {"topology.conf"}
    assert "\nTopologyPlugin=topology/block\n" in older.slurm_conf


def test_several_named_topologies_with_the_default_first_and_topology_per_partition() -> None:
    state = _state(NAMED)
    topologies = yaml.safe_load(state.topology_files["topology.yaml"])
    assert [(t["topology"], t["cluster_default"]) for t in topologies] == [
        ("fabric", True), ("nvlink", False), ("none", False)
    ]  # fmt: skip
    assert topologies[0]["tree"] == {"switches": [
        {"switch": "l0", "nodes": "slurm-cpu-[0-1]"},
        {"switch": "l1", "nodes": "slurm-cpu-[2-3]"},
        {"switch": "s", "children": "l[0-1]"},
    ]}  # fmt: skip
    assert topologies[1]["block"]["blocks"][0] == {"block": "a", "nodes": "slurm-cpu-[0,2]"}
    assert topologies[2] == {"topology": "none", "cluster_default": False, "flat": True}
    lines = [x for x in state.slurm_conf.splitlines() if x.startswith("PartitionName=")]
    assert lines == [
        "PartitionName=all Nodes=ALL Default=YES State=UP",
        "PartitionName=train Nodes=ALL State=UP Topology=nvlink ExclusiveTopo=YES",
        "PartitionName=any Nodes=ALL State=UP Topology=none",
    ]
    assert "TopologyPlugin" not in state.slurm_conf
    on_26 = _state(NAMED, S26).slurm_conf
    assert "PartitionName=train Nodes=ALL State=UP Topology=nvlink Exclusive=TOPO" in on_26


def test_offline_every_node_is_unplaced_with_a_warning() -> None:
    state = _state(SINGLE, inputs=None)
    blocks = yaml.safe_load(state.topology_files["topology.yaml"])[0]["block"]["blocks"]
    assert blocks == [{"block": UNPLACED, "nodes": "slurm-cpu-[0-3]"}]
    assert any("topology.yaml lists every Slurm node as unplaced" in w.message
               for w in state.warnings)  # fmt: skip


def test_a_block_topology_without_blocks_is_written_flat_with_a_note() -> None:
    values = SINGLE.replace("blockSizes: [2]", "blockSizes: [8]")
    state = _state(values)
    assert yaml.safe_load(state.topology_files["topology.yaml"])[0]["flat"] is True
    assert any("has no block yet" in w.message for w in state.warnings)


def test_an_upgrade_to_25_11_swaps_topology_conf_for_topology_yaml_in_the_plan() -> None:
    before = _state(SINGLE, S24)
    after = _state(SINGLE, S25)
    plan = plan_changes(after, desired_objects(before))
    configs = {c.ref.name: c.action for c in plan.changes if c.ref.kind == SLURM_CONFIG}
    assert configs == {"slurm.conf": Action.UPDATE, "topology.conf": Action.DELETE,
                       "topology.yaml": Action.CREATE}  # fmt: skip
    gone = _state(SINGLE.split("  topology:")[0] + "  nodes:\n    cpu: {definitions: [cpu-epyc], "
                  "replicas: 4}", S25)  # fmt: skip
    plan = plan_changes(gone, desired_objects(after))
    # slurm.conf named no TopologyPlugin on 25.11: only the file goes.
    assert [(c.ref.name, c.action) for c in plan.changes if c.ref.kind == SLURM_CONFIG] == [
        ("topology.yaml", Action.DELETE)
    ]


def test_named_topologies_before_25_05_are_refused_naming_the_key_and_the_fix() -> None:
    with pytest.raises(CompileError, match=r"compute.topology.topologies needs Slurm 25.05 or "
                       r"later \(topology.yaml\); this render targets Slurm 24.11.5 \(our "
                       r"image's release; set slurmConfig.release for another\)"):  # fmt: skip
        _state(NAMED.replace("Topology=nvlink", "").replace("Topology=none", ""), None)
    with pytest.raises(CompileError, match=r"partition 'all' sets Topology=default, which "
                       r"needs Slurm 25.05"):  # fmt: skip
        _state(SINGLE.replace("State=UP\n", "State=UP Topology=default\n"), S24)


def test_a_partition_naming_an_unknown_topology_names_both() -> None:
    with pytest.raises(CompileError, match=r"partition 'train' names topology 'nvlnk' "
                       r"\(Topology=\), which compute.topology.topologies does not define "
                       r"\(defined: fabric, nvlink, none\)") as error:  # fmt: skip
        _state(NAMED.replace("Topology=nvlink", "Topology=nvlnk"))
    assert str(error.value.where) == "values.yaml:3 (compute.partitions)"
    with pytest.raises(CompileError, match=r"\(defined: none\)"):
        _state("compute:\n  partitions: PartitionName=p Nodes=ALL Topology=x\n")


def test_exclusive_partitions_must_use_their_topology() -> None:
    values = NAMED.replace("Topology=nvlink", "")
    with pytest.raises(CompileError, match=r"topology 'nvlink' lists partition 'train' in "
                       r"exclusivePartitions, but that partition uses "
                       r"topology 'fabric'"):  # fmt: skip
        _state(values)


@pytest.mark.parametrize(
    ("change", "why", "where"),
    [
        (
            (
                "      - {name: none, plugin: flat}",
                "      - {name: none, plugin: flat}\n    plugin: tree",
            ),
            r"compute.topology.plugin is set beside "
            r"compute.topology.topologies",
            "values.yaml:19 (compute.topology.plugin)",
        ),
        (
            ("name: nvlink", "name: fabric"),
            r"names 'fabric' twice",
            "values.yaml:8 (compute.topology.topologies)",
        ),
        (
            ("name: nvlink", "name: 'nv link'"),
            r"topologies\[1\].name must name the topology",
            "values.yaml:13 (compute.topology.topologies[1].name)",
        ),
        (
            ("plugin: flat}", "plugin: flat, blockLable: x}"),
            r"topologies\[2\].blockLable is not a key of a topology",
            "values.yaml:18 (compute.topology.topologies[2].blockLable)",
        ),
        (
            ("plugin: flat}", "plugin: torus}"),
            r"topologies\[2\].plugin must be one of block, "
            r"tree, flat",
            "values.yaml:18 (compute.topology.topologies[2].plugin)",
        ),
        (
            ("blockSizes: [2]", "blockSizes: [2, 3]"),
            r"topologies\[1\].blockSizes\[1\] = 3",
            "values.yaml:16 (compute.topology.topologies[1].blockSizes[1])",
        ),
    ],
)
def test_each_file_is_checked_where_it_writes_the_key(
    change: tuple[str, str], why: str, where: str
) -> None:
    assert change[0] in NAMED
    with pytest.raises(ConfigTypeError, match=why) as error:
        config_from(NAMED.replace(*change))
    assert str(error.value.where) == where


def test_mixing_the_shapes_across_files_is_refused_at_the_merge() -> None:
    layer = {"values.d/10-topo.yaml": "compute:\n  topology:\n    plugin: block\n"}
    with pytest.raises(CompileError, match=r"compute.topology.plugin is set beside "
                       r"compute.topology.topologies") as error:  # fmt: skip
        compile_desired_state(config_from(NAMED, layer), live_release=S25)
    assert "move plugin into the topology" in str(error.value)


def test_merge_only_errors_name_the_entry() -> None:
    values = NAMED.replace("        blockLabel: example.com/rack\n", "")
    with pytest.raises(CompileError, match=r"compute.topology.topologies\[1\].plugin block "
                       r"needs compute.topology.topologies\[1\].blockLabel"):  # fmt: skip
        _state(values)
    two = NAMED.replace("exclusivePartitions: [train]", "default: true")
    with pytest.raises(CompileError, match=r"'fabric' and 'nvlink' are both default: true"):
        _state(two)


def test_the_shape_compile_before_the_release_is_known_refuses_nothing_a_release_decides() -> None:
    """plan compiles once for the declared nodes before it asks the target which Slurm runs:
    a repo with topologies and no slurmConfig.release must get that far."""
    shape = compile_shape(config_from(NAMED))
    assert [n.name for n in shape.slurm_nodes] == [f"slurm-cpu-{i}" for i in range(4)]
