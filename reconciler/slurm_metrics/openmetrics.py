"""slurmctld's own OpenMetrics (Slurm 25.11+, `MetricsType=metrics/openmetrics`) as the same
`Family` records the REST read gives, wherever Slurm counts the same thing. Pure: exposition
text in, families out; prometheus_client's parser reads the text.

slurmctld serves totals, not objects: nodes by base state and by each flag (a node counts
once in the first and in every flag it carries), jobs by state per partition, sdiag's
statistics. So what the REST read derives per object is not here: a node's reason, the
sinfo-like state that weighs its flags (`slurm_nodes`), a job's pending reason
(`slurm_jobs_pending`). Those families are left out, never made up; docs/metrics.md lists
what each source gives.

Slurm's names partly collide with ours (its `slurm_jobs` and `slurm_nodes` are unlabelled
totals): only the families below are served, under our names and labels.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

from reconciler.slurm_metrics.figures import (
    JOBS,
    JOBS_HELD,
    NODE_BASE_STATES,
    NODE_FLAGS,
    PARTITION_GPUS,
    PARTITION_GPUS_ALLOCATED,
    Family,
    Labels,
    diag_family,
)

# The endpoints read: jobs by state come per partition from /metrics/partitions, so neither
# /metrics/jobs (cluster totals) nor /metrics/jobs-users-accts (a series per user) is read.
ENDPOINTS = ("nodes", "partitions", "scheduler")
# A name each endpoint serves whatever the cluster holds: its absence means the text is not
# slurmctld's (a proxy's page, another exporter).
_REQUIRED = {"nodes": "slurm_nodes", "partitions": "slurm_partitions"}

Samples = dict[str, list[tuple[dict[str, str], float]]]

# slurmctld's base node states (each node counts in one) -> sinfo's word, as the REST read
# lowers them. FUTURE nodes are left out: slurmrestd does not list them either.
_NODE_BASE = {
    "slurm_nodes_idle": "idle",
    "slurm_nodes_mixed": "mixed",
    "slurm_nodes_alloc": "allocated",
    "slurm_nodes_down": "down",
    "slurm_nodes_unknown": "unknown",
}
# Flags -> their name in slurmrestd's node `state` list, lower case. DRAIN is two counts
# (draining: with jobs; drain: without). Not mapped: slurmctld's cluster-wide
# `slurm_nodes_powering_up` holds its powering-down count (26.05.3), and it serves no
# cluster-wide powering-down count.
_NODE_FLAGS = {
    "blocked": ("slurm_nodes_blocked",),
    "cloud": ("slurm_nodes_cloud",),
    "completing": ("slurm_nodes_completing",),
    "drain": ("slurm_nodes_drain", "slurm_nodes_draining"),
    "dynamic_future": ("slurm_nodes_dyn_future",),
    "dynamic_norm": ("slurm_nodes_dyn_normal",),
    "external": ("slurm_nodes_external",),
    "fail": ("slurm_nodes_fail",),
    "invalid_reg": ("slurm_nodes_invalid_reg",),
    "maintenance": ("slurm_nodes_maint",),
    "not_responding": ("slurm_nodes_noresp",),
    "planned": ("slurm_nodes_planned",),
    "power_down": ("slurm_nodes_power_down",),
    "power_up": ("slurm_nodes_power_up",),
    "powered_down": ("slurm_nodes_powered_down",),
    "reboot_issued": ("slurm_nodes_reboot_issued",),
    "reboot_requested": ("slurm_nodes_reboot_req",),
    "reserved": ("slurm_nodes_resv",),
}
# A job's base state (each job counts in one) -> squeue's word, lower case. The derived
# states (completing, configuring, requeued...) overlap these and are not mapped.
_JOB_BASE = {
    "bootfail": "boot_fail",
    "cancelled": "cancelled",
    "completed": "completed",
    "deadline": "deadline",
    "failed": "failed",
    "node_failed": "node_fail",
    "outofmemory": "out_of_memory",
    "pending": "pending",
    "preempted": "preempted",
    "running": "running",
    "suspended": "suspended",
    "timeout": "timeout",
}
# sdiag's figures: SlurmDiag's field (figures._DIAG) -> slurmctld's name.
_DIAG = {
    "server_thread_count": "slurm_server_thread_cnt",
    "agent_queue_size": "slurm_agent_queue_size",
    "agent_count": "slurm_agent_cnt",
    "dbd_agent_queue_size": "slurm_slurmdbd_queue_size",
    "schedule_cycle_last": "slurm_schedule_cycle_last",
    "schedule_cycle_mean": "slurm_sched_mean_cycle",
    "schedule_cycle_max": "slurm_schedule_cycle_max",
    "schedule_cycles": "slurm_schedule_cycle_cnt",
    "schedule_queue_length": "slurm_schedule_queue_len",
    "jobs_submitted": "slurm_sdiag_jobs_submitted",
    "jobs_started": "slurm_sdiag_jobs_started",
    "jobs_completed": "slurm_sdiag_jobs_completed",
    "jobs_canceled": "slurm_sdiag_jobs_canceled",
    "jobs_failed": "slurm_sdiag_jobs_failed",
    "stats_since": "slurm_last_proc_req_start",
    "backfill_active": "slurm_bf_active",
    "backfill_cycle_last": "slurm_bf_cycle_last",
    "backfill_cycle_mean": "slurm_bf_mean_cycle",
    "backfill_cycle_max": "slurm_bf_cycle_max",
    "backfill_cycles": "slurm_bf_cycle_cnt",
    "backfilled_jobs": "slurm_backfilled_jobs",
    "backfill_queue_length": "slurm_bf_queue_len",
    "backfill_last_cycle_at": "slurm_bf_when_last_cycle",
}


class ExpositionError(ValueError):
    """Text that is not an exposition slurmctld would serve: names the endpoint and what is
    missing."""


def parse(texts: Mapping[str, str]) -> Samples:
    """Every sample of the endpoints' texts, by name."""
    samples: Samples = {}
    for endpoint, text in texts.items():
        try:
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    samples.setdefault(sample.name, []).append((sample.labels, sample.value))
        except ValueError as error:
            raise ExpositionError(f"/metrics/{endpoint}: not OpenMetrics text ({error})") from None
    return samples


def openmetrics_families(texts: Mapping[str, str]) -> tuple[Family, ...]:
    """The families of one read of ENDPOINTS (endpoint -> its text)."""
    samples = parse(texts)
    for endpoint, name in _REQUIRED.items():
        if name not in samples:
            raise ExpositionError(f"/metrics/{endpoint}: no {name} (is this slurmctld's?)")
    return (*node_families(samples), *job_families(samples), *diag_families(samples))


def node_families(samples: Samples) -> tuple[Family, ...]:
    base: dict[Labels, float] = {
        (state,): _total(samples, name) for name, state in _NODE_BASE.items()
    }
    flags: dict[Labels, float] = {
        (flag,): sum(_total(samples, n) for n in names) for flag, names in _NODE_FLAGS.items()
    }
    gpus = _by_partition(samples, "slurm_partition_gpus")
    allocated = _by_partition(samples, "slurm_partition_jobs_gpus_alloc")
    with_gpus = sorted(p for p in gpus.keys() | allocated.keys() if gpus.get(p) or allocated.get(p))
    return (
        NODE_BASE_STATES.with_samples(_nonzero(base)),
        NODE_FLAGS.with_samples(_nonzero(flags)),
        PARTITION_GPUS.with_samples(tuple(((p,), gpus.get(p, 0.0)) for p in with_gpus)),
        PARTITION_GPUS_ALLOCATED.with_samples(
            tuple(((p,), allocated.get(p, 0.0)) for p in with_gpus)
        ),
    )


def job_families(samples: Samples) -> tuple[Family, ...]:
    by_state: dict[tuple[str, ...], float] = {}
    for name, state in _JOB_BASE.items():
        for partition, count in _by_partition(samples, f"slurm_partition_jobs_{name}").items():
            by_state[state, partition] = count
    pending = _by_partition(samples, "slurm_partition_jobs_pending")
    held = _by_partition(samples, "slurm_partition_jobs_hold")
    return (
        JOBS.with_samples(_nonzero(by_state)),
        # Beside every partition with pending jobs, as the REST read serves it.
        JOBS_HELD.with_samples(
            tuple(((p,), held.get(p, 0.0)) for p in sorted(pending) if pending[p])
        ),
    )


def diag_families(samples: Samples) -> tuple[Family, ...]:
    missing = [name for name in _DIAG.values() if name not in samples]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise ExpositionError(
            f"/metrics/scheduler: no {missing[0]}{more} (not a Slurm 25.11+ slurmctld?)"
        )
    return tuple(diag_family(field, _total(samples, name)) for field, name in _DIAG.items())


def _total(samples: Samples, name: str) -> float:
    return sum(value for _, value in samples.get(name, ()))


def _by_partition(samples: Samples, name: str) -> dict[str, float]:
    return {labels.get("partition", ""): value for labels, value in samples.get(name, ())}


def _nonzero(counts: Mapping[Labels, float]) -> tuple[tuple[Labels, float], ...]:
    """Counts above 0, sorted: the REST read serves a label set only where something counts."""
    return tuple((labels, value) for labels, value in sorted(counts.items()) if value)
