"""One reason a Pod cannot be scheduled: the field and what to change. The Pod rules
(pod_rules.py) report them and the scheduler's admission refuses a Pod with them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One reason a Pod cannot be scheduled: the field, and what to change."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"
