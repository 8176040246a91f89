"""slurmctld's own OpenMetrics endpoints (Slurm 25.11+ with `MetricsType=metrics/openmetrics`):
plain HTTP on slurmctld's port, no token. `read()` fetches the endpoints one read needs, as
text; slurm_metrics.openmetrics makes the families.

Each answer is read within LIMITS (bounded_read.py), and its lines are counted as they come:
prometheus_client's parser holds every sample of a family at once (a sample is a line at the
most), so a server that sends without end costs the limit, not the daemon's memory."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import requests

from reconciler.adapters.bounded_read import (
    MIB,
    ReadLimitError,
    ReadLimits,
    read_body,
    shown_url,
)
from reconciler.errors import SlurmctldMetricsError, SlurmctldMetricsLimitError

TIMEOUT_SECONDS = 10.0  # per socket read
# The size and the time per endpoint, the lines per read (the parser holds every sample of
# the read's endpoints: 250,000 lines cost about 160 MiB and 2.6 s). /metrics/nodes is the
# big one: 10 series a node (26.05.3), 40 to 70 bytes a line with a node name of 15
# characters, so 10,000 nodes are 100,000 lines and 4 to 7 MB; a partition is 75 lines on
# /metrics/partitions, the scheduler's about 100. Both let a cluster of about 20,000 nodes
# through. slurmctld writes them from memory in milliseconds: 30 s is three times the
# per-read timeout.
LIMITS = ReadLimits(max_bytes=16 * MIB, deadline_seconds=30.0, max_lines=250_000)


class SlurmctldMetrics:
    def __init__(
        self, url: str, *, timeout: float = TIMEOUT_SECONDS, limits: ReadLimits | None = None
    ) -> None:
        """URL: slurmctld's base, e.g. http://slurm-controller.slurm.svc:6817 (a trailing
        /metrics is dropped). LIMITS: each answer's (default: the module's LIMITS)."""
        self.url = url.rstrip("/").removesuffix("/metrics")
        self._timeout = timeout
        self._limits = limits or LIMITS
        self._session = requests.Session()

    def read(self, endpoints: Iterable[str]) -> dict[str, str]:
        """Each endpoint's exposition (`nodes` -> GET /metrics/nodes); the endpoints' lines
        together within the limit (the parser holds them all)."""
        texts: dict[str, str] = {}
        lines = self._limits.max_lines
        for endpoint in endpoints:
            text = texts[endpoint] = self._get(f"{self.url}/metrics/{endpoint}", lines)
            if lines is not None:
                lines -= text.count("\n")
        return texts

    def _get(self, url: str, lines: int | None) -> str:
        shown = shown_url(url)
        try:
            with self._session.get(url, timeout=self._timeout, stream=True) as answer:
                if answer.status_code != 200:
                    raise SlurmctldMetricsError(
                        f"GET {shown}: HTTP {answer.status_code}",
                        hint="slurmctld serves /metrics with MetricsType=metrics/openmetrics in "
                        "slurm.conf (Slurm 25.11+) and no PrivateData",
                    )
                body = read_body(answer, replace(self._limits, max_lines=lines))
        except requests.RequestException as error:
            raise SlurmctldMetricsError(
                f"GET {shown}: {type(error).__name__}",
                hint="is it slurmctld's host and SlurmctldPort, and slurmctld 25.11+?",
            ) from None
        except ReadLimitError as error:
            raise SlurmctldMetricsLimitError(
                f"GET {shown}: answer cut off, {error.limit} (the limit is "
                f"{self._limits.describe()}, the lines of a read's endpoints together)",
                hint="is it slurmctld's metrics port? A cluster this big can read through "
                "slurmrestd (--slurmctld-metrics-url off)",
            ) from None
        return body.decode("utf-8", errors="replace")

    def close(self) -> None:
        self._session.close()
