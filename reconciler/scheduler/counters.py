"""What the scheduler did, counted by each part that does it and read by the daemon's metrics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


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
