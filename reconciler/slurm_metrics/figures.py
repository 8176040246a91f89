"""Slurm's state as metric families, from plain data: nodes, jobs and the scheduler statistics
of one read -> `Family` records the collector turns into Prometheus families. Pure: no I/O,
no clock, no client library, so it is tested and benchmarked on plain data.

Labels stay low-cardinality whatever the cluster does: no job id, user or node name. A node's
reason becomes the word before its `:` (`k8s`, `reconciler`, `health`, `nhc`...), `other` when
it has none, and only the most common prefixes are kept (MAX_REASON_PREFIXES), the rest also
counted as `other`; states, flags and pending reasons are Slurm's own finite words; partitions
are the cluster's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from reconciler.adapters.slurm.model import SlurmDiag, SlurmNode, gres_gpus
from reconciler.sync.node_health_decide import standing_reason

Kind = Literal["gauge", "counter"]
Labels = tuple[str, ...]

MAX_REASON_PREFIXES = 20  # more distinct prefixes than this are counted as OTHER
NO_REASON, OTHER = "none", "other"
_PREFIX = re.compile(r"^\s*([A-Za-z0-9_.-]{1,32})\s*:")
_MICROSECONDS = 1e6  # Slurm says times in microseconds


@dataclass(frozen=True)
class Family:
    """One metric family: a counter's name is without `_total` (the exposition adds it)."""

    name: str
    kind: Kind
    help: str
    labels: Labels = ()
    samples: tuple[tuple[Labels, float], ...] = ()

    def with_samples(self, samples: tuple[tuple[Labels, float], ...]) -> Family:
        return Family(self.name, self.kind, self.help, self.labels, samples)


# The families both sources serve (the REST read and slurmctld's OpenMetrics): one home for
# their name, labels and help, filled by `node_families`/`job_families` and by `openmetrics`.
NODE_BASE_STATES = Family(
    "slurm_node_base_states",
    "gauge",
    "Slurm nodes by base state (idle, mixed, allocated, down, unknown), whatever their flags; "
    "FUTURE nodes are not counted",
    ("state",),
)
NODE_FLAGS = Family(
    "slurm_node_flags",
    "gauge",
    "Slurm nodes carrying each state flag (drain, not_responding, powered_down, ...)",
    ("flag",),
)
PARTITION_GPUS = Family(
    "slurm_partition_gpus",
    "gauge",
    "GPUs configured on the partition's nodes (a node in two partitions counts in both)",
    ("partition",),
)
PARTITION_GPUS_ALLOCATED = Family(
    "slurm_partition_gpus_allocated",
    "gauge",
    "GPUs allocated to jobs on the partition's nodes",
    ("partition",),
)
JOBS = Family(
    "slurm_jobs",
    "gauge",
    "Jobs slurmctld holds, by state (squeue's, lower case) and partition",
    ("state", "partition"),
)
JOBS_HELD = Family(
    "slurm_jobs_held",
    "gauge",
    "Pending jobs held (JobHeldUser, JobHeldAdmin), for every partition with pending jobs",
    ("partition",),
)
HELD_REASONS = frozenset(["JobHeldUser", "JobHeldAdmin"])
# The partition of a count read from job states alone (`GET /jobs/state/` names none).
ALL_PARTITIONS = "*"


class JobFields(Protocol):
    """What the job families read of a job: a JobSummary (what the daemon's read decodes,
    job_summaries()) or a whole SlurmJob, read alike."""

    @property
    def state(self) -> str: ...
    @property
    def partition(self) -> str: ...
    @property
    def state_reason(self) -> str: ...


@dataclass(frozen=True)
class SlurmReading:
    """What one read of Slurm gave: every node and job slurmctld lists, and its statistics."""

    nodes: Sequence[SlurmNode]
    jobs: Sequence[JobFields]
    diag: SlurmDiag


def node_state(node: SlurmNode) -> str:
    """The node's state in sinfo's long words (`%T` without its `*~#!%` suffixes), lower case:
    a drain is `draining` while jobs run and `drained` after, as Slurm's node_state_string()
    says it; a node in maintenance or with a reboot asked shows so while it runs nothing."""
    base, flags = node.state.lower() or "unknown", node.flags
    busy = base in ("allocated", "mixed")
    if "MAINTENANCE" in flags and not ("DRAIN" in flags or busy or base == "down"):
        return "maint"
    if ("REBOOT_REQUESTED" in flags or "REBOOT_ISSUED" in flags) and not busy:
        return "reboot_issued" if "REBOOT_ISSUED" in flags else "reboot_requested"
    if "DRAIN" in flags:
        return "draining" if busy or "COMPLETING" in flags else "drained"
    if "FAIL" in flags:
        return "failing" if base == "allocated" or "COMPLETING" in flags else "fail"
    if base == "down":
        return "down"
    if "COMPLETING" in flags:
        return "completing"
    if base == "idle" and "PLANNED" in flags:
        return "planned"
    return base


def reason_prefix(node: SlurmNode) -> str:
    """The word before the `:` of the reason that holds the node (drained, failed or down),
    lower case; NO_REASON without one, OTHER for a reason without a prefix."""
    reason = standing_reason(node.state, node.flags, node.reason)
    if not reason:
        return NO_REASON
    found = _PREFIX.match(reason)
    return found.group(1).lower() if found else OTHER


def slurm_families(reading: SlurmReading) -> tuple[Family, ...]:
    """Every Slurm family, present (possibly without samples) whatever the reading holds."""
    return (
        *node_families(reading.nodes),
        *job_families(reading.jobs),
        *diag_families(reading.diag),
    )


def node_families(nodes: Iterable[SlurmNode]) -> tuple[Family, ...]:
    by_state: Counter[Labels] = Counter()
    base: Counter[tuple[str, ...]] = Counter()
    flags: Counter[tuple[str, ...]] = Counter()
    gpus: Counter[str] = Counter()
    gpus_allocated: Counter[str] = Counter()
    for node in nodes:
        by_state[node_state(node), reason_prefix(node)] += 1
        base[(node.state.lower() or "unknown",)] += 1
        flags.update((flag.lower(),) for flag in node.flags)
        total, used = gres_gpus(node.gres), gres_gpus(node.gres_used)
        if total or used:
            for partition in node.partitions:
                gpus[partition] += total
                gpus_allocated[partition] += used
    return (
        Family(
            "slurm_nodes",
            "gauge",
            "Slurm nodes by state (sinfo's long state words) and the prefix of the reason "
            "that holds them (the word before ':'; 'none', or 'other' without a prefix)",
            ("state", "reason"),
            _samples(_fold_reasons(by_state)),
        ),
        NODE_BASE_STATES.with_samples(_samples(base)),
        NODE_FLAGS.with_samples(_samples(flags)),
        PARTITION_GPUS.with_samples(_samples({(p,): n for p, n in gpus.items()})),
        PARTITION_GPUS_ALLOCATED.with_samples(_samples({(p,): gpus_allocated[p] for p in gpus})),
    )


def job_families(jobs: Iterable[JobFields]) -> tuple[Family, ...]:
    by_state: Counter[Labels] = Counter()
    pending: Counter[Labels] = Counter()
    held: Counter[tuple[str, ...]] = Counter()
    for job in jobs:
        state = job.state.lower()
        by_state[state, job.partition] += 1
        if state == "pending":
            pending[job.state_reason, job.partition] += 1
            held[(job.partition,)] += int(job.state_reason in HELD_REASONS)
    return (
        JOBS.with_samples(_samples(by_state)),
        Family(
            "slurm_jobs_pending",
            "gauge",
            "Pending jobs by the reason they wait (squeue's REASON) and partition",
            ("reason", "partition"),
            _samples(pending),
        ),
        JOBS_HELD.with_samples(_samples(held)),
    )


def job_count_families(counts: Mapping[str, int]) -> tuple[Family, ...]:
    """job_families' families from jobs per state alone (no partition, no reason): slurm_jobs
    by state in partition ALL_PARTITIONS; pending reasons and held jobs without samples."""
    by_state: Counter[Labels] = Counter()
    for state, count in counts.items():
        by_state[state.lower(), ALL_PARTITIONS] += count
    jobs, *rest = job_families(())
    return (jobs.with_samples(_samples(by_state)), *rest)


# SlurmDiag field -> (name, kind, help); a name ending in _seconds is a time in Slurm's
# microseconds, unless it is a timestamp.
_DIAG: dict[str, tuple[str, Kind, str]] = {
    "server_thread_count": ("slurm_scheduler_threads", "gauge", "slurmctld server threads active"),
    "agent_queue_size": (
        "slurm_scheduler_agent_queue_size",
        "gauge",
        "Outgoing RPCs queued in slurmctld's agent",
    ),
    "agent_count": ("slurm_scheduler_agent_count", "gauge", "slurmctld agent threads"),
    "dbd_agent_queue_size": (
        "slurm_scheduler_dbd_agent_queue_size",
        "gauge",
        "Messages for slurmdbd queued in slurmctld",
    ),
    "schedule_cycle_last": (
        "slurm_scheduler_cycle_last_seconds",
        "gauge",
        "Time of the last main scheduling cycle",
    ),
    "schedule_cycle_mean": (
        "slurm_scheduler_cycle_mean_seconds",
        "gauge",
        "Mean time of a main scheduling cycle since the statistics were reset",
    ),
    "schedule_cycle_max": (
        "slurm_scheduler_cycle_max_seconds",
        "gauge",
        "Longest main scheduling cycle since the statistics were reset",
    ),
    "schedule_cycles": (
        "slurm_scheduler_cycles",
        "counter",
        "Main scheduling cycles (reset at midnight and by sdiag --reset)",
    ),
    "schedule_queue_length": (
        "slurm_scheduler_queue_length",
        "gauge",
        "Jobs the last main scheduling cycle looked at",
    ),
    "jobs_submitted": (
        "slurm_scheduler_jobs_submitted",
        "counter",
        "Jobs submitted (reset at midnight)",
    ),
    "jobs_started": ("slurm_scheduler_jobs_started", "counter", "Jobs started (reset at midnight)"),
    "jobs_completed": (
        "slurm_scheduler_jobs_completed",
        "counter",
        "Jobs completed (reset at midnight)",
    ),
    "jobs_canceled": (
        "slurm_scheduler_jobs_canceled",
        "counter",
        "Jobs cancelled (reset at midnight)",
    ),
    "jobs_failed": ("slurm_scheduler_jobs_failed", "counter", "Jobs failed (reset at midnight)"),
    "stats_since": (
        "slurm_scheduler_stats_since_timestamp_seconds",
        "gauge",
        "When slurmctld last reset these statistics",
    ),
    "backfill_active": ("slurm_backfill_active", "gauge", "1 while a backfill cycle runs"),
    "backfill_cycle_last": (
        "slurm_backfill_cycle_last_seconds",
        "gauge",
        "Time of the last backfill cycle",
    ),
    "backfill_cycle_mean": (
        "slurm_backfill_cycle_mean_seconds",
        "gauge",
        "Mean time of a backfill cycle since the statistics were reset",
    ),
    "backfill_cycle_max": (
        "slurm_backfill_cycle_max_seconds",
        "gauge",
        "Longest backfill cycle since the statistics were reset",
    ),
    "backfill_cycles": ("slurm_backfill_cycles", "counter", "Backfill cycles (reset at midnight)"),
    "backfilled_jobs": (
        "slurm_backfill_jobs_started",
        "counter",
        "Jobs started by backfill (reset at midnight)",
    ),
    "backfill_queue_length": (
        "slurm_backfill_queue_length",
        "gauge",
        "Jobs the last backfill cycle looked at",
    ),
    "backfill_last_cycle_at": (
        "slurm_backfill_last_cycle_timestamp_seconds",
        "gauge",
        "When the last backfill cycle ran (0: none yet)",
    ),
}


def diag_families(diag: SlurmDiag) -> tuple[Family, ...]:
    return tuple(diag_family(field, float(getattr(diag, field))) for field in _DIAG)


def diag_family(field: str, value: float) -> Family:
    """The family of SlurmDiag's FIELD, from its VALUE as Slurm says it (microseconds)."""
    name, kind, text = _DIAG[field]
    return Family(name, kind, text, (), (((), value / _scale(name)),))


def _scale(name: str) -> float:
    return _MICROSECONDS if name.endswith("_seconds") and "timestamp" not in name else 1.0


def _fold_reasons(counts: Counter[Labels]) -> Counter[Labels]:
    """At most MAX_REASON_PREFIXES prefixes besides NO_REASON and OTHER, the most common
    first (ties by name, so a scrape is stable); the rest counted as OTHER."""
    per_prefix: Counter[str] = Counter()
    for (_, prefix), count in counts.items():
        if prefix not in (NO_REASON, OTHER):
            per_prefix[prefix] += count
    if len(per_prefix) <= MAX_REASON_PREFIXES:
        return counts
    ranked = sorted(per_prefix.items(), key=lambda item: (-item[1], item[0]))
    kept = {prefix for prefix, _ in ranked[:MAX_REASON_PREFIXES]}
    folded: Counter[Labels] = Counter()
    for (state, prefix), count in counts.items():
        keep = prefix in kept or prefix == NO_REASON
        folded[state, prefix if keep else OTHER] += count
    return folded


def _samples(counts: Mapping[Labels, int]) -> tuple[tuple[Labels, float], ...]:
    return tuple((labels, float(count)) for labels, count in sorted(counts.items()))
