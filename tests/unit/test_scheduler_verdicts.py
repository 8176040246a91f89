"""A slurmctld restart (which apply does) answers submits with transient errors;
only Slurm's verdicts on the job itself refuse a Pod, everything else is retried."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from reconciler.local.slurm.install import PREFIX_ENV, SLURM_2411_PREFIX
from reconciler.scheduler.decide.verdicts import INVALID_NODE_NAME, VERDICTS, is_verdict

# The Slurm the suite runs: setup.sh's 24.11, or the install $SUNK_RECONCILER_SLURM_PREFIX names.
PREFIX = Path(os.environ.get(PREFIX_ENV) or SLURM_2411_PREFIX)
HEADER = PREFIX / "include" / "slurm" / "slurm_errno.h"


@pytest.mark.parametrize(
    "number",
    [None, -1, 0, 1001, 1800, 2002, 2027, 2049, 2050, 2070, 2074, 2101, 2105, 5004, 5005, 9001],
)
def test_transient_and_unknown_errors_are_retried(number: int | None) -> None:
    """5004 (socket timed out) is what a submit gets while slurmctld is stopped; 1001/1800
    while it is down; 2027 while a backup takes over; numbers this table lacks, retried."""
    assert not is_verdict(number, pod_names_nodes=True)


@pytest.mark.parametrize("number", [2000, 2029, 2045, 2051, 2053, 2066, 2072, 2166])
def test_slurms_verdicts_on_the_job_refuse_the_pod(number: int) -> None:
    assert is_verdict(number, pod_names_nodes=False)


def test_an_unknown_node_is_a_verdict_only_when_the_pod_names_nodes() -> None:
    assert is_verdict(INVALID_NODE_NAME, pod_names_nodes=True)
    assert not is_verdict(INVALID_NODE_NAME, pod_names_nodes=False)


def slurm_errno(text: str) -> dict[str, int]:
    """The enum of slurm_errno.h: NAME = value sets the counter, NAME alone takes the next."""
    numbers: dict[str, int] = {}
    counter = 0
    for name, value in re.findall(r"^\s*(E?SLURM\w*)\s*(?:=\s*(-?\d+))?\s*,", text, re.M):
        counter = int(value) if value else counter + 1
        numbers[name] = counter
    return numbers


@pytest.mark.skipif(not HEADER.exists(), reason=f"no Slurm headers in {PREFIX} (setup.sh)")
def test_the_table_is_slurms_own() -> None:
    numbers = slurm_errno(HEADER.read_text())
    assert numbers["ESLURM_INVALID_JOB_ID"] == 2017  # the parse is right
    assert {name: numbers.get(name) for name in VERDICTS.values()} == {
        name: number for number, name in VERDICTS.items()
    }
    assert numbers["ESLURM_INVALID_NODE_NAME"] == INVALID_NODE_NAME
