"""The hostlists topology.conf is written with (python-hostlist's collect_hostlist, as slurm.conf
and the slurm-nodes annotation are) expand, in Slurm's own parser (`scontrol show hostnames`,
no daemon needed), to exactly the names they were made from: node names, and block and switch
names from label values (dots, dashes, leading zeros, digits inside)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import hostlist
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.local.slurm.install import slurm_install
from tests.integration.conftest import require_slurm_binaries

_name = st.one_of(
    st.builds(lambda d, i: f"slurm-{d}-{i}", st.sampled_from(["gpu", "h100x8", "cpu"]),
              st.integers(0, 300)),
    st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,10}[a-z0-9])?", fullmatch=True),
)  # fmt: skip


@pytest.fixture(scope="module")
def conf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_slurm_binaries()
    path = tmp_path_factory.mktemp("hostlist") / "slurm.conf"
    path.write_text("ClusterName=hostlist\nSlurmctldHost=localhost\n")  # enough for scontrol
    return path


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_name, min_size=1, max_size=12, unique=True))
def test_slurm_expands_our_hostlists_to_the_same_names(conf: Path, names: list[str]) -> None:
    install = slurm_install()
    scontrol = install.command("scontrol")
    assert scontrol is not None, "no scontrol"
    written = hostlist.collect_hostlist(names)
    env = install.env({**os.environ, "SLURM_CONF": str(conf)})
    done = subprocess.run([scontrol, "show", "hostnames", written], capture_output=True,
                          text=True, env=env, timeout=30, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == sorted(names), written
