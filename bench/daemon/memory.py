"""The daemon's memory over time: samples once it is quiet, and one a second all run long."""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.daemon.common import QUIET_CPU, QUIET_TIMEOUT, QUIET_WINDOW
from bench.harness.procs import MIB, Sample, sample
from bench.harness.report import say


@dataclass(frozen=True)
class Point:
    key: str  # baseline, other, ours, deleted
    label: str
    samples: tuple[Sample, ...]

    @property
    def rss(self) -> float:
        return statistics.median(s.rss for s in self.samples)

    @property
    def anon(self) -> float:
        return statistics.median(s.anon for s in self.samples)

    @property
    def hwm(self) -> int:
        return self.samples[-1].hwm

    @property
    def threads(self) -> int:
        return self.samples[-1].threads

    @property
    def cpu(self) -> float:
        return self.samples[-1].cpu


class Recorder:
    """One sample of the daemon a second, all run long, for the peak and the trajectory."""

    def __init__(self, pid: int, path: Path) -> None:
        self.pid = pid
        self.samples: list[Sample] = []
        self._path = path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-rss", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            with contextlib.suppress(OSError, ValueError):
                self.samples.append(sample(self.pid))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        t0 = self.samples[0].at if self.samples else 0.0
        rows = [
            {
                "t": round(s.at - t0, 1),
                "rss": s.rss,
                "anon": s.anon,
                "hwm": s.hwm,
                "threads": s.threads,
                "cpu": s.cpu,
            }
            for s in self.samples
        ]
        self._path.write_text(json.dumps(rows))


def quiesce(pid: int) -> float | None:
    """Wait until the daemon uses under QUIET_CPU of a CPU over QUIET_WINDOW; seconds waited
    (None: it never got quiet within QUIET_TIMEOUT, the samples are taken anyway)."""
    started = time.monotonic()
    while time.monotonic() - started < QUIET_TIMEOUT:
        before = sample(pid)
        time.sleep(QUIET_WINDOW)
        after = sample(pid)
        if (after.cpu - before.cpu) / (after.at - before.at) < QUIET_CPU:
            return time.monotonic() - started
    return None


def measure(pid: int, key: str, label: str, seconds: float) -> Point:
    waited = quiesce(pid)
    note = f"quiet after {waited:.0f} s" if waited is not None else "NEVER QUIET"
    samples = [sample(pid)]
    while samples[-1].at - samples[0].at < seconds - 0.5:
        time.sleep(1.0)
        samples.append(sample(pid))
    point = Point(key, label, tuple(samples))
    say(
        f"{label}: VmRSS {point.rss / MIB:.1f} MiB, VmHWM {point.hwm / MIB:.1f} MiB ({note}, "
        f"{len(samples)} samples)"
    )
    return point
