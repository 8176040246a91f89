"""bench.soak's figures: one row per wave (what the daemon holds once the wave is cleaned up),
each figure's slope over the second half, and its verdict against its bound."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median, median_low

from bench.daemon.soak_churn import du
from bench.harness.procs import MIB, Sample, sample
from bench.harness.report import print_head, verdict
from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.daemon.status import status_name

RSS_BOUND = 0.2  # MiB of VmRSS per 1,000 Pods, over the second half
BLOCKS_METRIC = "reconciler_python_allocated_blocks"


@dataclass(frozen=True)
class Row:
    wave: int
    pods: int  # bound so far
    minutes: float  # since the daemon was ready
    rss: float  # MiB
    blocks: int  # Python's allocated blocks (its /metrics), once the wave is cleaned up
    threads: int
    fds: int
    checkout: int  # bytes: du of the daemon's git checkout (its .git included)
    origin: int  # bytes: du of the bare repo it fetches (the history it mirrors)
    status: int  # bytes of the status ConfigMap's data (keys and values)
    events: int  # Events the daemon wrote that the API server still holds
    log_rate: float  # the daemon's stdout + stderr lines per minute since the previous row
    revisions: int  # applied so far
    restarts: int  # done so far


@dataclass
class Sampler:
    """Reads a Row's figures; remembers the log's line count for the rate."""

    pid: int
    metrics: Callable[[], Mapping[str, float]]  # the daemon's /metrics
    logs: tuple[Path, ...]
    checkout: Path
    origin: Path
    kube: Kube
    namespace: str
    release: str
    reporters: frozenset[str]
    _lines: int = 0
    _at: float = 0.0

    def row(
        self, wave: int, pods: int, minutes: float, revisions: int, restarts: int,
        idle: Sequence[Sample] = (),
    ) -> Row:  # fmt: skip
        """The figures now; VmRSS and threads the medians of IDLE (samples while the daemon
        idled), or one sample now without them."""
        lines = sum(_lines(p) for p in self.logs)
        rate = (lines - self._lines) / (minutes - self._at) if minutes > self._at else 0.0
        self._lines, self._at = lines, minutes
        idle = idle or [sample(self.pid)]
        rss, threads = median(s.rss for s in idle), median_low(s.threads for s in idle)
        blocks = int(self.metrics().get(BLOCKS_METRIC, 0))
        return Row(
            wave, pods, minutes, rss / MIB, blocks, threads,
            len(os.listdir(f"/proc/{self.pid}/fd")), du(self.checkout), du(self.origin),
            self.status_bytes(), self.events(), rate, revisions, restarts,
        )  # fmt: skip

    def status_bytes(self) -> int:
        cm = self.kube.get("v1", "ConfigMap", status_name(self.release), self.namespace) or {}
        data = cm.get("data") or {}
        return sum(len(k.encode()) + len(str(v).encode()) for k, v in data.items())

    def events(self) -> int:
        listed = self.kube.list("v1", "Event").items
        return sum(
            1
            for e in listed
            if e.get("reportingComponent") in self.reporters
            or (e.get("source") or {}).get("component") in self.reporters
        )


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return 0


def reporters(scheduler_name: str) -> frozenset[str]:
    """The names the daemon's Events carry: the converger's and the scheduler's."""
    return frozenset({wk.EVENT_REPORTER, scheduler_name} - {""})


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of YS over XS (0 with fewer than two distinct XS)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if not sxx:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


@dataclass(frozen=True)
class Figure:
    label: str
    unit: str
    get: Callable[[Row], float]
    band: float  # how far it may move over the second half and still be "flat"
    steady: bool = True  # also: no value of the second half above its start + band


def figures() -> list[Figure]:
    return [
        Figure("Python blocks", "k", lambda r: r.blocks / 1000, 25, steady=False),
        Figure("threads", "", lambda r: r.threads, 2),
        Figure("open fds", "", lambda r: r.fds, 4),
        Figure("checkout minus origin", "KiB", lambda r: (r.checkout - r.origin) / 1024, 64),
        Figure("status ConfigMap", "B", lambda r: r.status, 256),
        Figure("log lines / min", "", lambda r: r.log_rate, 0, steady=False),
    ]


def half(rows: list[Row]) -> list[Row]:
    return rows[len(rows) // 2 :]


def print_rows(rows: list[Row]) -> None:
    print_head(
        f"{'wave':>4} {'Pods':>6} {'min':>5} {'VmRSS MiB':>9} {'blocks k':>8} {'thr':>4} "
        f"{'fds':>4} {'checkout KiB':>12} {'origin KiB':>10} {'status B':>8} {'Events':>6} "
        f"{'log/min':>7} {'revs':>4} {'rst':>3}"
    )
    for r in rows:
        print(
            f"{r.wave:>4} {r.pods:>6} {r.minutes:>5.1f} {r.rss:>9.1f} {r.blocks / 1000:>8.1f} "
            f"{r.threads:>4} {r.fds:>4} "
            f"{r.checkout / 1024:>12.0f} {r.origin / 1024:>10.0f} {r.status:>8} {r.events:>6} "
            f"{r.log_rate:>7.1f} {r.revisions:>4} {r.restarts:>3}"
        )


def print_baseline(rows: list[Row]) -> None:
    """The first wave's figures beside the last wave's: the baseline of the same run."""
    first, last = rows[0], rows[-1]
    print("\nbaseline (wave 1) beside the end (last wave):")
    print_head(f"  {'figure':<24}{'wave 1':>12}{'last':>12}{'change':>12}")
    pairs = [
        ("Pods bound", first.pods, last.pods),
        ("VmRSS MiB", first.rss, last.rss),
        ("Python blocks k", first.blocks / 1000, last.blocks / 1000),
        ("threads", first.threads, last.threads),
        ("open fds", first.fds, last.fds),
        ("checkout KiB", first.checkout / 1024, last.checkout / 1024),
        ("origin KiB", first.origin / 1024, last.origin / 1024),
        ("status ConfigMap B", first.status, last.status),
        ("Events held", first.events, last.events),
        ("log lines / min", first.log_rate, last.log_rate),
        ("revisions applied", first.revisions, last.revisions),
    ]
    for label, a, b in pairs:
        print(f"  {label:<24}{a:>12.1f}{b:>12.1f}{b - a:>+12.1f}")


def verdicts(rows: list[Row], event_ttl: str) -> bool:
    """Each figure's second-half slope and verdict; True when every bound is met."""
    second = half(rows)
    waves = [float(r.wave) for r in second]
    print(f"\nover the second half (waves {second[0].wave}-{second[-1].wave}):")
    ok = True
    pods = [r.pods / 1000 for r in second]
    rss = slope(pods, [r.rss for r in second])
    met = rss < RSS_BOUND
    ok = ok and met
    print(f"  VmRSS: {rss:+.3f} MiB per 1,000 Pods (bound < {RSS_BOUND} MiB): {verdict(met)}")
    for fig in figures():
        values = [float(fig.get(r)) for r in second]
        per_wave = slope(waves, values)
        fitted = per_wave * (len(values) - 1)  # the change the fit gives across the half
        top = max(values) - values[0]
        band = fig.band or max(5.0, 0.25 * sum(values) / len(values))
        met = fitted <= band and (not fig.steady or top <= band)
        ok = ok and met
        unit = f" {fig.unit}" if fig.unit else ""
        steady = f", max {top:+.1f}{unit} over its start" if fig.steady else ""
        within = "both within" if fig.steady else "within"
        print(
            f"  {fig.label}: {per_wave:+.3f}{unit} per wave (fitted {fitted:+.1f}{unit} over the "
            f"half{steady}; flat: {within} {band:.0f}{unit}): {verdict(met)}"
        )
    # Events: Kubernetes deletes them after the API server's --event-ttl, not the daemon; what
    # the daemon controls is how many it writes per Pod, which must not grow as it ages.
    first_half = rows[: len(rows) // 2 + 1]
    per_pod = [_events_per_pod(part) for part in (first_half, second)]
    met = per_pod[1] <= per_pod[0] * 1.1 + 0.01
    ok = ok and met
    print(
        f"  Events held: {slope(waves, [float(r.events) for r in second]):+.1f} per wave; "
        f"written per Pod {per_pod[0]:.2f} in the first half, {per_pod[1]:.2f} in the second "
        f"(bound: not more than 10% more); the API server expires them after {event_ttl}: "
        f"{verdict(met)}"
    )
    return ok


def _events_per_pod(rows: list[Row]) -> float:
    pods = rows[-1].pods - rows[0].pods
    return (rows[-1].events - rows[0].events) / pods if pods else 0.0
