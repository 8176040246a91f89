"""The Slurm series of /metrics from plain data: node states and reason prefixes, jobs and
pending reasons by partition, GPUs per partition and the scheduler statistics (figures.py).
Nodes and jobs are the ones captured from slurmrestd 24.11.5, changed field by field."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.slurm.model import SlurmDiag, SlurmJob, SlurmNode
from reconciler.adapters.slurm.v0038 import diag_from_wire
from reconciler.adapters.slurm.v0040 import job_from_wire, node_from_wire
from reconciler.slurm_metrics.figures import (
    MAX_REASON_PREFIXES,
    Family,
    SlurmReading,
    node_state,
    reason_prefix,
    slurm_families,
)

CAPTURED = json.loads((Path(__file__).parent / "slurm_bodies" / "v0.0.42.json").read_text())
NODE = node_from_wire(CAPTURED["node_draining"])
JOB = job_from_wire(CAPTURED["job_running"])
DIAG = diag_from_wire(CAPTURED["diag"]["statistics"])


def node(state: str = "IDLE", *flags: str, **fields: Any) -> SlurmNode:
    values: dict[str, Any] = {"state": state, "flags": frozenset(flags), "reason": ""}
    return dataclasses.replace(NODE, **{**values, **fields})


def job(state: str, partition: str = "all", reason: str = "None") -> SlurmJob:
    return dataclasses.replace(JOB, state=state, partition=partition, state_reason=reason)


def figures(
    nodes: list[SlurmNode] = [],  # noqa: B006 - never mutated
    jobs: list[SlurmJob] = [],  # noqa: B006
    diag: SlurmDiag = DIAG,
) -> dict[str, Family]:
    return {f.name: f for f in slurm_families(SlurmReading(nodes, jobs, diag))}


def samples(family: Family) -> dict[tuple[str, ...], float]:
    return dict(family.samples)


@pytest.mark.parametrize(
    ("state", "flags", "word"),
    [
        ("IDLE", (), "idle"), ("MIXED", (), "mixed"), ("ALLOCATED", (), "allocated"),
        ("IDLE", ("DRAIN",), "drained"), ("MIXED", ("DRAIN",), "draining"),
        ("ALLOCATED", ("DRAIN",), "draining"), ("IDLE", ("DRAIN", "COMPLETING"), "draining"),
        ("DOWN", ("DRAIN",), "drained"), ("DOWN", ("NOT_RESPONDING",), "down"),
        ("IDLE", ("COMPLETING",), "completing"), ("IDLE", ("POWERED_DOWN",), "idle"),
        ("IDLE", ("FAIL",), "fail"), ("ALLOCATED", ("FAIL",), "failing"),
        ("IDLE", ("MAINTENANCE", "RESERVED"), "maint"), ("IDLE", ("REBOOT_REQUESTED",),
        "reboot_requested"), ("MIXED", ("REBOOT_REQUESTED",), "mixed"),
        ("IDLE", ("PLANNED",), "planned"), ("FUTURE", (), "future"), ("", (), "unknown"),
    ],
)  # fmt: skip
def test_a_node_state_is_sinfos_long_word(state: str, flags: tuple[str, ...], word: str) -> None:
    assert node_state(node(state, *flags)) == word


@pytest.mark.parametrize(
    ("state", "flags", "reason", "prefix"),
    [
        ("IDLE", ("DRAIN",), "k8s: node n1 cordoned", "k8s"),
        ("MIXED", ("DRAIN",), "reconciler: shrink slurm-gpu", "reconciler"),
        ("DOWN", (), "NHC: disk full", "nhc"),
        ("IDLE", ("DRAIN",), " health :fan", "health"),
        ("DOWN", ("NOT_RESPONDING",), "Not responding", "other"),
        ("IDLE", ("DRAIN",), "see https://wiki/x: broken", "other"),
        ("IDLE", ("FAIL",), "health: ecc", "health"),
        ("IDLE", (), "health: resumed", "none"),  # 24.11 keeps a reason after RESUME
        ("IDLE", ("DRAIN",), "", "none"),
    ],
)
def test_a_reason_is_counted_by_its_prefix_while_it_holds_the_node(
    state: str, flags: tuple[str, ...], reason: str, prefix: str
) -> None:
    assert reason_prefix(node(state, *flags, reason=reason)) == prefix


def test_nodes_by_state_and_reason_and_their_flags() -> None:
    found = figures([
        node("IDLE"), node("IDLE", "POWERED_DOWN"), node("MIXED"),
        node("IDLE", "DRAIN", reason="k8s: node a cordoned"),
        node("IDLE", "DRAIN", reason="k8s: node b cordoned"),
        node("MIXED", "DRAIN", reason="health: xid 79"),
        node("DOWN", "NOT_RESPONDING", reason="Not responding"),
    ])  # fmt: skip
    assert samples(found["slurm_nodes"]) == {
        ("idle", "none"): 2, ("mixed", "none"): 1, ("drained", "k8s"): 2,
        ("draining", "health"): 1, ("down", "other"): 1,
    }  # fmt: skip
    assert samples(found["slurm_node_flags"]) == {
        ("drain",): 3, ("powered_down",): 1, ("not_responding",): 1,
    }  # fmt: skip


def test_reason_prefixes_beyond_the_limit_are_counted_as_other() -> None:
    """Admins may write anything: the label never grows past the limit, nor is a node lost."""
    many = [node("IDLE", "DRAIN", reason=f"p{n:02d}: x") for n in range(MAX_REASON_PREFIXES + 5)]
    common = [node("IDLE", "DRAIN", reason="p30: x")] * 3
    found = samples(figures([*many, *common, node("IDLE")])["slurm_nodes"])
    prefixes = {reason for _, reason in found}
    assert len(prefixes - {"none", "other"}) == MAX_REASON_PREFIXES
    assert ("drained", "p30") in found  # the most common is kept
    assert found[("drained", "other")] == 5 + 1 and found[("idle", "none")] == 1
    assert sum(found.values()) == len(many) + len(common) + 1


def test_gpus_per_partition_allocated_and_configured() -> None:
    found = figures([
        node("MIXED", gres="gpu:h100:8(S:0-1)", gres_used="gpu:h100:3(IDX:0-2)",
             partitions=("all", "gpu")),
        node("IDLE", gres="gpu:h100:8(S:0-1)", gres_used="gpu:h100:0(IDX:N/A)",
             partitions=("gpu",)),
        node("IDLE", gres="", gres_used="", partitions=("all", "cpu")),
    ])  # fmt: skip
    assert samples(found["slurm_partition_gpus"]) == {("all",): 8, ("gpu",): 16}
    assert samples(found["slurm_partition_gpus_allocated"]) == {("all",): 3, ("gpu",): 3}


def test_jobs_by_state_and_partition_and_pending_ones_by_reason() -> None:
    found = figures(jobs=[
        job("RUNNING", "gpu"), job("RUNNING", "gpu"), job("COMPLETING", "gpu"),
        job("PENDING", "gpu", "Resources"), job("PENDING", "gpu", "Priority"),
        job("PENDING", "all", "JobHeldUser"), job("PENDING", "all", "JobHeldUser"),
        job("COMPLETED", "all"),
    ])  # fmt: skip
    assert samples(found["slurm_jobs"]) == {
        ("running", "gpu"): 2, ("completing", "gpu"): 1, ("pending", "gpu"): 2,
        ("pending", "all"): 2, ("completed", "all"): 1,
    }  # fmt: skip
    assert samples(found["slurm_jobs_pending"]) == {
        ("Resources", "gpu"): 1, ("Priority", "gpu"): 1, ("JobHeldUser", "all"): 2,
    }  # fmt: skip


def test_scheduler_statistics_in_seconds_and_counters() -> None:
    """From the captured diag: Slurm's microseconds become seconds; counters are counters."""
    found = figures()
    value = {name: f.samples[0][1] for name, f in found.items() if f.samples and not f.labels}
    assert value["slurm_backfill_cycle_last_seconds"] == pytest.approx(198e-6)
    assert value["slurm_scheduler_cycle_max_seconds"] == pytest.approx(
        DIAG.schedule_cycle_max / 1e6
    )
    assert (value["slurm_scheduler_jobs_started"], value["slurm_scheduler_jobs_submitted"]) == (
        1, 3,
    )  # fmt: skip
    assert value["slurm_scheduler_threads"] == 1 and value["slurm_backfill_cycles"] == 15
    assert value["slurm_scheduler_stats_since_timestamp_seconds"] == 1795772457
    assert value["slurm_backfill_last_cycle_timestamp_seconds"] == 1795772563
    assert found["slurm_scheduler_jobs_started"].kind == "counter"
    assert found["slurm_scheduler_cycle_last_seconds"].kind == "gauge"


def test_every_family_is_there_for_an_empty_cluster_and_no_label_names_a_node_or_job() -> None:
    empty = figures()
    assert set(empty) == set(figures([node()], [job("RUNNING")]))
    assert samples(empty["slurm_nodes"]) == {} and samples(empty["slurm_jobs"]) == {}
    labels = {label for family in empty.values() for label in family.labels}
    assert labels == {"state", "reason", "flag", "partition"}
