"""Servers we do not control, answering without end, a byte at a time or with a gzip bomb:
slurmctld's metrics and slurmrestd's answers are cut off at their limit (size, lines, objects,
time) with a typed error naming the URL (never its credentials) and the limit, and the
daemon's memory stays near the limit. A real HTTP server on loopback sends the bodies
(tests/unit/slurm_answers.py). Each read runs under a watchdog: one with no bound would
never end."""

from __future__ import annotations

import gzip
import itertools
import logging
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from reconciler.adapters import slurmctld_metrics
from reconciler.adapters.bounded_read import ReadLimits
from reconciler.adapters.slurm import transport
from reconciler.adapters.slurm.client import SlurmRestClient
from reconciler.adapters.slurm.transport import AnswerLimits, Transport
from reconciler.adapters.slurm.versions import codec_for
from reconciler.adapters.slurmctld_metrics import SlurmctldMetrics
from reconciler.errors import (
    SlurmAnswerLimitError,
    SlurmctldMetricsLimitError,
    SlurmUnavailableError,
)
from reconciler.slurm_metrics.reader import OPENMETRICS_RETRY_SECONDS, SlurmMetricsReader
from tests.unit.slurm_answers import CannedSlurm, StaticToken, Streamed, canned_slurm
from tests.unit.test_slurm_metrics_reader import BASE, UP, Clock, served, slurm  # noqa: F401

T = TypeVar("T")
MIB = 1 << 20
SECRET = "s3cret-pass"


def within(seconds: float, call: Callable[[], T]) -> T:
    """call(), which must end within `seconds`: a read without a bound would not."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:
            outcome["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still reading after {seconds} s: the read has no bound"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def peak_growth(call: Callable[[], object]) -> tuple[int, BaseException | None]:
    """The peak of memory Python allocated during call() (bytes), and what it raised."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        try:
            within(60, call)
            raised = None
        except Exception as error:
            raised = error
        peak = tracemalloc.get_traced_memory()[1] - before
        return peak, raised
    finally:
        tracemalloc.stop()


def cut_off(call: Callable[[], object], kind: type[Exception], limit: str, held_mib: int) -> str:
    """call() fails with `kind` naming `limit`, having held under `held_mib` MiB; its text."""
    peak, raised = peak_growth(call)
    assert isinstance(raised, kind), raised
    assert limit in str(raised), raised
    assert peak < held_mib * MIB, f"{peak / MIB:.1f} MiB held"
    return str(raised)


def repeated(head: bytes, piece: bytes, total: int, tail: bytes = b"") -> Streamed:
    """`head`, then `piece` again and again up to `total` bytes: past any limit under test
    (a bound, so that a client without one ends too), then `tail`."""

    def chunks() -> Iterator[bytes]:
        yield head
        block = piece * max(1, (64 * 1024) // len(piece))
        for _ in range(total // len(block)):
            yield block
        yield tail

    return Streamed(chunks)


def dripped(piece: bytes = b" ", every: float = 0.5) -> Streamed:
    """A byte every `every` seconds, without end: each socket read gets one in time."""

    def chunks() -> Iterator[bytes]:
        yield b"{"
        for _ in itertools.count():
            time.sleep(every)
            yield piece

    return Streamed(chunks)


@pytest.fixture
def server() -> Iterator[CannedSlurm]:
    with canned_slurm() as canned:
        yield canned


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://admin:{SECRET}@")


# slurmctld's metrics


@pytest.mark.parametrize(
    "line, limit",
    [
        # long lines: the size is reached first
        (b"# HELP slurm_node_cpus " + b"x" * 1000 + b"\n", "more than 16 MiB"),
        # a series a line: the lines (what the parser holds) are reached first
        (b'slurm_node_cpus{node="node00001"} 4\n', "more than 250,000 lines"),
    ],
)
def test_slurmctld_metrics_of_50_mib_are_cut_off_and_held_at_most_to_the_limit(
    server: CannedSlurm, line: bytes, limit: str
) -> None:
    server.answers["/metrics/nodes"] = (200, repeated(b"", line, 50 * MIB))
    metrics = SlurmctldMetrics(with_credentials(server.url))
    said = cut_off(lambda: metrics.read(["nodes"]), SlurmctldMetricsLimitError, limit, 24)
    assert f"{server.url}/metrics/nodes" in said and SECRET not in said and "admin" not in said


def test_slurmctld_metrics_gzip_bomb_is_cut_off_at_the_limit(server: CannedSlurm) -> None:
    bomb = gzip.compress(b"# " + b"x" * (200 * MIB) + b"\n")  # about 200 KB sent
    server.answers["/metrics/nodes"] = (
        200, Streamed(lambda: [bomb], headers={"Content-Encoding": "gzip"}),
    )  # fmt: skip
    read = SlurmctldMetrics(server.url).read
    cut_off(lambda: read(["nodes"]), SlurmctldMetricsLimitError, "more than 16 MiB", 24)


def test_slurmctld_metrics_dripped_end_at_the_deadline(
    server: CannedSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        slurmctld_metrics, "LIMITS", ReadLimits(16 * MIB, 2.0, 250_000), raising=False
    )
    server.answers["/metrics/nodes"] = (200, dripped(b"#"))
    metrics = SlurmctldMetrics(server.url, timeout=5)
    started = time.monotonic()
    with pytest.raises(SlurmctldMetricsLimitError, match="not whole after 2 s"):
        within(15, lambda: metrics.read(["nodes"]))
    assert time.monotonic() - started < 4


def test_openmetrics_cut_off_are_a_failed_read_logged_once_and_rest_still_serves(
    slurm: CannedSlurm,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    slurm.answers["/metrics/nodes"] = (
        200, repeated(b"", b"# HELP slurm_nodes " + b"x" * 1000 + b"\n", 20 * MIB),
    )  # fmt: skip
    clock = Clock()
    api = SlurmRestClient(Transport(slurm.url, StaticToken(), timeout=5), codec_for("v0.0.42"))
    reader = SlurmMetricsReader(api, openmetrics=SlurmctldMetrics(slurm.url), clock=clock)
    with caplog.at_level(logging.INFO):
        reader.refresh()
        clock.now += OPENMETRICS_RETRY_SECONDS + 1  # asked again, cut off again
        reader.refresh()
    found = served(reader, clock)
    assert found[("reconciler_slurm_snapshot_failures_total", ())] == 2
    assert found[("slurm_controller_up", ())] == 1  # slurmrestd's read served the rest
    assert found[("reconciler_slurm_metrics_source", (("source", "rest"),))] == 1
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "cut off" in warned[0] and "16 MiB" in warned[0], warned


# slurmrestd's answers


def client_of(server: CannedSlurm) -> SlurmRestClient:
    """With the module's limits (transport.DEFAULT_LIMITS; a test lowers them to be quick)."""
    http = Transport(with_credentials(server.url), StaticToken(), timeout=5)
    return SlurmRestClient(http, codec_for("v0.0.42"))


def test_a_slurmrestd_answer_without_end_is_an_error_of_the_call(server: CannedSlurm) -> None:
    """Read whole (`diag()`): cut off at 64 MiB, and held no more than that."""
    server.answers[f"{BASE}/diag"] = (
        200, repeated(b'{"statistics": {', b'"parts_packed": 1, ', 100 * MIB),
    )  # fmt: skip
    client = client_of(server)
    said = cut_off(client.diag, SlurmAnswerLimitError, "more than 64 MiB", 80)
    assert issubclass(SlurmAnswerLimitError, SlurmUnavailableError)  # retried as slurmrestd down
    assert f"GET {BASE}/diag" in said and server.url in said
    assert SECRET not in said and "admin" not in said


def test_a_whole_job_list_is_decoded_as_it_arrives(server: CannedSlurm) -> None:
    """`jobs()` (plan's live read, the scheduler's read after a gap): 7,019 jobs were a
    323 MB answer in the 10,000-Pod run, past any cap a whole read could have under the
    Deployment's 1 GiB (a whole read holds about 15 times its JSON). Each job is decoded as
    it arrives: 5,000 jobs of 10 KiB (50 MiB of JSON) are read, holding a fraction of it."""
    job = b'{"job_id": 7, "name": "x", "job_state": ["RUNNING"], "script": "%s"}, '
    piece = job % (b"#" * (10 * 1024))
    body = repeated(b'{"jobs": [', piece, 5000 * len(piece), piece.rstrip(b", ") + b"]}")
    server.answers[f"{BASE}/jobs"] = (200, body)
    peak, raised = peak_growth(client_of(server).jobs)
    assert raised is None, raised
    assert peak < 16 * MIB, f"{peak / MIB:.1f} MiB held for 50 MiB of JSON"


@pytest.mark.parametrize(
    "limits, path, call",
    [
        # read whole
        (AnswerLimits(answer=ReadLimits(64 * MIB, 2.0)), "/ping", SlurmRestClient.ping),
        # decoded as it arrives
        (
            AnswerLimits(listing=ReadLimits(2048 * MIB, 2.0)), "/jobs",
            lambda client: client.jobs_where(lambda job: True),
        ),
    ],
)  # fmt: skip
def test_a_dripped_slurmrestd_answer_ends_at_the_deadline(
    server: CannedSlurm,
    monkeypatch: pytest.MonkeyPatch,
    limits: AnswerLimits,
    path: str,
    call: Callable[[SlurmRestClient], object],
) -> None:
    """A byte every 0.5 s: each socket read is in time (5 s), the answer never whole."""
    monkeypatch.setattr(transport, "DEFAULT_LIMITS", limits, raising=False)
    server.answers[BASE + path] = (200, dripped())
    client = client_of(server)
    started = time.monotonic()
    with pytest.raises(SlurmAnswerLimitError, match="not whole after 2 s"):
        within(15, lambda: call(client))
    assert time.monotonic() - started < 4


def test_a_streamed_job_list_of_endless_objects_is_cut_off(
    server: CannedSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoded as it arrives (`jobs_where`, `job_summaries`): each `{}` would be an object
    held (500,000 at the most; 10,000 here, to be quick)."""
    monkeypatch.setattr(transport, "DEFAULT_LIMITS", AnswerLimits(listed_items=10_000),
                        raising=False)  # fmt: skip
    server.answers[f"{BASE}/jobs"] = (200, repeated(b'{"jobs": [', b"{}, ", 4 * MIB, b"{}]}"))
    client = client_of(server)
    with pytest.raises(SlurmAnswerLimitError, match="more than 10,000 objects"):
        within(60, client.job_summaries)
    with pytest.raises(SlurmAnswerLimitError, match="more than 10,000 objects"):
        within(60, lambda: client.jobs_where(lambda job: True))


def test_a_streamed_job_list_with_a_value_without_end_is_cut_off(server: CannedSlurm) -> None:
    server.answers[f"{BASE}/jobs"] = (
        200, repeated(b'{"jobs": [{"name": "', b"a", 48 * MIB, b'"}]}'),
    )  # fmt: skip
    client = client_of(server)
    limit = "a value of more than 16,777,216 characters"
    cut_off(client.job_summaries, SlurmAnswerLimitError, limit, 120)


def test_a_streamed_job_list_over_its_size_is_cut_off(
    server: CannedSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = AnswerLimits(listing=ReadLimits(4 * MIB, 60.0))  # 2 GiB: too long to send here
    monkeypatch.setattr(transport, "DEFAULT_LIMITS", limits, raising=False)
    server.answers[f"{BASE}/jobs"] = (
        200, repeated(b'{"jobs": [', b'{"job_id": 1}, ', 8 * MIB, b"{}]}"),
    )  # fmt: skip
    client = client_of(server)
    with pytest.raises(SlurmAnswerLimitError, match="more than 4 MiB"):
        within(60, client.job_summaries)
