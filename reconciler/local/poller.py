"""A background thread that calls one function every interval until stopped: the kubelet
cluster's DNS feeder and volume provisioner follow the API this way (a poll of two lists
every half second costs the API server little, and never misses an event)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Poller:
    def __init__(self, step: Callable[[], object], interval: float, name: str) -> None:
        self.step = step
        self.interval = interval
        self.name = name
        self.errors = 0  # steps that raised: the API server restarting, or going down with us
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True, name=self.name)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.step()
            except Exception:
                self.errors += 1
