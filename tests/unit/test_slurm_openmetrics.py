"""slurmctld's own OpenMetrics as our families, over what a Slurm 26.05.3 slurmctld served
(tests/unit/data/slurmctld_openmetrics/README.md says which nodes and jobs it held): the same
names, labels and figures as the REST read wherever Slurm counts the same thing, and nothing
made up where it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.slurm_metrics.figures import Family
from reconciler.slurm_metrics.openmetrics import (
    ENDPOINTS,
    ExpositionError,
    openmetrics_families,
)
from tests.unit.test_slurm_metrics import figures, samples

CAPTURED = Path(__file__).parent / "data" / "slurmctld_openmetrics"
# The families only the REST read can give: they need each node's reason and flags together,
# or each pending job's reason (docs/metrics.md, "Two sources").
REST_ONLY = {"slurm_nodes", "slurm_jobs_pending"}


def captured() -> dict[str, str]:
    return {endpoint: (CAPTURED / f"{endpoint}.prom").read_text() for endpoint in ENDPOINTS}


def families(texts: dict[str, str] | None = None) -> dict[str, Family]:
    return {f.name: f for f in openmetrics_families(texts or captured())}


def test_nodes_by_base_state_and_flag_as_sinfo_showed_them() -> None:
    """node1 and node3 mixed, node2 draining (allocated), node4 down, node5 drained (idle);
    node6 is FUTURE, which slurmrestd does not list either."""
    got = families()
    assert samples(got["slurm_node_base_states"]) == {
        ("allocated",): 1, ("down",): 1, ("idle",): 1, ("mixed",): 2,
    }  # fmt: skip
    assert samples(got["slurm_node_flags"]) == {("drain",): 2, ("not_responding",): 1}


def test_jobs_by_state_and_partition_with_the_held_ones() -> None:
    """The held array of 5 tasks counts 5 pending jobs (squeue shows it on one line)."""
    got = families()
    assert samples(got["slurm_jobs"]) == {
        ("cancelled", "cpu"): 1, ("pending", "cpu"): 5, ("running", "cpu"): 1,
        ("completed", "gpu"): 3, ("failed", "gpu"): 1, ("pending", "gpu"): 2,
        ("running", "gpu"): 2,
    }  # fmt: skip
    assert samples(got["slurm_jobs_held"]) == {("cpu",): 5, ("gpu",): 1}


def test_scheduler_statistics_in_seconds_like_the_rest_read() -> None:
    got = families()
    value = {name: f.samples[0][1] for name, f in got.items() if not f.labels}
    assert value["slurm_scheduler_cycles"] == 9  # slurm_schedule_cycle_cnt
    assert value["slurm_scheduler_cycle_max_seconds"] == pytest.approx(2787e-6)
    assert value["slurm_backfill_cycles"] == 2
    assert value["slurm_backfill_jobs_started"] == 2
    assert value["slurm_backfill_last_cycle_timestamp_seconds"] == 1795824536
    assert value["slurm_scheduler_stats_since_timestamp_seconds"] == 1795824476
    assert value["slurm_scheduler_jobs_submitted"] == 15


def test_gpus_need_a_gpu_tres_else_no_gpu_series() -> None:
    """Without gres/gpu in AccountingStorageTRES slurmctld counts 0 GPUs everywhere (as
    captured): no GPU series, as the REST read serves none for a partition without GPUs."""
    got = families()
    assert got["slurm_partition_gpus"].samples == ()
    assert got["slurm_partition_gpus_allocated"].samples == ()


def test_gpus_per_partition_where_slurm_counts_them() -> None:
    texts = captured()
    for name, value in (("gpus", 8), ("jobs_gpus_alloc", 6)):
        line = f'slurm_partition_{name}{{partition="gpu"}}'
        texts["partitions"] = texts["partitions"].replace(f"{line} 0", f"{line} {value}")
    got = families(texts)
    assert samples(got["slurm_partition_gpus"]) == {("gpu",): 8}
    assert samples(got["slurm_partition_gpus_allocated"]) == {("gpu",): 6}


def test_the_same_families_as_the_rest_read_but_those_slurm_cannot_give() -> None:
    """Same name -> same type, labels and help: a dashboard reads them alike."""
    rest, ours = figures(), families()
    assert set(rest) - set(ours) == REST_ONLY
    assert set(ours) <= set(rest)
    for name, family in ours.items():
        assert (family.kind, family.labels, family.help) == (
            rest[name].kind, rest[name].labels, rest[name].help,
        ), name  # fmt: skip


@pytest.mark.parametrize(
    ("endpoint", "text", "says"),
    [
        ("nodes", "<html>proxy error</html>\n", "/metrics/nodes: not OpenMetrics text"),
        ("nodes", "# TYPE other gauge\nother 1\n", "/metrics/nodes: no slurm_nodes"),
        ("scheduler", "slurm_agent_cnt 1\n", "no slurm_server_thread_cnt and 21 more"),
    ],
)
def test_text_that_is_not_slurmctld_s_is_refused(endpoint: str, text: str, says: str) -> None:
    texts = captured()
    texts[endpoint] = text
    with pytest.raises(ExpositionError, match=says):
        openmetrics_families(texts)
