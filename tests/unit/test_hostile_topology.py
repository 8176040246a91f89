"""Long lists in a config repo are checked in one pass, and compute.topology.topologies is
capped: 30,000 topologies (a few hundred KB of values) rendered for 22-35 s, each name counted
against every other, twice; a node definition's 30,000 features for 3 s the same way."""

from __future__ import annotations

import time

import pytest

from reconciler.compile.desired import compile_desired_state
from reconciler.compile.topology import render_topology_files
from reconciler.compile.topology_places import TopologyInputs
from reconciler.compile.topology_spec import topology_set
from reconciler.config.limits import MAX_TOPOLOGIES
from reconciler.config.values_file import check_values_file
from reconciler.config.yamlfile import parse_yaml
from reconciler.errors import CompileError, ConfigTypeError
from reconciler.slurm_release import SlurmRelease
from tests.unit.conftest import config_from

HOSTILE = 30_000
S25 = SlurmRelease(25, 11, 7)
RACK, LEAF, SPINE = "example.com/rack", "example.com/leaf", "example.com/spine"


def _values(count: int) -> str:
    entries = "".join(f"      - {{name: t{i}, plugin: flat}}\n" for i in range(count))
    return (
        "compute:\n  partitions: |\n    PartitionName=all Nodes=ALL Default=YES State=UP\n"
        "  topology:\n    topologies:\n" + entries
    )


def test_thirty_thousand_topologies_are_refused_at_once_naming_file_line_key_and_cap() -> None:
    """The docs' promise for every repo limit: refused in under 50 ms once the file is parsed."""
    doc = parse_yaml(_values(HOSTILE), "values.yaml")
    start = time.perf_counter()
    with pytest.raises(ConfigTypeError) as error:
        check_values_file(doc, [])
    assert time.perf_counter() - start < 0.05
    text = str(error.value)
    first_past = 6 + MAX_TOPOLOGIES  # line of the entry past the cap
    assert text.startswith(
        f"values.yaml:{first_past} (compute.topology.topologies[{MAX_TOPOLOGIES}]): "
        f"compute.topology.topologies lists 30,000 topologies; at most {MAX_TOPOLOGIES}"
    )
    assert "hint:" in text


def test_topologies_are_capped_once_the_files_are_merged() -> None:
    """Each file under the cap, together over it: refused at compile, naming the last file."""
    half = MAX_TOPOLOGIES // 2 + 1
    layer = "".join(f"      - {{name: u{i}, plugin: flat}}\n" for i in range(half))
    files = {"values.d/20-more.yaml": "compute:\n  topology:\n    topologies:\n" + layer}
    config = config_from(_values(half), files)
    with pytest.raises(CompileError) as error:
        compile_desired_state(config, live_release=S25)
    assert str(error.value).startswith(
        f"values.d/20-more.yaml:2 (compute.topology): compute.topology.topologies lists "
        f"{2 * half} topologies; at most {MAX_TOPOLOGIES}"
    )


def test_merged_topologies_are_checked_in_one_pass() -> None:
    """What the compile is handed is checked before anything walks the entries in pairs."""
    entries = [{"name": f"t{i}", "plugin": "flat"} for i in range(HOSTILE)]
    start = time.perf_counter()
    with pytest.raises(CompileError, match="lists 30,000 topologies"):
        topology_set({"compute": {"topology": {"topologies": entries}}})
    assert time.perf_counter() - start < 0.05


def test_a_name_twice_is_still_refused_at_the_cap() -> None:
    values = _values(MAX_TOPOLOGIES).replace("name: t15,", "name: t3,")
    with pytest.raises(ConfigTypeError, match=r"compute\.topology\.topologies names 't3' twice"):
        config_from(values)


def test_topologies_at_the_cap_render_in_the_time_the_docs_give() -> None:
    """docs/topology.md: 16 block or tree topologies over 1,000 Slurm nodes render in about
    0.1 s (linear in topologies times nodes)."""
    nodes = 1000
    names = [f"slurm-cpu-{i}" for i in range(nodes)]
    labels = {f"n{i}": {RACK: f"r{i // 18}", LEAF: f"l{i // 18}", SPINE: f"s{i // 360}"}
              for i in range(nodes)}  # fmt: skip
    inputs = TopologyInputs(labels, {name: f"n{i}" for i, name in enumerate(names)})
    entries = [
        {"name": f"b{i}", "plugin": "block", "blockLabel": RACK, "blockSizes": [2]}
        if i % 2 else {"name": f"t{i}", "plugin": "tree", "switchLabels": [LEAF, SPINE]}
        for i in range(MAX_TOPOLOGIES)
    ]  # fmt: skip
    start = time.perf_counter()
    topologies = topology_set({"compute": {"topology": {"topologies": entries}}})
    assert topologies is not None
    rendered = render_topology_files(topologies, names, inputs, yaml=True)
    assert time.perf_counter() - start < 0.5
    assert rendered.text.count("- topology: ") == MAX_TOPOLOGIES


def test_a_repo_at_the_cap_compiles() -> None:
    state = compile_desired_state(config_from(_values(MAX_TOPOLOGIES)), live_release=S25)
    assert state.topology_files["topology.yaml"].count("- topology: ") == MAX_TOPOLOGIES


def test_thirty_thousand_features_of_a_node_definition_compile_in_one_pass() -> None:
    """Each feature was looked up in the list of those before it: 3.2 s for 30,000."""
    features = ", ".join(f"f{i}" for i in range(HOSTILE))
    values = f"compute:\n  nodes:\n    cpu: {{definitions: [cpu-epyc], features: [{features}]}}\n"
    config = config_from(values)
    start = time.perf_counter()
    state = compile_desired_state(config)
    assert time.perf_counter() - start < 0.5
    features_out = state.slurm_nodes[0].features
    assert len(features_out) == HOSTILE + 2 and features_out[-2:] == ("f29998", "f29999")
