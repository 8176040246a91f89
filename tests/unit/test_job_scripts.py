"""Prolog and epilog from one source each (compile/job_scripts.py), over the text of SUNK's "Slurm
Workload Manager" page."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.compile.desired import compile_desired_state
from reconciler.errors import CompileError
from tests.unit.conftest import config_from

NODES = "compute:\n  nodes:\n    cpu: {definitions: [cpu-epyc], replicas: 1}\n"
# SUNK's "Slurm Workload Manager" page, "Configuring SUNK": "if the two config maps are named
# `slurm-prolog` and `slurm-epilog`, the values.yaml file should look like this:"
PAGE_CONFIG_MAPS = """\
slurmConfig:
  slurmd:
    prologConfigMap: slurm-prolog
    epilogConfigMap: slurm-epilog
"""
INLINE_PROLOG = """\
    prolog: |
      #!/usr/bin/env bash
      exit 0
"""


def _compile(values: str, release: str = "slurm") -> Any:
    return compile_desired_state(config_from(values + NODES, release=release))


def _slurmd_volumes(state: Any) -> dict[str, str]:
    sts = next(o for o in state.kube_objects if o["metadata"]["name"].endswith("-cpu"))
    volumes = sts["spec"]["template"]["spec"]["volumes"]
    return {v["name"]: v["configMap"]["name"] for v in volumes if "configMap" in v}


def test_the_pages_config_map_names_collide_with_ours_for_release_slurm() -> None:
    with pytest.raises(CompileError) as error:
        _compile(PAGE_CONFIG_MAPS)
    message = str(error.value)
    assert "slurmConfig.slurmd.prologConfigMap is 'slurm-prolog'" in message
    assert "we render from slurmConfig.slurmd.prolog for release 'slurm'" in message
    assert "rename your ConfigMap" in (error.value.hint or "")


def test_the_pages_config_maps_are_mounted_under_another_release() -> None:
    state = _compile(PAGE_CONFIG_MAPS, release="train")
    volumes = _slurmd_volumes(state)
    assert (volumes["slurm-prolog"], volumes["slurm-epilog"]) == ("slurm-prolog", "slurm-epilog")
    assert "Prolog=/etc/slurm/prolog.d/*" in state.slurm_conf
    assert "Epilog=/etc/slurm/epilog.d/*" in state.slurm_conf
    assert not [o for o in state.kube_objects if o["metadata"]["name"] == "train-prolog"]


@pytest.mark.parametrize("key", ["prologConfigMap", "prologConfigmap"])
def test_an_inline_prolog_and_a_prolog_config_map_are_refused(key: str) -> None:
    """Before, the inline script won and the ConfigMap was dropped without a word."""
    values = f"slurmConfig:\n  slurmd:\n    {key}: site-prolog\n" + INLINE_PROLOG
    with pytest.raises(CompileError) as error:
        _compile(values)
    assert (
        f"slurmConfig.slurmd.prolog and slurmConfig.slurmd.{key} ('site-prolog') are both set"
        in str(error.value)
    )
    assert "our ConfigMap 'slurm-prolog'" in (error.value.hint or "")


def test_an_inline_epilog_and_an_epilog_config_map_are_refused() -> None:
    values = "slurmConfig:\n  slurmd:\n    epilogConfigMap: site\n" + INLINE_PROLOG.replace(
        "prolog", "epilog"
    )
    with pytest.raises(CompileError, match=r"epilog and slurmConfig\.slurmd\.epilogConfigMap"):
        _compile(values)


def test_an_inline_prolog_is_our_config_map() -> None:
    state = _compile("slurmConfig:\n  slurmd:\n" + INLINE_PROLOG)
    assert _slurmd_volumes(state)["slurm-prolog"] == "slurm-prolog"
    assert any(o["metadata"]["name"] == "slurm-prolog" for o in state.kube_objects)
