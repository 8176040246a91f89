"""Bad input gets a typed error naming the file, line, key or object, and the fix."""

from __future__ import annotations

import pytest

from reconciler.compile.desired import compile_desired_state
from reconciler.compile.nodesets import compose_all
from reconciler.errors import (
    CompileError,
    ConfigSyntaxError,
    ConfigTypeError,
    LayerCycleError,
    ReconcilerError,
    UnknownLayerError,
)
from tests.unit.conftest import config_from


def test_invalid_yaml_names_file_and_line() -> None:
    with pytest.raises(ConfigSyntaxError) as err:
        config_from("compute:\n  nodes:\n    a: [1, 2\n    b: 3\n")
    assert str(err.value).startswith("values.yaml:4: invalid YAML")


def test_invalid_yaml_in_values_d_names_that_file() -> None:
    with pytest.raises(ConfigSyntaxError) as err:
        config_from("compute: {}\n", {"values.d/20-x.yaml": "a:\n\tb: 1\n"})
    assert "values.d/20-x.yaml:2" in str(err.value)


def test_duplicate_key_is_an_error() -> None:
    with pytest.raises(ConfigSyntaxError, match=r"values.yaml:3 .*duplicate key 'killWait'"):
        config_from("slurmConfig:\n  killWait: 30\n  killWait: 60\n")


def test_unknown_layer_names_definition_layer_and_close_names() -> None:
    config = config_from(
        """
        compute:
          nodes:
            trainers:
              definitions: [h100, cu12O, las1]
        """
    )
    with pytest.raises(UnknownLayerError) as err:
        compose_all(config)
    text = str(err.value)
    assert "node definition 'trainers' uses unknown layer 'cu12O'" in text
    assert "values.yaml:4" in text
    assert "did you mean 'cu120'" in text


def test_layer_cycle_prints_the_cycle() -> None:
    config = config_from(
        """
        compute:
          nodes:
            a: {definitions: [b]}
            b: {definitions: [c]}
            c: {definitions: [a]}
        """
    )
    with pytest.raises(LayerCycleError) as err:
        compose_all(config)
    assert "layer cycle: a -> b -> c -> a" in str(err.value)


def test_self_reference_is_a_cycle() -> None:
    config = config_from("compute:\n  nodes:\n    a: {definitions: [rtx4000, a]}\n")
    with pytest.raises(LayerCycleError, match="a -> a"):
        compose_all(config)


@pytest.mark.parametrize(
    ("values", "where", "message"),
    [
        (
            "compute:\n  nodes:\n    x:\n      replicas: two\n",
            "values.yaml:4",
            "compute.nodes.x.replicas must be a integer, got string 'two'",
        ),
        (
            "compute:\n  nodes:\n    x:\n      features: gpu\n",
            "values.yaml:4",
            "compute.nodes.x.features must be a list of strings",
        ),
        (
            "compute:\n  nodes:\n    x:\n      image: {tag: 22.05}\n",
            "values.yaml:4",
            "compute.nodes.x.image.tag must be a string, got number 22.05",
        ),
        (
            "slurmConfig:\n  killWait: '30s'\n",
            "values.yaml:2",
            "slurmConfig.killWait must be a integer",
        ),
        (
            "compute:\n  partitions:\n    - all\n",
            "values.yaml:2",
            "compute.partitions must be a string",
        ),
    ],
)
def test_wrong_type_names_key_path_and_expected_type(values: str, where: str, message: str) -> None:
    with pytest.raises(ConfigTypeError) as err:
        config_from(values)
    assert str(err.value).startswith(where)
    assert message in str(err.value)


def test_unquoted_number_hint() -> None:
    with pytest.raises(ConfigTypeError) as err:
        config_from("compute:\n  nodes:\n    x:\n      image: {tag: 22.05}\n")
    assert 'quote it: "22.05"' in str(err.value)


def test_wrong_type_in_compute_defs_names_that_file() -> None:
    with pytest.raises(ConfigTypeError) as err:
        config_from("compute: {}\n", {"compute-defs/site.yaml": "site:\n  gresGpu: [a]\n"})
    assert str(err.value).startswith("compute-defs/site.yaml:2")


def test_invalid_slurm_name_suggests_a_valid_one() -> None:
    with pytest.raises(CompileError) as err:
        compile_desired_state(
            config_from("compute:\n  nodes:\n    GPU_small:\n      definitions: [rtx4000]\n")
        )
    text = str(err.value)
    assert "'GPU_small' cannot name Slurm nodes or Pods" in text and "'gpu-small'" in text
    assert "values.yaml:3" in text


def test_overlong_statefulset_name() -> None:
    name = "n" * 50
    with pytest.raises(CompileError, match="Kubernetes allows 52"):
        compile_desired_state(
            config_from(f"compute:\n  nodes:\n    {name}:\n      definitions: [rtx4000]\n")
        )


def test_zero_cpus() -> None:
    values = """
    compute:
      nodes:
        tiny:
          definitions: [las1]
          resources: {requests: {cpu: 500m, memory: 1Gi}}
    """
    with pytest.raises(CompileError) as err:
        compile_desired_state(config_from(values))
    assert "'tiny' has zero CPUs (resources.requests.cpu='500m')" in str(err.value)


def test_memory_that_is_no_quantity_names_the_field() -> None:
    values = """
    compute:
      nodes:
        big:
          definitions: [las1]
          resources: {requests: {cpu: 4, memory: 16 Gi}}
    """
    with pytest.raises(CompileError) as err:
        compile_desired_state(config_from(values))
    assert (
        "node definition 'big': resources.requests.memory: '16 Gi' is not a quantity (examples: "
    ) in str(err.value)


def test_memory_with_spaces_around_is_read_as_the_api_server_reads_it() -> None:
    # kubectl and server-side apply pass the string to Quantity.UnmarshalJSON, which trims it.
    values = """
    compute:
      nodes:
        big:
          definitions: [las1]
          resources: {requests: {cpu: 4, memory: " 16Gi "}}
    """
    assert "RealMemory=16384" in compile_desired_state(config_from(values)).slurm_conf


def test_no_cpus_at_all() -> None:
    values = "compute:\n  nodes:\n    bare:\n      definitions: [las1]\n"
    with pytest.raises(CompileError, match=r"'bare' has zero CPUs: no resources\.limits\.cpu"):
        compile_desired_state(config_from(values))


def test_disabled_definitions_are_not_checked_for_nodes() -> None:
    values = "compute:\n  nodes:\n    later:\n      enabled: false\n      definitions: [las1]\n"
    state = compile_desired_state(config_from(values))
    assert state.slurm_nodes == () and [n.name for n in state.nodesets] == ["later"]


def test_partition_naming_a_disabled_definition_keeps_an_empty_node_set() -> None:
    values = """
    compute:
      partitions: PartitionName=gpu Nodes=big State=UP
      nodes:
        big: {enabled: false, definitions: [h100]}
    """
    state = compile_desired_state(config_from(values))
    assert "NodeSet=big Feature=big" in state.slurm_conf.splitlines()
    assert [str(w) for w in state.warnings] == [
        "values.yaml:3 (compute.partitions): warning: partition 'gpu' names disabled node "
        "definition 'big': it contributes no nodes until enabled",
        "values.yaml:5 (compute.nodes.big): warning: node definition 'big' makes no nodes: it "
        "sets `enabled: false` (values.yaml:5); set `enabled: true` in 'big' to make its nodes",
    ]


def test_partition_naming_an_unknown_definition() -> None:
    values = """
    compute:
      partitions: PartitionName=gpu Nodes=bgi State=UP
      nodes:
        big: {definitions: [h100]}
    """
    with pytest.raises(CompileError, match="not a node definition") as err:
        compile_desired_state(config_from(values))
    assert str(err.value).startswith("values.yaml:3") and "(big)" in str(err.value)


def test_bad_gres() -> None:
    values = (
        "compute:\n  nodes:\n    g:\n      definitions: [rtx4000]\n      gresGpu: 'h100:eight'\n"
    )
    with pytest.raises(CompileError, match="gresGpu 'h100:eight' is not TYPE:COUNT"):
        compile_desired_state(config_from(values))


def test_missing_values_yaml() -> None:
    from reconciler.config.files import read_library
    from reconciler.config.repo import load_config

    with pytest.raises(ReconcilerError, match=r"no values\.yaml"):
        load_config({}, read_library())


def test_unknown_definition_key_warns_with_suggestion() -> None:
    config = config_from("compute:\n  nodes:\n    x:\n      replica: 2\n")
    assert [str(w) for w in config.warnings] == [
        "values.yaml:4 (compute.nodes.x.replica): warning: unknown node definition key "
        "'replica' is ignored; did you mean 'replicas'?"
    ]


def test_a_node_definition_named_off_is_refused_not_a_crash() -> None:
    with pytest.raises(ConfigTypeError) as err:
        config_from("compute:\n  nodes:\n    off:\n      enabled: false\n")
    assert str(err.value).startswith("values.yaml:2 (compute.nodes[False]): node definition")
    assert "quote the name" in str(err.value)


def test_an_impossible_unquoted_date_is_an_error_not_a_traceback() -> None:
    with pytest.raises(ConfigSyntaxError) as err:
        config_from("compute: {}\n", {"values.d/20-x.yaml": "when: 2030-13-01T08:00:00Z\n"})
    assert str(err.value).startswith("values.d/20-x.yaml: invalid YAML value: month must be")


def test_an_unknown_gang_failure_policy_names_the_file_line_and_choices() -> None:
    with pytest.raises(ConfigTypeError) as err:
        config_from("scheduler:\n  gangFailurePolicy: retry\n")
    text = str(err.value)
    assert "values.yaml:2" in text
    assert "scheduler.gangFailurePolicy must be one of restart, keep-going, got 'retry'" in text
