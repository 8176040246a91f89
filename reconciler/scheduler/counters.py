"""What the scheduler did, counted by each part that does it and read by the daemon's metrics."""

from __future__ import annotations

from dataclasses import dataclass


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
