"""The scheduler's whole-list read (`jobs_where()`): streamed and filtered as it
arrives, so it keeps only the jobs asked for, reads each as `jobs()` does, and refuses what
is not a listing as `jobs()` refuses it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.adapters.slurm.client import SlurmRestClient
from reconciler.adapters.slurm.transport import STREAM_CHUNK_BYTES, Transport
from reconciler.adapters.slurm.versions import SUPPORTED_VERSIONS, codec_for
from reconciler.errors import SlurmApiError
from reconciler.scheduler.job_reads_effects import is_placeholder
from tests.unit.slurm_answers import CannedSlurm, StaticToken, canned_slurm
from tests.unit.test_slurm_job_summaries import CAPTURED

OURS = "pod:ns/p@uid-1:sched"


@pytest.fixture(scope="module")
def slurm() -> Iterator[CannedSlurm]:
    with canned_slurm() as server:
        yield server


def client_of(server: CannedSlurm, version: str, seen: list[str] | None = None) -> SlurmRestClient:
    observe = (lambda op, _, ok: seen.append(op)) if seen is not None else None
    transport = Transport(server.url, StaticToken(), timeout=5)
    return SlurmRestClient(transport, codec_for(version), observe=observe)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_only_the_kept_jobs_are_read_each_as_jobs_reads_it(
    slurm: CannedSlurm, version: str
) -> None:
    count = 3 * STREAM_CHUNK_BYTES // len(json.dumps(CAPTURED[version], indent=2)) + 1
    others = [{**CAPTURED[version], "job_id": i, "name": f"train-{i}"} for i in range(2, count)]
    ours = {**CAPTURED[version], "job_id": 1, "name": OURS}
    half = len(others) // 2
    body = json.dumps({"jobs": [*others[:half], ours, *others[half:]], "errors": []}, indent=2)
    assert len(body) > 2 * STREAM_CHUNK_BYTES  # it comes in several chunks
    slurm.answers[f"/slurm/{version}/jobs"] = (200, body.encode())
    seen: list[str] = []
    client = client_of(slurm, version, seen)
    [kept] = client.jobs_where(is_placeholder).items
    [whole] = [j for j in client.jobs().items if j.job_id == 1]
    assert dataclasses.astuple(kept) == dataclasses.astuple(whole)
    assert seen == ["jobs_where", "jobs"]


@pytest.mark.parametrize(
    "answer",
    [
        (200, {"errors": [], "warnings": []}),
        (200, {"jobs": {}}),
        (200, {"jobs": [{"job_id": 1, "name": OURS}, "not a job"]}),
        (200, b'{"jobs": [{"job_id": 1'),
        (200, {"jobs": [], "errors": [{"error": "nope", "error_number": 1007}]}),
        (500, b"<html>busy</html>"),
    ],
    ids=["no-key", "object", "entry-not-object", "cut-short", "errors-in-200", "500"],
)
def test_an_answer_that_is_not_a_listing_is_refused(
    slurm: CannedSlurm, answer: tuple[int, Any]
) -> None:
    slurm.answers["/slurm/v0.0.42/jobs"] = answer
    with pytest.raises(SlurmApiError):
        client_of(slurm, "v0.0.42").jobs_where(is_placeholder)
