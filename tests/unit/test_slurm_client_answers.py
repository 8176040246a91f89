"""The REST client reads a listing only when slurmrestd really gave one. A 200
without the list's key, or a body that is not a JSON object, is an error, never "no jobs":
the scheduler deletes the Pod of every job that vanished from a list it believed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.adapters.slurm.client import SlurmRestClient, connect
from reconciler.errors import SlurmApiError
from tests.unit.slurm_answers import CannedSlurm, StaticToken, canned_slurm

JOBS = "/slurm/v0.0.42/jobs"
JOB = {"job_id": 7, "name": "pod:ns/p@uid", "job_state": ["RUNNING"], "nodes": "n1"}


@pytest.fixture
def slurm() -> Iterator[tuple[CannedSlurm, SlurmRestClient]]:
    with canned_slurm() as server:
        client = connect(server.url, StaticToken(), api_version="v0.0.42")
        yield server, client
        client.close()


@pytest.mark.parametrize(
    "body",
    [
        {"errors": [], "warnings": []},  # no `jobs` at all
        {"jobs": None, "last_update": {"number": 5}},
        {"jobs": {}, "last_update": {"number": 5}},  # not a list
        {"jobs": [JOB, "not a job"]},
        [],  # JSON, but not an object
        [JOB],
        "jobs",
        None,
    ],
    ids=[
        "no-key",
        "null",
        "object",
        "entry-not-object",
        "empty-array",
        "array",
        "string",
        "null-body",
    ],
)
def test_a_listing_that_is_not_one_is_an_error(
    slurm: tuple[CannedSlurm, SlurmRestClient], body: Any
) -> None:
    server, client = slurm
    server.answers[JOBS] = (200, body)
    with pytest.raises(SlurmApiError):
        client.jobs()


def test_a_listing_since_a_time_that_is_not_one_is_an_error(
    slurm: tuple[CannedSlurm, SlurmRestClient],
) -> None:
    server, client = slurm
    server.answers[JOBS] = (200, {"errors": [], "last_update": {"number": 5}})
    with pytest.raises(SlurmApiError):
        client.jobs(since=100)


def test_a_real_empty_listing_and_an_unchanged_one_still_read(
    slurm: tuple[CannedSlurm, SlurmRestClient],
) -> None:
    server, client = slurm
    server.answers[JOBS] = (200, {"jobs": [], "last_update": {"number": 5}})
    assert client.jobs().items == ()
    server.answers[JOBS] = (200, {"jobs": [], "last_update": {"number": 0}})
    assert client.jobs(since=100) is None  # v0.0.40+'s "nothing changed since"
    server.answers[JOBS] = (200, {"jobs": [JOB], "last_update": {"number": 5}})
    [job] = client.jobs().items
    assert (job.job_id, job.state) == (7, "RUNNING")


def test_a_single_job_answer_that_is_not_an_object_is_an_error(
    slurm: tuple[CannedSlurm, SlurmRestClient],
) -> None:
    server, client = slurm
    server.answers["/slurm/v0.0.42/job/7"] = (200, ["surprise"])
    with pytest.raises(SlurmApiError):
        client.job(7)


def test_only_slurms_no_such_job_reads_as_gone(slurm: tuple[CannedSlurm, SlurmRestClient]) -> None:
    """`job()` None means purged (the scheduler then deletes the Pod): only error 2017 says so."""
    server, client = slurm
    path = "/slurm/v0.0.42/job/7"
    server.answers[path] = (200, {"jobs": [], "errors": []})
    with pytest.raises(SlurmApiError):
        client.job(7)
    unknown = {"description": "Unable to query JobId=7", "error": "Invalid job id specified",
               "error_number": 2017, "source": "_handle_job_get"}  # fmt: skip
    server.answers[path] = (404, {"jobs": [], "errors": [unknown]})
    assert client.job(7) is None
    server.answers[path] = (500, {"jobs": [], "errors": [{"error_number": -1}]})
    with pytest.raises(SlurmApiError):
        client.job(7)
