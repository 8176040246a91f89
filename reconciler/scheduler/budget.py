"""A budget for drastic steps: at most `per_pass` in each poll interval, so that one bad
answer from Slurm cannot make the scheduler do them in bulk. Pure but for its lock and clock.

Used for what may end in a Pod's deletion because its job went missing: each confirmation of
a vanished job with Slurm takes one; the rest wait for the next interval.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class PassBudget:
    """A token bucket: `per_pass` tokens, refilled at `per_pass` per `seconds`."""

    def __init__(
        self, per_pass: int, seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._per_pass = per_pass
        self._rate = per_pass / max(seconds, 0.001)
        self._clock = clock
        self._tokens = float(per_pass)
        self._at = clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        """One step may go now (True), or it waits for a later interval (False)."""
        with self._lock:
            now = self._clock()
            elapsed = max(0.0, now - self._at)
            self._tokens = min(float(self._per_pass), self._tokens + elapsed * self._rate)
            self._at = now
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            return True
