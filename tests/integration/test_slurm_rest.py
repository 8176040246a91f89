"""The slurmrestd adapter against the real slurmrestd of the local stack (JWT): every OpenAPI
version both it serves and the client speaks (versions.SUPPORTED_VERSIONS; 24.11: v0.0.42,
v0.0.41, v0.0.40; 22.05: v0.0.38; a 26.05 install: v0.0.45 to v0.0.42) runs every test here."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.adapters.node_control import NodeControl
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens, ProvidedToken, mint_token
from reconciler.adapters.slurm.model import (
    CAN_SUBMIT_AS_USER,
    CAN_UPDATE_NODES,
    JobSpec,
    JobUpdate,
    SlurmJob,
    SlurmRestApi,
)
from reconciler.adapters.slurm.transport import Transport
from reconciler.adapters.slurm.versions import SUPPORTED_VERSIONS, served_versions
from reconciler.errors import SlurmApiError, SlurmAuthError, SlurmUnavailableError
from reconciler.local.slurm.install import slurm_install
from reconciler.slurm_release import maybe_release
from tests.integration.endpoints import SlurmEndpoints
from tests.integration.helpers import FixedToken, unique, wait_for

SLEEPER = "#!/bin/bash\nsleep 300\n"

pytestmark = pytest.mark.integration


def served(slurm: SlurmEndpoints, tokens: MintedTokens) -> list[str]:
    transport = Transport(slurm.rest_url, tokens, timeout=10)
    try:
        return served_versions(transport.request("GET", "/openapi/v3").body)
    finally:
        transport.close()


@pytest.fixture(scope="module", params=SUPPORTED_VERSIONS)
def api(
    request: pytest.FixtureRequest, slurm: SlurmEndpoints, tokens: MintedTokens
) -> Iterator[SlurmRestApi]:
    """This module's tests once per version; those the server does not serve are skipped."""
    if request.param not in served(slurm, tokens):
        pytest.skip(f"this slurmrestd does not serve {request.param}")
    client = connect(slurm.rest_url, tokens, api_version=request.param)
    yield client
    client.close()


@pytest.fixture
def cancel_later(api: SlurmRestApi) -> Iterator[list[int]]:
    """Job ids appended here are cancelled after the test, whatever happened."""
    ids: list[int] = []
    yield ids
    for job_id in ids:
        try:
            api.cancel(job_id)
        except SlurmApiError as error:
            if error.error_number != 2017:  # already purged: nothing to clean
                raise


def spec(slurm: SlurmEndpoints, tmp_path: Path, **fields: object) -> JobSpec:
    defaults: dict[str, object] = {
        "script": SLEEPER,
        "environment": {"PATH": "/usr/bin:/bin"},
        "name": unique("it-rest"),
        "partition": slurm.partition,
        "current_working_directory": str(tmp_path),
        "standard_output": str(tmp_path / "%j.out"),
    }
    return JobSpec(**{**defaults, **fields})  # type: ignore[arg-type]


def job_state(api: SlurmRestApi, job_id: int) -> SlurmJob:
    job = api.job(job_id)
    assert job is not None
    return job


# -- auth ------------------------------------------------------------------------------------


def test_minted_token_reads_nodes_partitions(api: SlurmRestApi, slurm: SlurmEndpoints) -> None:
    api.ping()
    nodes = {node.name: node for node in api.nodes().items}
    assert set(slurm.node_names) <= set(nodes)
    for name in slurm.node_names:
        assert nodes[name].gres == "gpu:4"
        assert slurm.partition in nodes[name].partitions
        assert nodes[name].cpus > 0 and nodes[name].real_memory > 0
    partitions = {p.name: p for p in api.partitions().items}
    assert partitions[slurm.partition].is_default or api.api_version != "v0.0.38"
    assert partitions["high"].priority_tier > partitions[slurm.partition].priority_tier


def test_expired_token_is_refused_before_it_leaves(slurm: SlurmEndpoints) -> None:
    expired = mint_token(
        slurm.jwt_key.read_bytes(), slurm.user, now=int(time.time()) - 600, lifetime=60
    )
    with pytest.raises(SlurmAuthError) as caught:  # at connect: discovery needs a token too
        connect(slurm.rest_url, ProvidedToken(lambda: expired, origin="test")).ping()
    assert "expired" in str(caught.value)
    assert expired not in str(caught.value) and expired not in repr(caught.value)


def test_expired_token_sent_anyway_is_refused_by_slurm(slurm: SlurmEndpoints) -> None:
    expired = mint_token(
        slurm.jwt_key.read_bytes(), slurm.user, now=int(time.time()) - 600, lifetime=60
    )
    client = connect(slurm.rest_url, FixedToken(slurm.user, expired))
    with pytest.raises(SlurmApiError) as caught:
        client.jobs()
    assert caught.value.status in (500, 511)  # 22.05, 24.11
    assert caught.value.hint is not None and "JWT" in caught.value.hint
    assert expired not in str(caught.value)


def test_wrong_key_is_refused_and_the_token_never_shows(
    slurm: SlurmEndpoints, caplog: pytest.LogCaptureFixture
) -> None:
    forged = mint_token(b"not-the-cluster-key-" * 2, slurm.user, now=int(time.time()), lifetime=600)
    client = connect(slurm.rest_url, FixedToken(slurm.user, forged))
    with caplog.at_level(logging.DEBUG), pytest.raises(SlurmApiError) as caught:
        client.jobs()  # not ping: 24.11 answers a ping without checking the user's token
    error = caught.value
    assert error.hint is not None and "JWT" in error.hint  # slurmctld says only "Unspecified error"
    for text in (str(error), repr(error), error.error_text, caplog.text):
        assert forged not in text


def test_unreachable_slurmrestd_is_typed(tokens: MintedTokens) -> None:
    with pytest.raises(SlurmUnavailableError):
        connect("http://127.0.0.1:9", tokens, timeout=2).ping()


# -- jobs ------------------------------------------------------------------------------------


def test_submit_update_release_cancel(
    api: SlurmRestApi, slurm: SlurmEndpoints, tmp_path: Path, cancel_later: list[int]
) -> None:
    submitted = api.submit(spec(slurm, tmp_path, hold=True, comment="first", time_limit_minutes=5))
    cancel_later.append(submitted.job_id)
    assert any("held" in warning for warning in submitted.warnings)  # 2042 rides on a 200
    held = job_state(api, submitted.job_id)
    assert (held.state, held.state_reason) == ("PENDING", "JobHeldUser")
    assert (held.comment, held.time_limit_minutes) == ("first", 5)

    api.update_job(submitted.job_id, JobUpdate(comment="second", time_limit_minutes=7))
    updated = job_state(api, submitted.job_id)
    assert (updated.comment, updated.time_limit_minutes) == ("second", 7)

    api.update_job(submitted.job_id, JobUpdate(hold=False))
    running = wait_for(
        lambda: (j := job_state(api, submitted.job_id)).state == "RUNNING" and j, 20, "RUNNING"
    )
    assert running.nodes

    api.cancel(submitted.job_id)
    wait_for(lambda: job_state(api, submitted.job_id).state == "CANCELLED", 20, "CANCELLED")
    api.cancel(submitted.job_id)  # a finished job: no error


def test_cancel_with_signal_reaches_the_job(
    api: SlurmRestApi, slurm: SlurmEndpoints, tmp_path: Path, cancel_later: list[int]
) -> None:
    marker = tmp_path / "got-signal"
    script = (
        f"#!/bin/bash\ntrap 'echo USR1 > {marker}; exit 0' USR1\nwhile true; do sleep 0.2; done\n"
    )
    job_id = api.submit(spec(slurm, tmp_path, script=script)).job_id
    cancel_later.append(job_id)
    wait_for(lambda: job_state(api, job_id).state == "RUNNING", 20, "RUNNING")
    time.sleep(0.5)  # let bash install its trap
    api.cancel(job_id, signal="USR1")
    wait_for(lambda: marker.exists() and marker.read_text().strip() == "USR1", 20, "the trap")


def test_unknown_job_is_none_and_cancelling_it_is_error_2017(api: SlurmRestApi) -> None:
    assert api.job(67_000_000) is None
    if api.api_version in ("v0.0.40", "v0.0.41"):
        api.cancel(67_000_000)  # Slurm 24.11 answers these two with a bare 200: nothing to tell
        return
    with pytest.raises(SlurmApiError) as caught:
        api.cancel(67_000_000)
    assert caught.value.error_number == 2017
    assert caught.value.endpoint.startswith(f"DELETE /slurm/{api.api_version}/job/")


def test_unknown_node_is_none(api: SlurmRestApi) -> None:
    assert api.node("no-such-node") is None


def test_submit_to_a_missing_partition_is_a_typed_error(
    api: SlurmRestApi, slurm: SlurmEndpoints, tmp_path: Path
) -> None:
    with pytest.raises(SlurmApiError) as caught:
        api.submit(spec(slurm, tmp_path, partition=unique("nopart")))
    assert caught.value.error_number == 2000
    assert "Invalid partition name" in str(caught.value)


def test_update_time_answers_unchanged_or_everything(
    api: SlurmRestApi, slurm: SlurmEndpoints, tmp_path: Path, cancel_later: list[int]
) -> None:
    future = int(time.time()) + 3600
    assert api.jobs(since=future) is None
    assert api.nodes(since=future) is None
    assert api.partitions(since=future) is None
    assert api.reservations(since=future) is None

    older = api.submit(spec(slurm, tmp_path, hold=True)).job_id
    cancel_later.append(older)
    before = api.jobs()
    time.sleep(1.1)
    newer = api.submit(spec(slurm, tmp_path, hold=True)).job_id
    cancel_later.append(newer)
    after = api.jobs(since=before.as_of)
    assert after is not None
    ids = {job.job_id for job in after.items}
    assert {older, newer} <= ids  # not a delta: the unchanged older job is there too
    assert after.as_of >= before.as_of


# -- reservations ------------------------------------------------------------------------------


def test_job_runs_inside_a_reservation(
    api: SlurmRestApi,
    scontrol: Scontrol,
    slurm: SlurmEndpoints,
    tmp_path: Path,
    cancel_later: list[int],
) -> None:
    name, node = unique("it-resv"), slurm.node_names[0]
    scontrol.create_reservation(
        name,
        {"Nodes": node, "StartTime": "now", "Duration": 10, "Users": slurm.user,
         "Flags": "IGNORE_JOBS"},
    )  # fmt: skip
    try:
        [resv] = [r for r in api.reservations().items if r.name == name]
        assert resv.node_list == node and slurm.user in resv.users
        job_id = api.submit(spec(slurm, tmp_path, reservation=name)).job_id
        cancel_later.append(job_id)
        job = wait_for(
            lambda: (j := job_state(api, job_id)).state == "RUNNING" and j, 20, "RUNNING"
        )
        assert (job.reservation, job.nodes) == (name, node)
        api.cancel(job_id)
    finally:
        scontrol.delete_reservation(name, missing_ok=True)


def test_pending_job_reports_why(
    api: SlurmRestApi,
    scontrol: Scontrol,
    slurm: SlurmEndpoints,
    tmp_path: Path,
    cancel_later: list[int],
) -> None:
    name = unique("it-later")
    scontrol.create_reservation(
        name,
        {"Nodes": slurm.node_names[-1], "StartTime": "now+1hour", "Duration": 10,
         "Users": slurm.user},
    )  # fmt: skip
    try:
        job_id = api.submit(spec(slurm, tmp_path, reservation=name)).job_id
        cancel_later.append(job_id)
        job = wait_for(
            lambda: (j := job_state(api, job_id)).state_reason != "None" and j, 20, "a reason"
        )
        assert (job.state, job.state_reason) == ("PENDING", "Reservation")
        api.cancel(job_id)
    finally:
        scontrol.delete_reservation(name, missing_ok=True)


# -- what v0.0.40+ adds ------------------------------------------------------------------------


def test_discovery_speaks_the_newest_version_served(
    slurm: SlurmEndpoints, tokens: MintedTokens
) -> None:
    client = connect(slurm.rest_url, tokens)
    try:
        assert client.api_version == served(slurm, tokens)[0]
        release = maybe_release(client.slurm_version)
        assert release is not None and release.series == slurm_install().release, release
    finally:
        client.close()


def test_nodes_drain_weigh_and_resume_over_rest_without_scontrol(
    api: SlurmRestApi, slurm: SlurmEndpoints
) -> None:
    if CAN_UPDATE_NODES not in api.capabilities:
        pytest.skip(f"{api.api_version} has no node update endpoint (scontrol does it)")
    nodes, name = NodeControl(api, scontrol=None), slurm.node_names[-1]
    try:
        nodes.drain_node(name, "reconciler: rest drain test")
        node = api.node(name)
        assert node is not None and node.drain_requested
        assert node.reason == "reconciler: rest drain test"
        nodes.set_node_weight(name, 7)
        assert (api.node(name) or node).weight == 7
    finally:
        nodes.resume_node(name)
        nodes.set_node_weight(name, 1)
    node = api.node(name)
    assert node is not None and not node.drain_requested and node.weight == 1


def test_the_operator_submits_as_another_user_and_group(
    api: SlurmRestApi, slurm: SlurmEndpoints, tmp_path: Path, cancel_later: list[int]
) -> None:
    """The user-id/group-id of SUNK's "Schedule Kubernetes Pods with Slurm", with the operator's
    token (no token per user)."""
    if CAN_SUBMIT_AS_USER not in api.capabilities:
        pytest.skip(f"{api.api_version} refuses user_id (a job runs as its token's user)")
    tmp_path.chmod(0o777)  # the job's user writes its output here
    submitted = api.submit(spec(slurm, tmp_path, user_id=1001, group_id=0, shared="user"))
    cancel_later.append(submitted.job_id)
    job = job_state(api, submitted.job_id)
    assert (job.user_id, job.group_id) == (1001, 0)
