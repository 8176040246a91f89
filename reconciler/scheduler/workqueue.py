"""A work queue of keys, as Kubernetes controllers use them: a key waits at most once however
often it is added, one worker handles a key at a time, and a key added while it is being
handled comes back after. Delayed adds wait on a timer heap."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable


class WorkQueue:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._urgent: deque[str] = deque()  # served first, in their own order (FIFO)
        self._waiting: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()
        self._dirty_urgent: set[str] = set()
        self._delayed: list[tuple[float, int, str]] = []
        self._counter = itertools.count()
        self._closed = False

    def add(self, key: str, *, urgent: bool = False) -> None:
        """Queue a key; `urgent` keys are served before the others, first come first served
        (a Pod whose job just started goes ahead of a backlog of new Pods)."""
        with self._cond:
            if urgent and key in self._waiting and key in self._queue:
                self._queue.remove(key)
                self._waiting.discard(key)
            self._add_locked(key, urgent=urgent)

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            heapq.heappush(self._delayed, (self._clock() + delay, next(self._counter), key))
            self._cond.notify()

    def get(self) -> str | None:
        """The next key to handle (call done() after), or None once the queue is closed."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                self._promote_due_locked()
                if self._urgent or self._queue:
                    key = (self._urgent or self._queue).popleft()
                    self._waiting.discard(key)
                    self._processing.add(key)
                    return key
                timeout = self._delayed[0][0] - self._clock() if self._delayed else None
                self._cond.wait(timeout)

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                urgent = key in self._dirty_urgent
                self._dirty.discard(key)
                self._dirty_urgent.discard(key)
                self._add_locked(key, urgent=urgent)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._urgent) + len(self._queue) + len(self._delayed)

    def retained(self) -> dict[str, int]:
        """Keys held: waiting, being handled, to come back after, on the timer heap."""
        with self._cond:
            return {"queued": len(self._waiting), "processing": len(self._processing),
                    "dirty": len(self._dirty | self._dirty_urgent),
                    "delayed": len(self._delayed)}  # fmt: skip

    def _add_locked(self, key: str, *, urgent: bool = False) -> None:
        if key in self._processing:
            self._dirty.add(key)
            if urgent:
                self._dirty_urgent.add(key)
        elif key not in self._waiting:
            self._waiting.add(key)
            (self._urgent if urgent else self._queue).append(key)
            self._cond.notify()

    def _promote_due_locked(self) -> None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            self._add_locked(key)
