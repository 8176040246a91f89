"""The latency metrics' plumbing: the Slurm client's observer, the scheduler's bind hook, and
what DaemonMetrics makes of them. Fakes stand in for HTTP and Kubernetes."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client import ApiClient
from prometheus_client import generate_latest

from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm.client import SlurmRestClient
from reconciler.adapters.slurm.model import JobSpec, JobUpdate
from reconciler.adapters.slurm.transport import Response, wire_errors
from reconciler.adapters.slurm.v0038 import CODEC as V0038
from reconciler.daemon.converge import Converger, Outcome
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.daemon.run import Daemon, RunSettings
from reconciler.errors import KubeApiError, SlurmApiError, SlurmArgumentError, SlurmUnavailableError
from reconciler.scheduler import clients as clients_module
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.decide.packing_decide import Fragmentation
from reconciler.scheduler.decide.pod_decide import Bind
from reconciler.scheduler.effects import seconds_since_created
from reconciler.scheduler.loop import PodScheduler
from reconciler.scheduler.settings import SchedulerSettings
from reconciler.sources import Revision
from reconciler.sources.directory import DirectorySource
from tests.unit.no_cluster import unconnected
from tests.unit.slurm_answers import listed

Seen = list[tuple[str, float, bool]]
CREATED = "2024-05-01T12:00:00Z"
CREATED_AT = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC).timestamp()


class FakeTransport:
    """Answers each request with the next of `answers`: (status, body) or an exception."""

    def __init__(self, *answers: tuple[int, dict[str, Any]] | Exception) -> None:
        self._answers = list(answers)
        self.sent: list[tuple[str, str]] = []

    def request(self, method: str, path: str, **_: Any) -> Response:
        self.sent.append((method, path))
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        return Response(status, body, wire_errors(body))

    def listing(self, path: str, key: str, reduce: Any, **kwargs: Any) -> Response:
        return listed(self.request("GET", path, **kwargs), key, reduce)

    def close(self) -> None:
        pass


def client(*answers: tuple[int, dict[str, Any]] | Exception) -> tuple[SlurmRestClient, Seen]:
    seen: Seen = []
    api = SlurmRestClient(
        FakeTransport(*answers),  # type: ignore[arg-type]
        V0038,
        observe=lambda op, seconds, ok: seen.append((op, seconds, ok)),
    )
    return api, seen


def outcomes(seen: Seen) -> list[tuple[str, bool]]:
    assert all(seconds >= 0 for _, seconds, _ in seen)
    return [(op, ok) for op, _, ok in seen]


SPEC = JobSpec(script="#!/bin/sh\ntrue\n", environment={"PATH": "/bin"})
ERROR_2017 = {"errors": [{"error_number": 2017, "error": "Invalid job id specified"}]}


# ---- the Slurm client's observer -----------------------------------------------------------


def test_each_operation_is_observed_by_its_method_name() -> None:
    api, seen = client(
        (200, {"job_id": 7}), (200, {"jobs": []}), (304, {}), (200, {}), (200, {}),
        (200, {"nodes": [{"name": "n1"}]}), (200, {"meta": {}}),
    )  # fmt: skip
    assert api.submit(SPEC).job_id == 7
    assert api.jobs().items == ()
    assert api.jobs(since=100) is None  # 304: unchanged, a success
    api.update_job(7, JobUpdate(priority=5))
    api.cancel(7)
    assert api.node("n1") is not None
    api.ping()
    assert outcomes(seen) == [
        ("submit", True), ("jobs", True), ("jobs", True), ("update_job", True),
        ("cancel", True), ("node", True), ("ping", True),
    ]  # fmt: skip


def test_slurm_errors_inside_a_200_and_http_errors_are_failures() -> None:
    api, seen = client((200, ERROR_2017), (500, ERROR_2017))
    with pytest.raises(SlurmApiError):
        api.cancel(7)
    with pytest.raises(SlurmApiError):
        api.jobs()
    assert outcomes(seen) == [("cancel", False), ("jobs", False)]


def test_a_transport_failure_is_a_failure() -> None:
    unreachable = SlurmUnavailableError("slurmrestd unreachable", endpoint="POST /job/submit")
    api, seen = client(unreachable)
    with pytest.raises(SlurmUnavailableError):
        api.submit(SPEC)
    assert outcomes(seen) == [("submit", False)]


def test_answers_that_are_not_failures() -> None:
    """No such job is an answer; a submit with errors *and* a job id made the job."""
    held = {"job_id": 8, "errors": [{"error_number": 2042, "error": "held"}]}
    api, seen = client((500, ERROR_2017), (200, held))
    assert api.job(7) is None
    assert api.submit(SPEC).warnings
    assert outcomes(seen) == [("job", True), ("submit", True)]


def test_an_argument_refused_before_sending_is_not_a_request() -> None:
    api, seen = client()
    with pytest.raises(SlurmArgumentError):
        api.cancel(0)
    with pytest.raises(SlurmArgumentError):
        api.submit(JobSpec(script="x", environment={}))
    assert seen == []


def test_without_an_observer_nothing_is_timed() -> None:
    api = SlurmRestClient(FakeTransport((200, {"jobs": []})), V0038)  # type: ignore[arg-type]
    assert api.jobs().items == ()


def test_slurm_clients_relay_to_an_observer_set_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """`reconciler run` builds the clients before its metrics: the hook is set afterwards, and
    reaches the operator's client and the per-user clients alike."""
    hooks: list[Any] = []

    def fake_connect(url: str, tokens: Any, *, observe: Any = None, **_: Any) -> Any:
        hooks.append(observe)
        return SimpleNamespace(close=lambda: None, capabilities=frozenset(), api_version="v0")

    monkeypatch.setattr(clients_module, "connect", fake_connect)
    operator = SimpleNamespace(user="root", token=lambda: "t")
    key = Path("/nonexistent/jwt.key")  # read at the first token only
    clients = SlurmClients("http://slurm", operator, jwt_key=key)  # type: ignore[arg-type]
    hooks[0]("jobs", 0.1, True)  # no observer yet: dropped
    seen: Seen = []
    clients.observe = lambda op, seconds, ok: seen.append((op, seconds, ok))
    hooks[0]("jobs", 0.2, True)
    clients.for_user("1001")
    hooks[1]("submit", 0.3, False)
    assert seen == [("jobs", 0.2, True), ("submit", 0.3, False)]


# ---- the bind hook -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stamp", "now", "expected"),
    [
        (CREATED, CREATED_AT + 2.5, 2.5),
        ("2024-05-01T14:00:00+02:00", CREATED_AT + 1, 1.0),
        (CREATED, CREATED_AT - 3, 0.0),  # the API server's clock ahead of ours
        (None, CREATED_AT, None),
        ("yesterday", CREATED_AT, None),
        ("2024-05-01T12:00:00", CREATED_AT, None),  # no zone: unknowable
    ],
)
def test_seconds_since_created(stamp: str | None, now: float, expected: float | None) -> None:
    meta = {"name": "p"} if stamp is None else {"name": "p", "creationTimestamp": stamp}
    assert seconds_since_created({"metadata": meta}, now) == expected


class FakeKube:
    def __init__(self, bind_status: int | None = None) -> None:
        self._bind_status = bind_status
        self.bound: list[tuple[str, str]] = []

    def bind_pod(self, namespace: str, pod: str, node: str, **_: Any) -> None:
        if self._bind_status is not None:
            raise KubeApiError("conflict", status=self._bind_status)
        self.bound.append((pod, node))

    def create_event(self, regarding: Mapping[str, Any], **_: Any) -> None:
        pass


def scheduler_with(kube: FakeKube, now: float) -> PodScheduler:
    settings = SchedulerSettings(name="s", release="r", namespace="ns", watch_namespaces=None)
    slurm: Any = SimpleNamespace(observe=None, requests=Counter())
    scheduler = PodScheduler(kube, slurm, settings, hooks_key=b"k", clock=lambda: now)  # type: ignore[arg-type]
    scheduler._on_slurmd_pod("ADDED", {"metadata": {"name": "slurm-0"}, "spec": {"nodeName": "n0"}})
    scheduler._on_node("ADDED", {"metadata": {"name": "n0", "labels": {}}})
    return scheduler


def pod(stamp: str | None = CREATED) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "u1"}
    if stamp:
        meta["creationTimestamp"] = stamp
    return {"metadata": meta, "spec": {"schedulerName": "s"}}


def test_a_bind_reports_the_seconds_since_the_pod_was_created() -> None:
    kube = FakeKube()
    scheduler = scheduler_with(kube, CREATED_AT + 1.5)
    waited: list[float] = []
    scheduler.observe(bind=waited.append)
    bind = scheduler._pod_steps.bind
    try:
        bind(pod(), Bind(job_id=3, slurm_node="slurm-0"))
        bind(pod(stamp=None), Bind(job_id=3, slurm_node="slurm-0"))  # not measured
    finally:
        scheduler.stop()
    assert kube.bound == [("p", "n0"), ("p", "n0")]
    assert waited == [1.5]
    assert scheduler.counters.bound == 2


def test_a_bind_that_was_done_already_is_not_measured_again() -> None:
    scheduler = scheduler_with(FakeKube(bind_status=409), CREATED_AT + 1.5)
    waited: list[float] = []
    scheduler.observe(bind=waited.append)
    try:
        scheduler._pod_steps.bind(pod(), Bind(job_id=3, slurm_node="slurm-0"))
    finally:
        scheduler.stop()
    assert waited == [] and scheduler.counters.bound == 0


# ---- DaemonMetrics -------------------------------------------------------------------------


def test_daemon_metrics_fed_through_the_scheduler_hooks() -> None:
    metrics = DaemonMetrics()
    scheduler = scheduler_with(FakeKube(), CREATED_AT + 0.7)
    scheduler.observe(bind=metrics.observe_bind, slurm=metrics.observe_slurm)
    try:
        scheduler._pod_steps.bind(pod(), Bind(job_id=3, slurm_node="slurm-0"))
    finally:
        scheduler.stop()
    relay = scheduler._slurm.observe
    assert relay is not None
    relay("submit", 0.02, True)
    relay("submit", 0.04, False)
    relay("jobs", 0.01, True)

    def value(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    assert value("reconciler_scheduler_pod_bind_seconds_count") == 1
    assert value("reconciler_scheduler_pod_bind_seconds_sum") == pytest.approx(0.7)
    assert value("reconciler_scheduler_pod_bind_seconds_bucket", le="0.5") == 0
    assert value("reconciler_scheduler_pod_bind_seconds_bucket", le="1.0") == 1
    assert value("reconciler_slurm_request_seconds_count", operation="submit") == 2
    assert value("reconciler_slurm_request_seconds_sum", operation="submit") == pytest.approx(0.06)
    assert value("reconciler_slurm_request_seconds_count", operation="jobs") == 1
    assert value("reconciler_slurm_request_errors_total", operation="submit") == 1
    assert value("reconciler_slurm_request_errors_total", operation="jobs") is None


def test_the_histograms_cover_50_ms_to_5_minutes() -> None:
    metrics = DaemonMetrics()
    metrics.observe_bind(0.01)
    metrics.observe_bind(299)
    buckets = {
        s.labels["le"]: s.value
        for family in metrics.registry.collect()
        if family.name == "reconciler_scheduler_pod_bind_seconds"
        for s in family.samples
        if s.name.endswith("_bucket")
    }
    assert buckets["0.05"] == 1 and buckets["300.0"] == 2 and buckets["+Inf"] == 2


def test_the_bin_packed_partitions_fragmentation_is_a_gauge_once_known() -> None:
    metrics = DaemonMetrics()
    figure: list[Fragmentation] = []
    metrics.watch_packing(lambda: figure[0] if figure else None)
    assert b"reconciler_scheduler_packed" not in generate_latest(metrics.registry)
    figure.append(Fragmentation(nodes=4, idle_nodes=2, partly_used_nodes=1, stranded_gpus=3))
    text = generate_latest(metrics.registry).decode()
    assert "reconciler_scheduler_packed_idle_nodes 2.0" in text
    assert "reconciler_scheduler_packed_stranded_gpus 3.0" in text


def test_the_process_memory_fds_and_pythons_blocks_are_served() -> None:
    """What a months-long run must keep flat, under the names Python exporters use, and the
    blocks Python's allocator holds, which follow what the daemon keeps."""
    metrics = DaemonMetrics()

    def value(name: str) -> float:
        found = metrics.registry.get_sample_value(name)
        assert found is not None, f"{name} is not served"
        return found

    assert value("process_resident_memory_bytes") > 0
    assert value("process_open_fds") > 0
    before = value("reconciler_python_allocated_blocks")
    kept = [object() for _ in range(50_000)]
    assert value("reconciler_python_allocated_blocks") >= before + len(kept)


class BusyConverger(Converger):
    """Converges nothing: spends `cpu` seconds of its thread's CPU and says unchanged."""

    def __init__(self) -> None:
        super().__init__(unconnected, Kube(ApiClient()))  # Kubernetes is never called
        self.cpu = 0.0

    def converge(self, revision: Revision, *, resync: bool = False) -> Outcome:
        started, wall = time.thread_time(), time.monotonic()
        while time.thread_time() - started < self.cpu:
            pass
        return Outcome(revision, "unchanged", seconds=time.monotonic() - wall)


def test_a_convergence_is_timed_and_its_cpu_counted_by_kind(tmp_path: Path) -> None:
    """A revision converged for the first time is a `revision`, the same one again a `resync`:
    the resync's duration and CPU are what every --resync costs."""
    (tmp_path / "values.yaml").write_text("compute: {nodes: {}}\n")
    converger = BusyConverger()
    daemon = Daemon(DirectorySource(tmp_path), converger, RunSettings(listen_port=0))
    revision = Revision("abc", tmp_path, "directory")
    try:
        text = generate_latest(daemon.metrics.registry).decode()
        assert 'reconciler_converge_duration_seconds_count{kind="resync"} 0.0' in text
        assert 'reconciler_converge_cpu_seconds_total{kind="revision"} 0.0' in text
        daemon._converge(revision, resync=False)
        converger.cpu = 0.05
        daemon._converge(revision, resync=True)
        daemon._converge(revision, resync=True)
    finally:
        daemon.stop()

    def value(name: str, kind: str) -> float:
        return daemon.metrics.registry.get_sample_value(name, {"kind": kind}) or 0.0

    assert value("reconciler_converge_duration_seconds_count", "revision") == 1
    assert value("reconciler_converge_duration_seconds_count", "resync") == 2
    assert value("reconciler_converge_duration_seconds_sum", "resync") >= 0.1
    assert value("reconciler_converge_cpu_seconds_total", "revision") < 0.05
    assert 0.1 <= value("reconciler_converge_cpu_seconds_total", "resync") < 0.5
    # The outcome's own histogram is unchanged: three unchanged convergences.
    states = daemon.metrics.registry.get_sample_value(
        "reconciler_reconcile_duration_seconds_count", {"state": "unchanged"}
    )
    assert states == 3
