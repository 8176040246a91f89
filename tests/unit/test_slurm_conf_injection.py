"""No value from git can add a line (or a key) to what we render for Slurm.

`taskPlugin: "task/none\\nSlurmUser=nobody"` rendered a second slurm.conf line that made
slurmctld run as nobody. Every value that reaches slurm.conf, gres.conf, slurmdbd.conf or a
partition line is one word without control characters, checked where it is written (file and
line in the error); patterns are matched whole (`fullmatch`: `$` also matches before a final
newline).
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import cli
from reconciler.compile.desired import compile_desired_state
from reconciler.compile.profile import CLUSTER_SITE, Profile
from reconciler.compile.slurm_conf import parse_partitions
from reconciler.errors import CompileError, ConfigTypeError, ReconcilerError
from tests.unit.conftest import config_from

NODES = """
compute:
  nodes:
    gpu:
      definitions: [rtx4000, cu117, las1]
      replicas: 1
"""
BASELINE = compile_desired_state(config_from(NODES))


def _keys_of(conf: str) -> list[str]:
    """Every KEY of every KEY=VALUE token, line by line, as Slurm's parser sees them (it reads
    several on one line, split at whitespace); comments skipped."""
    return [
        token.split("=", 1)[0]
        for line in conf.split("\n")
        for token in line.split("#", 1)[0].split()
        if "=" in token
    ]


def test_a_newline_in_task_plugin_is_refused_naming_file_and_line() -> None:
    values = 'slurmConfig:\n  slurmCtld:\n    taskPlugin: "task/none\\nSlurmUser=nobody"\n'
    with pytest.raises(ConfigTypeError) as err:
        config_from(values + NODES)
    text = str(err.value)
    assert text.startswith("values.yaml:3 (slurmConfig.slurmCtld.taskPlugin): ")
    assert "hint:" in text


def test_render_refuses_the_injection_repo_in_under_a_second(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = 'slurmConfig:\n  slurmCtld:\n    taskPlugin: "task/none\\nSlurmUser=nobody"\n'
    (tmp_path / "values.yaml").write_text("compute: {nodes: {}}\n" + values)
    cli.build_parser()  # imports every command module once: not part of the refusal
    start = time.perf_counter()
    code = cli.main(["render", str(tmp_path)])
    assert code == 1 and time.perf_counter() - start < 1.0
    err = capsys.readouterr().err
    assert err.startswith("error: values.yaml:4 (slurmConfig.slurmCtld.taskPlugin)")


# Each case: values (YAML, merged over NODES unless it has its own compute:), where the error
# points. Values are written as YAML double-quoted strings so the escapes are YAML's.
CASES = {
    "procTrackType newline": (
        'slurmConfig: {slurmCtld: {procTrackType: "proctrack/linuxproc\\nSlurmUser=nobody"}}',
        "values.yaml:1 (slurmConfig.slurmCtld.procTrackType)",
    ),
    "prockTrackType tab": (
        'slurmConfig: {slurmCtld: {prockTrackType: "proctrack/linuxproc\\tSlurmUser=nobody"}}',
        "values.yaml:1 (slurmConfig.slurmCtld.prockTrackType)",
    ),
    "selectTypeParameters space": (
        'slurmConfig: {selectTypeParameters: "CR_Core SlurmUser=nobody"}',
        "values.yaml:1 (slurmConfig.selectTypeParameters)",
    ),
    "suspendTime carriage return": (
        'slurmConfig: {slurmd: {suspendTime: "INFINITE\\rSlurmUser=nobody"}}',
        "values.yaml:1 (slurmConfig.slurmd.suspendTime)",
    ),
    "accounting host newline": (
        'accounting: {enabled: true, external: {host: "db\\nSlurmUser=nobody"}}',
        "values.yaml:1 (accounting.external.host)",
    ),
    "database user newline (slurmdbd.conf)": (
        'accounting: {enabled: true, database: {host: db, user: "slurm\\nStorageUser=root"}}',
        "values.yaml:1 (accounting.database.user)",
    ),
    "extraConfig NUL": (
        'slurmConfig: {extraConfig: "PreemptMode=REQUEUE\\0SlurmUser=nobody"}',
        "values.yaml:1 (slurmConfig.extraConfig)",
    ),
    "extraConfig line separator": (
        'slurmConfig: {extraConfig: "PreemptMode=REQUEUE\\u2028SlurmUser=nobody"}',
        "values.yaml:1 (slurmConfig.extraConfig)",
    ),
    "partitions escape": (
        'compute: {partitions: "PartitionName=all Nodes=ALL MaxTime=\\e[2J", nodes: {}}',
        "values.yaml:1 (compute.partitions)",
    ),
    "feature with a trailing newline": (
        'compute: {nodes: {gpu: {definitions: [rtx4000, las1], features: ["x\\n"]}}}',
        "values.yaml:1 (compute.nodes.gpu.features[0])",
    ),
    "gresGpu type with a trailing newline": (
        'compute: {nodes: {gpu: {definitions: [cpu-epyc, las1], gresGpu: "h100\\n:8"}}}',
        "values.yaml:1 (compute.nodes.gpu.gresGpu)",
    ),
}


@pytest.mark.parametrize("values, where", CASES.values(), ids=CASES.keys())
def test_every_rendered_value_refuses_control_characters(values: str, where: str) -> None:
    with pytest.raises(ReconcilerError) as err:
        compile_desired_state(config_from(values + "\n" + ("" if "compute:" in values else NODES)))
    assert str(err.value).startswith(where), str(err.value)


def test_a_feature_in_a_compute_defs_layer_names_that_file() -> None:
    layer = 'mine:\n  features: ["ok", "bad\\n"]\n'
    with pytest.raises(ConfigTypeError, match=r"^compute-defs/x.yaml:2 \(mine.features\[1\]\)"):
        config_from(NODES, {"compute-defs/x.yaml": layer})


def test_a_node_definition_name_with_a_trailing_newline_is_refused() -> None:
    values = textwrap.dedent(
        """
        compute:
          nodes:
            "gpu\\n":
              definitions: [rtx4000, las1]
        """
    )
    with pytest.raises(ReconcilerError, match=r"cannot name Slurm nodes"):
        compile_desired_state(config_from(values))


def test_a_release_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(ConfigTypeError, match=r"^reconciler.yaml:1 \(release\)"):
        config_from(NODES, {"reconciler.yaml": 'release: "slurm\\n"\n'})
    with pytest.raises(ConfigTypeError, match=r"--release must be a DNS label"):
        config_from(NODES, release="slurm\n")


def test_real_values_still_render() -> None:
    values = textwrap.dedent(
        """
        slurmConfig:
          selectTypeParameters: CR_Core_Memory
          slurmCtld: {taskPlugin: "task/affinity,task/cgroup", procTrackType: proctrack/cgroup}
          slurmd: {suspendTime: 600}
          extraConfig: |
            SchedulerParameters=sched_interval=2,bf_interval=2
            PartitionName=debug Nodes=ALL\tMaxTime=30
        accounting: {enabled: true, external: {host: dbd.example.com, port: 6819}}
        """
    )
    conf = compile_desired_state(config_from(values + NODES)).slurm_conf
    assert "TaskPlugin=task/affinity,task/cgroup" in conf.splitlines()
    assert "AccountingStorageHost=dbd.example.com" in conf.splitlines()


# Letters, the separators Slurm and Python split lines and tokens at, and YAML's quoting.
_ALPHABET = st.sampled_from(list("aZ/_=,# \t\n\r\x00\x0b\x0c\x1c\x85\u2028\"'\\"))


@settings(max_examples=300, deadline=None)
@given(st.text(_ALPHABET, min_size=1, max_size=24))
def test_no_task_plugin_adds_a_line_or_a_key(plugin: str) -> None:
    """Whatever the text, it is refused, or it renders as one TaskPlugin= line of one word."""
    values = f"slurmConfig: {{slurmCtld: {{taskPlugin: {json.dumps(plugin)}}}}}\n"
    try:
        config = config_from(values + NODES)
    except ReconcilerError:
        return
    conf = compile_desired_state(config).slurm_conf
    assert _keys_of(conf) == _keys_of(BASELINE.slurm_conf)
    assert len(conf.split("\n")) == len(BASELINE.slurm_conf.split("\n"))


def test_the_renderer_refuses_a_line_break_from_any_source() -> None:
    """Values not read from the repo (the site profile, say) meet the same guard."""
    profile = Profile(site={**CLUSTER_SITE, "SlurmUser": "slurm\nSlurmUser=nobody"})
    with pytest.raises(CompileError, match=r"slurm.conf setting SlurmUser holds the control"):
        compile_desired_state(config_from(NODES), profile)


@pytest.mark.parametrize("line", ["PartitionName=a\x00 Nodes=ALL", "PartitionName=a Nodes=\x1b"])
def test_partition_tokens_refuse_control_characters(line: str) -> None:
    with pytest.raises(CompileError, match=r"is not KEY=VALUE"):
        parse_partitions(line)
