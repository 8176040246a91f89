"""The metrics' job read (`job_summaries()`): each version's job summary reads a job as its
full decode does, so the figures are the same; through a real socket, a big answer streams
across chunks and an answer that is not a listing is refused as `jobs()` refuses it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.adapters.slurm.client import SlurmRestClient
from reconciler.adapters.slurm.codec import Codec
from reconciler.adapters.slurm.transport import STREAM_CHUNK_BYTES, Transport
from reconciler.adapters.slurm.v0040 import JOB_FLAG_STATES
from reconciler.adapters.slurm.versions import CODECS, SUPPORTED_VERSIONS, codec_for
from reconciler.errors import SlurmApiError
from reconciler.slurm_metrics.figures import job_families
from tests.unit import slurm_specs
from tests.unit.slurm_answers import CannedSlurm, StaticToken, canned_slurm
from tests.unit.test_slurm_wire import RUNNING_JOB

BODIES = Path(__file__).parent / "slurm_bodies"
# Jobs as each version answered them: slurmrestd 24.11.5's captures, 22.05.8's (test_slurm_wire);
# for v0.0.43+, which no slurmrestd here serves, a job built to 26.05.3's documented schema.
CAPTURED = (
    {
        version: json.loads((BODIES / f"{version}.json").read_text())["job_running"]
        for version in ("v0.0.40", "v0.0.41", "v0.0.42")
    }
    | {"v0.0.38": RUNNING_JOB}
    | {version: slurm_specs.job(version) for version in ("v0.0.43", "v0.0.44", "v0.0.45")}
)
BASE_STATES = ("PENDING", "RUNNING", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT")
# (job_state, state_reason, partition) as slurmrestd says them, and some it never says.
V0038_STATES = [
    ("PENDING", "Priority", "gpu"), ("running", "None", "cpu"), ("COMPLETING", "None", "gpu"),
]  # fmt: skip
V0040_STATES = [
    (["PENDING"], "Priority", "gpu"), (["PENDING"], "Resources", "gpu,cpu"),
    (["PENDING", "REQUEUED"], "BeginTime", "gpu"), (["RUNNING"], "None", "cpu"),
    (["RUNNING", "COMPLETING"], "None", "cpu"), (["COMPLETED"], "None", "gpu"),
    ([], "None", "gpu"), ("RUNNING", "None", "gpu"), (["PENDING", "EXPEDITING"], "None", "gpu"),
]  # fmt: skip
ODD = [(None, None, None), (7, 8, 9), ({"a": 1}, ["x"], True)]


def variants(version: str) -> list[dict[str, Any]]:
    states = (V0038_STATES if version == "v0.0.38" else V0040_STATES) + ODD
    return [
        {**CAPTURED[version], "job_state": state, "state_reason": reason, "partition": partition}
        for state, reason, partition in states
    ]


def full(codec: Codec, job: dict[str, Any]) -> tuple[str, str, str]:
    decoded = codec.job(job)
    return decoded.state, decoded.partition, decoded.state_reason


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_a_summary_reads_a_job_as_its_full_decode_does(version: str) -> None:
    codec = codec_for(version)
    for job in [CAPTURED[version], *variants(version)]:
        summary = codec.job_summary(job)
        assert (summary.state, summary.partition, summary.state_reason) == full(codec, job)


WORD = st.sampled_from(BASE_STATES + JOB_FLAG_STATES) | st.text(max_size=8)
ANY = st.none() | st.integers() | st.text(max_size=8) | st.lists(WORD, max_size=3)


@given(
    codec=st.sampled_from(CODECS),
    state=ANY | WORD | st.lists(WORD, max_size=4),
    reason=ANY,
    partition=ANY,
)
def test_any_state_reason_and_partition_are_read_alike(
    codec: Codec, state: Any, reason: Any, partition: Any
) -> None:
    job = {**CAPTURED[codec.version], "job_state": state, "state_reason": reason}
    job["partition"] = partition
    summary = codec.job_summary(job)
    assert (summary.state, summary.partition, summary.state_reason) == full(codec, job)


@pytest.fixture(scope="module")
def slurm() -> Iterator[CannedSlurm]:
    """One server for the module (each stops in half a second); each test sets its answers."""
    with canned_slurm() as server:
        yield server


def client_of(server: CannedSlurm, version: str) -> SlurmRestClient:
    return SlurmRestClient(Transport(server.url, StaticToken(), timeout=5), codec_for(version))


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_the_figures_of_the_summaries_are_those_of_the_full_read(
    slurm: CannedSlurm, version: str
) -> None:
    """Over a real socket, pretty-printed as slurmrestd writes it, and big enough to come in
    several chunks."""
    jobs = [CAPTURED[version], *variants(version)]
    repeat = 3 * STREAM_CHUNK_BYTES // len(json.dumps(jobs)) + 1
    body = json.dumps({"jobs": jobs * repeat, "last_update": 1, "errors": []}, indent=2)
    assert len(body) > 2 * STREAM_CHUNK_BYTES
    slurm.answers[f"/slurm/{version}/jobs"] = (200, body.encode())
    client = client_of(slurm, version)
    summaries = client.job_summaries()
    assert len(summaries) == len(jobs) * repeat
    families = job_families(summaries)
    assert families == job_families(client.jobs().items)
    assert all(family.samples for family in families)  # jobs by state, and pending ones
    assert [(m, p.split("?")[0]) for m, p in slurm.requests[-2:]] == [
        ("GET", f"/slurm/{version}/jobs"),
        ("GET", f"/slurm/{version}/jobs"),
    ]


@pytest.mark.parametrize(
    "answer",
    [
        (200, {"errors": [], "warnings": []}),  # no `jobs`
        (200, {"jobs": None}),
        (200, {"jobs": {}}),
        (200, {"jobs": [RUNNING_JOB, "not a job"]}),
        (200, [RUNNING_JOB]),  # JSON, not an object
        (200, b"<html>busy</html>"),
        (200, b'{"jobs": [{"job_id": 1'),  # cut short
        (200, {"jobs": [], "errors": [{"error": "nope", "error_number": 1007}]}),
        (500, {"jobs": [], "errors": [{"error": "nope", "error_number": -1}]}),
        (500, b"<html>busy</html>"),
        (401, b"Authentication failure"),
    ],
    ids=[
        "no-key", "null", "object", "entry-not-object", "array", "not-json", "cut-short",
        "errors-in-200", "500", "500-not-json", "401",
    ],
)  # fmt: skip
def test_an_answer_that_is_not_a_listing_is_refused(
    slurm: CannedSlurm, answer: tuple[int, Any]
) -> None:
    slurm.answers["/slurm/v0.0.42/jobs"] = answer
    client = client_of(slurm, "v0.0.42")
    with pytest.raises(SlurmApiError):
        client.job_summaries()
    with pytest.raises(SlurmApiError):
        client.jobs()


def test_the_request_is_timed_as_job_summaries(slurm: CannedSlurm) -> None:
    slurm.answers["/slurm/v0.0.38/jobs"] = (200, {"jobs": [RUNNING_JOB]})
    seen: list[tuple[str, bool]] = []
    transport = Transport(slurm.url, StaticToken(), timeout=5)
    client = SlurmRestClient(
        transport, codec_for("v0.0.38"), observe=lambda op, _, ok: seen.append((op, ok))
    )
    [summary] = client.job_summaries()
    assert (summary.state, summary.partition, summary.state_reason) == ("RUNNING", "debug", "None")
    slurm.answers["/slurm/v0.0.38/jobs"] = (500, {"errors": [{"error_number": -1}]})
    with pytest.raises(SlurmApiError):
        client.job_summaries()
    assert seen == [("job_summaries", True), ("job_summaries", False)]


@pytest.mark.parametrize("version", [v for v in SUPPORTED_VERSIONS if codec_for(v).job_state])
def test_the_state_counts_are_those_of_the_summaries_and_count_array_tasks(
    slurm: CannedSlurm, version: str
) -> None:
    """Above the job detail limit the metrics count `GET /jobs/state/` instead of the list:
    the same state words, every entry counted; the scheduler's job_states() leaves out array
    and heterogeneous jobs, which are never its placeholders."""
    jobs = [CAPTURED[version], *variants(version)]
    ids = [str(n) for n in range(1, len(jobs) - 1)] + ["9_1", "9+0"]
    listed = [{"job_id": i, "state": job["job_state"]} for i, job in zip(ids, jobs, strict=True)]
    slurm.answers[f"/slurm/{version}/jobs/state/"] = (200, {"jobs": listed, "errors": []})
    slurm.answers[f"/slurm/{version}/jobs"] = (200, {"jobs": jobs, "last_update": 1})
    client = client_of(slurm, version)
    counts = client.job_state_counts()
    summed: dict[str, int] = {}
    for summary in client.job_summaries():
        summed[summary.state] = summed.get(summary.state, 0) + 1
    assert counts == summed
    assert sorted(client.job_states()) == list(range(1, len(jobs) - 1))
