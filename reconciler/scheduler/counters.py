"""What the scheduler did, counted by each part that does it and read by the daemon's metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

# slurmrestd operations (SlurmClients.requests) that read Slurm's whole job list. After the
# scheduler's start none is made on v0.0.40+ unless a gap or a submit of unknown outcome asks
# for one (job_reads_effects.py); "jobs" also counts v0.0.38's update_time polls, 304s included.
WHOLE_LIST_READS = frozenset({"jobs", "jobs_where", "job_summaries"})


@dataclass
class Counters:
    """What the scheduler did, for logs, tests and (later) metrics."""

    submitted: int = 0
    bound: int = 0
    refused: int = 0
    pods_deleted: int = 0
    jobs_cancelled: int = 0
    polls: int = 0
    polls_unchanged: int = 0
    hooks: int = 0
    start_looks: int = 0  # looks for started jobs while some were pending (starts.py)
    starts_seen: int = 0  # pending jobs those looks found started
    # Writes to the API server by kind: binding, annotation, status, delete, "event:<reason>"
    api_writes: Counter[str] = field(default_factory=Counter)
    # slurmrestd requests by operation (SlurmClients.requests: the scheduler's clients' own)
    slurm_requests: Counter[str] = field(default_factory=Counter)


def whole_list_reads(requests: Mapping[str, int]) -> int:
    """How many of `requests` (operation -> count) read Slurm's whole job list."""
    return sum(n for operation, n in requests.items() if operation in WHOLE_LIST_READS)
