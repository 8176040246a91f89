"""The Slurm series as the daemon serves them: the reader against a real HTTP server that
answers as slurmrestd 24.11.5 did (captured bodies, tests/unit/slurm_answers.py), the snapshot
kept across failed reads with its age, and the daemon's /metrics with and without a reader."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import ApiClient
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm.client import SlurmRestClient
from reconciler.adapters.slurm.transport import Transport
from reconciler.adapters.slurm.versions import codec_for
from reconciler.daemon.converge import Converger
from reconciler.daemon.run import Daemon, RunSettings
from reconciler.slurm_metrics.collector import SlurmCollector
from reconciler.slurm_metrics.reader import PAUSE_FACTOR, SlurmMetricsReader
from reconciler.sources.directory import DirectorySource
from tests.unit.no_cluster import unconnected
from tests.unit.slurm_answers import CannedSlurm, StaticToken, canned_slurm

CAPTURED = json.loads((Path(__file__).parent / "slurm_bodies" / "v0.0.42.json").read_text())
BASE = "/slurm/v0.0.42"
UP = {"pings": [{"hostname": "c", "pinged": "UP", "responding": True}]}
DOWN = {"pings": [{"hostname": "c", "pinged": "DOWN", "responding": False}]}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def slurm() -> Iterator[CannedSlurm]:
    with canned_slurm() as server:
        server.answers.update({
            f"{BASE}/ping": (200, UP),
            f"{BASE}/nodes": (200, {"nodes": [CAPTURED["node_draining"]], "last_update": 1}),
            f"{BASE}/jobs/state/": (200, {"jobs": [{"job_id": "2", "state": ["RUNNING"]}]}),
            f"{BASE}/jobs": (200, {"jobs": [CAPTURED["job_running"]], "last_update": 1}),
            f"{BASE}/diag": (200, CAPTURED["diag"]),
        })  # fmt: skip
        yield server


def reader_of(server: CannedSlurm, clock: Clock, **settings: int) -> SlurmMetricsReader:
    api = SlurmRestClient(Transport(server.url, StaticToken(), timeout=5), codec_for("v0.0.42"))
    return SlurmMetricsReader(api, clock=clock, **settings)


def scrape(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def served(reader: SlurmMetricsReader, clock: Clock) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry()
    registry.register(SlurmCollector(reader.view, clock=clock))
    return scrape(registry)


def test_a_read_is_served_with_its_age_until_the_next(slurm: CannedSlurm) -> None:
    clock = Clock()
    reader = reader_of(slurm, clock)
    assert served(reader, clock) == {}  # nothing read yet: nothing claimed
    reader.refresh()
    clock.now += 12.5
    found = served(reader, clock)
    assert found[("slurm_controller_up", ())] == 1
    assert found[("reconciler_slurm_snapshot_age_seconds", ())] == 12.5
    assert found[("reconciler_slurm_snapshot_failures_total", ())] == 0
    assert found[("slurm_nodes", (("reason", "reconciler"), ("state", "draining")))] == 1
    assert found[("slurm_jobs", (("partition", "all"), ("state", "running")))] == 1
    assert found[("slurm_scheduler_jobs_started_total", ())] == 1
    assert [path.split("?")[0] for _, path in slurm.requests] == [
        f"{BASE}/ping", f"{BASE}/nodes", f"{BASE}/jobs/state/", f"{BASE}/jobs", f"{BASE}/diag",
    ]  # fmt: skip
    slurm.requests.clear()
    served(reader, clock)
    assert slurm.requests == [], "a scrape asked Slurm"


def test_a_failed_read_keeps_the_last_one_and_counts(
    slurm: CannedSlurm, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    reader = reader_of(slurm, clock)
    reader.refresh()
    slurm.answers[f"{BASE}/jobs"] = (500, {"errors": [{"error_number": 1, "error": "boom"}]})
    clock.now += 30
    with caplog.at_level(logging.WARNING):
        reader.refresh()
        clock.now += 30
        reader.refresh()
    found = served(reader, clock)
    assert found[("slurm_controller_up", ())] == 1  # slurmctld answered the ping
    assert found[("reconciler_slurm_snapshot_failures_total", ())] == 2
    assert found[("reconciler_slurm_snapshot_age_seconds", ())] == 60
    assert found[("slurm_jobs", (("partition", "all"), ("state", "running")))] == 1
    said = [r.getMessage() for r in caplog.records if "reading Slurm failed" in r.getMessage()]
    assert len(said) == 1, "a Slurm that keeps failing is logged once"

    slurm.answers[f"{BASE}/ping"] = (200, DOWN)
    reader.refresh()
    assert served(reader, clock)[("slurm_controller_up", ())] == 0
    slurm.answers.update({f"{BASE}/ping": (200, UP), f"{BASE}/jobs": (200, {"jobs": []})})
    reader.refresh()
    found = served(reader, clock)
    assert found[("slurm_controller_up", ())] == 1
    assert found[("reconciler_slurm_snapshot_age_seconds", ())] == 0
    assert ("slurm_jobs", (("partition", "all"), ("state", "running"))) not in found


def test_a_long_read_is_not_repeated_before_three_times_its_length(slurm: CannedSlurm) -> None:
    """So a cluster whose read outgrows the interval costs at most a quarter of the time."""
    clock = Clock()
    reader = reader_of(slurm, clock)
    first = reader.refresh()
    assert first.read_at is not None and first.read_seconds > 0
    slurm.requests.clear()
    clock.now = first.read_at + PAUSE_FACTOR * first.read_seconds * 0.9
    assert reader.refresh() is first
    assert slurm.requests == []
    clock.now = first.read_at + PAUSE_FACTOR * first.read_seconds * 1.1
    assert reader.refresh().read_at == clock.now
    assert len(slurm.requests) == 5


def test_above_the_job_detail_limit_jobs_are_counted_per_state_without_the_whole_list(
    slurm: CannedSlurm, caplog: pytest.LogCaptureFixture
) -> None:
    """The whole job list is what loads slurmctld and slurmrestd: above the limit
    only the state list is read, every entry counted (an array task too), and said once."""
    states = [{"job_id": str(i), "state": ["PENDING"]} for i in range(1, 4)]
    states.append({"job_id": "9_1", "state": ["RUNNING"]})
    slurm.answers[f"{BASE}/jobs/state/"] = (200, {"jobs": states})
    clock = Clock()
    reader = reader_of(slurm, clock, job_detail_limit=3)
    with caplog.at_level(logging.INFO):
        reader.refresh()
        clock.now += 30
        reader.refresh()
    paths = [path.split("?")[0] for _, path in slurm.requests]
    assert f"{BASE}/jobs" not in paths and paths.count(f"{BASE}/jobs/state/") == 2
    found = served(reader, clock)
    assert found[("slurm_jobs", (("partition", "*"), ("state", "pending")))] == 3
    assert found[("slurm_jobs", (("partition", "*"), ("state", "running")))] == 1
    assert not [key for key in found if key[0] in ("slurm_jobs_pending", "slurm_jobs_held")]
    assert found[("reconciler_slurm_metrics_job_detail", ())] == 0
    said = [r.getMessage() for r in caplog.records if "counted per state only" in r.getMessage()]
    assert len(said) == 1 and "4 jobs, more than 3" in said[0], said

    slurm.answers[f"{BASE}/jobs/state/"] = (200, {"jobs": states[:3]})  # back to the limit
    clock.now += 30
    with caplog.at_level(logging.INFO):
        reader.refresh()
    found = served(reader, clock)
    assert found[("slurm_jobs", (("partition", "all"), ("state", "running")))] == 1
    assert found[("reconciler_slurm_metrics_job_detail", ())] == 1
    assert any("read in full again" in r.getMessage() for r in caplog.records)


def test_a_slurm_never_read_ages_from_the_first_try() -> None:
    """slurmrestd unreachable from the start: up 0, and an age that grows, for the alerts."""
    clock = Clock()
    api = SlurmRestClient(
        Transport("http://127.0.0.1:9", StaticToken(), timeout=5), codec_for("v0.0.42")
    )
    reader = SlurmMetricsReader(api, clock=clock)
    reader.refresh()
    clock.now += 90
    found = served(reader, clock)
    assert found[("slurm_controller_up", ())] == 0
    assert found[("reconciler_slurm_snapshot_age_seconds", ())] == 90
    assert not any(name == "slurm_nodes" for name, _ in found)


def test_the_daemon_serves_the_series_only_where_it_reads_slurm(
    slurm: CannedSlurm, tmp_path: Path
) -> None:
    (tmp_path / "values.yaml").write_text("compute: {nodes: {}}\n")
    converger = Converger(unconnected, Kube(ApiClient()))  # never called here
    daemon = Daemon(DirectorySource(tmp_path), converger, RunSettings(listen_port=0))
    try:
        assert "\nslurm_" not in daemon.answer("/metrics")[1].decode()  # no reader attached
        daemon.attach(slurm_metrics=reader_of(slurm, Clock()))
        daemon.lead_with(lambda: False)  # a follower reads nothing and claims nothing
        daemon._read_slurm()
        assert slurm.requests == []
        assert "\nslurm_" not in daemon.answer("/metrics")[1].decode()
        daemon.lead_with(lambda: True)
        daemon._read_slurm()
        text = daemon.answer("/metrics")[1].decode()
        assert 'slurm_nodes{reason="reconciler",state="draining"} 1.0' in text
        assert "reconciler_leader 1.0" in text  # the daemon's own series are still there
    finally:
        daemon.stop()
