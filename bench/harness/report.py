"""What every benchmark prints: progress lines, the machine line, percentiles, table rows and
targets. The figures go to stdout, progress to stderr."""

from __future__ import annotations

import math
import os
import platform
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime


def say(text: str, *, prefix: str = "bench", clock: bool = False) -> None:
    """Progress on stderr (with CLOCK, the time of day to the millisecond after PREFIX)."""
    head = f"{prefix} {datetime.now(UTC):%H:%M:%S.%f}"[:-3] if clock else prefix
    print(f"{head}: {text}", file=sys.stderr, flush=True)


def machine_line(
    *, after_python: str = "", before_load: str = "", load: float | None = None
) -> str:
    """`python X.Y.Z[, AFTER_PYTHON], N CPUs, [BEFORE_LOAD]load average L at start`."""
    load = os.getloadavg()[0] if load is None else load
    return (
        f"python {platform.python_version()}{after_python}, {os.cpu_count()} CPUs, "
        f"{before_load}load average {load:.2f} at start"
    )


def print_head(head: str) -> None:
    """A table's header line and a rule as long as it."""
    print(head)
    print("-" * len(head))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f}"


def mib(n: float) -> str:
    return f"{n / 2**20:7.1f}"


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def spread(values: list[float]) -> tuple[float, float, float, float]:
    return percentile(values, 50), percentile(values, 90), percentile(values, 99), max(values)


HEADER = "".join(f"{h:>8}" for h in ("p50", "p90", "p99", "max"))


def fmt_row(label: str, values: Iterable[float], width: int = 34) -> str:
    return f"  {label:<{width}}" + "".join(f"{v:>8.3f}" for v in values)


def ratio_text(numerator: float, denominator: float | None) -> tuple[str, float | None]:
    if not denominator:
        return "n/a", None
    ratio = numerator / denominator
    return f"{numerator:.1f} / {denominator:.1f} = {ratio:.2f}", ratio


@dataclass
class Target:
    label: str
    value: str
    met: bool


def verdict(met: bool) -> str:
    return "MET" if met else "MISSED"
