"""compute.topology in a compile and a plan: TopologyPlugin in slurm.conf, topology.conf in the
slurm.conf ConfigMap (where slurmctld reads it, beside slurm.conf), ExclusiveTopo on the
partitions named, and topology.conf shown in a plan like the other Slurm config files."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.topology_places import UNPLACED, TopologyInputs
from reconciler.errors import CompileError
from reconciler.plan.diff import desired_objects, plan_changes
from reconciler.plan.model import SLURM_CONFIG, Action
from reconciler.slurm_release import SlurmRelease
from tests.unit.conftest import config_from

RACK = "example.com/nvlink-domain"
VALUES = f"""
compute:
  partitions: |
    PartitionName=all Nodes=ALL Default=YES State=UP
    PartitionName=debug Nodes=ALL State=UP
  topology:
    plugin: block
    blockLabel: {RACK}
    blockSizes: [2]
    exclusivePartitions: [all]
  nodes:
    cpu: {{definitions: [cpu-epyc], replicas: 4}}
"""


def _state(
    values: str = VALUES, inputs: TopologyInputs | None = None, live: SlurmRelease | None = None
) -> DesiredState:
    return compile_desired_state(config_from(values), topology=inputs, live_release=live)


def _racks(*racks: str) -> TopologyInputs:
    """slurm-cpu-<i> on Node n<i>, labelled racks[i]."""
    labels = {f"n{i}": {RACK: rack} for i, rack in enumerate(racks)}
    return TopologyInputs(labels, {f"slurm-cpu-{i}": f"n{i}" for i in range(len(racks))})


def _conf_map(state: DesiredState) -> dict[str, Any]:
    return next(o for o in state.kube_objects if o["metadata"]["name"] == "slurm-slurm-conf")


def test_topology_conf_sits_beside_slurm_conf_which_names_the_plugin() -> None:
    state = _state(inputs=_racks("a", "b", "a", "b"))
    data = _conf_map(state)["data"]
    assert data["topology.conf"] == state.topology_files["topology.conf"]
    assert (
        "BlockName=a Nodes=slurm-cpu-[0,2]\nBlockName=b Nodes=slurm-cpu-[1,3]\n"
        in (state.topology_files["topology.conf"])
    )
    assert "\nTopologyPlugin=topology/block\n" in state.slurm_conf
    lines = [x for x in state.slurm_conf.splitlines() if x.startswith("PartitionName=")]
    assert lines == [
        "PartitionName=all Nodes=ALL Default=YES State=UP ExclusiveTopo=YES",
        "PartitionName=debug Nodes=ALL State=UP",
    ]


def test_without_topology_nothing_changes() -> None:
    state = _state(VALUES.split("  topology:")[0] + "  nodes:\n    cpu: {definitions: [cpu-epyc]}")
    assert not state.topology_files
    assert "topology.conf" not in _conf_map(state)["data"]
    assert "Topology" not in state.slurm_conf


def test_block_on_slurm_22_05_is_refused_naming_the_key_and_file() -> None:
    with pytest.raises(CompileError, match=r"plugin block needs Slurm 23\.11") as err:
        _state(inputs=TopologyInputs({}, {}), live=SlurmRelease(22, 5, 8))
    assert str(err.value.where) == "values.yaml:6 (compute.topology)"


def test_exclusive_partitions_must_name_a_partition() -> None:
    with pytest.raises(CompileError, match="names 'gpu', which is not a partition"):
        _state(VALUES.replace("exclusivePartitions: [all]", "exclusivePartitions: [gpu]"))


def test_a_label_change_is_a_topology_conf_update_in_the_plan() -> None:
    before = _state(inputs=_racks("a", "b", "a", "b"))
    after = _state(inputs=_racks("a", "a", "b", "b"))
    plan = plan_changes(after, desired_objects(before))
    configs = [c for c in plan.changes if c.ref.kind == SLURM_CONFIG]
    assert [(c.ref.name, c.action) for c in configs] == [("topology.conf", Action.UPDATE)]
    assert "BlockName=a Nodes=slurm-cpu-[0-1]" in configs[0].after
    assert plan.summary().reconfigure == 1 and not plan.controller_restart


def test_dropping_topology_deletes_topology_conf_and_unplaced_nodes_are_warned() -> None:
    state = _state(inputs=_racks("a", "a"))  # slurm-cpu-2 and -3: no Pod bound yet
    assert f"BlockName={UNPLACED} Nodes=slurm-cpu-[2-3]" in state.topology_files["topology.conf"]
    plain = _state(VALUES.split("  topology:")[0] + "  nodes:\n    cpu: {definitions: [cpu-epyc], "
                   "replicas: 4}")  # fmt: skip
    plan = plan_changes(plain, desired_objects(state))
    gone = [c for c in plan.changes if c.ref.name == "topology.conf"]
    assert [c.action for c in gone] == [Action.DELETE]
    offline = _state()
    assert any("no Kubernetes Nodes were read" in w.message for w in offline.warnings)
