"""slurmctld's own OpenMetrics endpoints (Slurm 25.11+ with `MetricsType=metrics/openmetrics`):
plain HTTP on slurmctld's port, no token. `read()` fetches the endpoints one read needs, as
text; slurm_metrics.openmetrics makes the families."""

from __future__ import annotations

from collections.abc import Iterable

import requests

from reconciler.errors import SlurmctldMetricsError

TIMEOUT_SECONDS = 10.0


class SlurmctldMetrics:
    def __init__(self, url: str, *, timeout: float = TIMEOUT_SECONDS) -> None:
        """URL: slurmctld's base, e.g. http://slurm-controller.slurm.svc:6817 (a trailing
        /metrics is dropped)."""
        self.url = url.rstrip("/").removesuffix("/metrics")
        self._timeout = timeout
        self._session = requests.Session()

    def read(self, endpoints: Iterable[str]) -> dict[str, str]:
        """Each endpoint's exposition (`nodes` -> GET /metrics/nodes)."""
        return {endpoint: self._get(f"{self.url}/metrics/{endpoint}") for endpoint in endpoints}

    def _get(self, url: str) -> str:
        try:
            answer = self._session.get(url, timeout=self._timeout)
        except requests.RequestException as error:
            raise SlurmctldMetricsError(
                f"GET {url}: {type(error).__name__}",
                hint="is it slurmctld's host and SlurmctldPort, and slurmctld 25.11+?",
            ) from None
        if answer.status_code != 200:
            raise SlurmctldMetricsError(
                f"GET {url}: HTTP {answer.status_code}",
                hint="slurmctld serves /metrics with MetricsType=metrics/openmetrics in "
                "slurm.conf (Slurm 25.11+) and no PrivateData",
            )
        return answer.text

    def close(self) -> None:
        self._session.close()
