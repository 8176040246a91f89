"""The Prometheus collector of the Slurm families: serves what the reader kept, with the age
of that snapshot, at scrape time. A scrape costs the kept series, never a request to Slurm."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from reconciler.slurm_metrics.figures import Family
from reconciler.slurm_metrics.reader import SOURCES, SlurmView


class SlurmCollector(Collector):
    def __init__(
        self, view: Callable[[], SlurmView | None], *, clock: Callable[[], float] = time.time
    ) -> None:
        self._view = view
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        view = self._view()
        if view is None:  # this replica does not read Slurm (a follower), or not yet
            return
        yield GaugeMetricFamily(
            "slurm_controller_up",
            "1 when slurmctld answered the last read (its OpenMetrics, or a ping through "
            "slurmrestd), else 0",
            value=1.0 if view.controller_up else 0.0,
        )
        source = GaugeMetricFamily(
            "reconciler_slurm_metrics_source",
            "Where the last read of Slurm went (value 1): openmetrics (slurmctld's own "
            "endpoints) or rest (slurmrestd)",
            labels=["source"],
        )
        for name in SOURCES:
            source.add_metric([name], 1.0 if name == view.source else 0.0)
        yield source
        yield GaugeMetricFamily(
            "reconciler_slurm_metrics_job_detail",
            "1 when the job series have partitions and pending reasons; 0 when more jobs than "
            "--slurm-metrics-job-detail-limit were counted per state only (through slurmrestd)",
            value=1.0 if view.job_detail else 0.0,
        )
        yield GaugeMetricFamily(
            "reconciler_slurm_snapshot_age_seconds",
            "Seconds since the Slurm series were last read completely (since the first try "
            "while none has completed)",
            value=view.age(self._clock()),
        )
        yield GaugeMetricFamily(
            "reconciler_slurm_snapshot_read_seconds",
            "How long the last complete read of Slurm took (requests and figures)",
            value=view.read_seconds,
        )
        yield CounterMetricFamily(
            "reconciler_slurm_snapshot_failures",
            "Reads of Slurm for these series that failed (the last complete one is served)",
            value=float(view.failures),
        )
        for family in view.families:
            yield prometheus_family(family)


def prometheus_family(family: Family) -> Metric:
    kind = CounterMetricFamily if family.kind == "counter" else GaugeMetricFamily
    metric = kind(family.name, family.help, labels=list(family.labels))
    for labels, value in family.samples:
        metric.add_metric(list(labels), value)
    return metric
