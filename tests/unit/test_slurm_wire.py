"""slurmrestd v0.0.38 wire mapping and JWT handling, with bodies captured from Slurm 22.05.8."""

from __future__ import annotations

from pathlib import Path

import jwt
import pytest

from reconciler.adapters.slurm.codec import controller_responds
from reconciler.adapters.slurm.jwt import MintedTokens, ProvidedToken, mint_token
from reconciler.adapters.slurm.model import JobSpec, JobUpdate, check_signal
from reconciler.adapters.slurm.transport import api_error, wire_errors
from reconciler.adapters.slurm.v0038 import (
    job_from_wire,
    node_from_wire,
    partition_from_wire,
    reservation_from_wire,
    submission_to_wire,
    update_to_wire,
)
from reconciler.errors import (
    SlurmApiError,
    SlurmArgumentError,
    SlurmAuthError,
    SlurmKeyMissingError,
    SlurmUnavailableError,
)

KEY = b"k" * 32

DRAINED_NODE = {
    "architecture": "x86_64", "cpus": 8, "features": "gpu", "active_features": "gpu",
    "gres": "gpu:4", "gres_drained": "N/A", "gres_used": "gpu:0", "name": "node2",
    "address": "127.0.0.1", "hostname": "localhost", "state": "idle", "state_flags": ["DRAIN"],
    "partitions": ["debug", "high"], "port": 27828, "real_memory": 8000,
    "reason": "reconciler: smoke test", "reason_changed_at": 1795306050,
    "reason_set_by_user": "root", "weight": 1, "alloc_memory": 0, "alloc_cpus": 0,
    "idle_cpus": 8, "owner": None, "tres_used": None,
}  # fmt: skip

PARTITION = {
    "flags": ["default"], "preemption_mode": ["requeue"], "allowed_accounts": "",
    "allowed_groups": "", "allowed_qos": "", "default_time_limit": None, "denied_accounts": "",
    "maximum_nodes_per_job": -1, "max_time_limit": -1, "min nodes per job": 0, "name": "debug",
    "nodes": "node[1-4]", "priority_tier": 1, "qos": "", "state": "UP", "total_cpus": 32,
    "total_nodes": 4,
}  # fmt: skip

RESERVATION = {
    "flags": ["IGNORE_JOBS", "SPEC_NODES"], "accounts": "", "core_count": 8,
    "end_time": 1795309305, "features": "", "name": "r1", "node_count": 1, "node_list": "node1",
    "partition": "", "start_time": 1795305705, "watts": 4294967294, "tres": "cpu=8",
    "users": "root",
}  # fmt: skip

RUNNING_JOB = {
    "job_id": 1, "name": "t1", "job_state": "RUNNING", "state_reason": "None",
    "state_description": "", "partition": "debug", "nodes": "node1", "required_nodes": "",
    "excluded_nodes": "", "resv_name": "r1", "features": "", "tres_per_node": "gres:gpu:2",
    "user_name": "root", "user_id": 0, "comment": "hello", "time_limit": 5,
    "priority": 4294901759, "node_count": 1, "cpus": 1, "submit_time": 1795305706,
    "start_time": 1795305706, "end_time": 1795306006, "exit_code": 0, "batch_host": "node1",
    "flags": ["JOB_WAS_RUNNING"], "array_task_id": None, "nice": None,
}  # fmt: skip


def test_node_state_is_upper_case_and_flags_are_a_set() -> None:
    node = node_from_wire(DRAINED_NODE)
    assert (node.name, node.state, node.flags) == ("node2", "IDLE", frozenset({"DRAIN"}))
    assert node.drain_requested
    assert node.reason == "reconciler: smoke test"
    assert node.reason_set_by == "root"
    assert (node.cpus, node.real_memory, node.gres) == (8, 8000, "gpu:4")
    assert node.features == ("gpu",)
    assert node.partitions == ("debug", "high")


def test_node_without_optional_fields_gets_neutral_values() -> None:
    node = node_from_wire({"name": "n", "state": "future", "reason_set_by_user": None})
    assert node.state == "FUTURE"
    assert node.flags == frozenset()
    assert node.reason_set_by is None and node.reason_changed_at is None
    assert node.weight == 1


def test_partition_unlimited_limits_become_none_and_spaced_key_is_read() -> None:
    part = partition_from_wire(PARTITION)
    assert part.is_default
    assert part.max_time_minutes is None
    assert part.max_nodes_per_job is None
    assert part.min_nodes_per_job == 0
    assert part.preempt_mode == ("REQUEUE",)
    assert part.allowed_accounts == ()
    assert part.nodes == "node[1-4]"


def test_partition_min_nodes_with_the_fixed_key_spelling() -> None:
    assert partition_from_wire({"min_nodes_per_job": 2}).min_nodes_per_job == 2


def test_reservation_lists_and_flags() -> None:
    resv = reservation_from_wire(RESERVATION)
    assert resv.name == "r1"
    assert resv.users == ("root",)
    assert resv.flags == frozenset({"IGNORE_JOBS", "SPEC_NODES"})
    assert (resv.node_list, resv.node_count, resv.core_count) == ("node1", 1, 8)


def test_job_gres_loses_its_prefix_and_reservation_is_named() -> None:
    job = job_from_wire(RUNNING_JOB)
    assert (job.job_id, job.state, job.state_reason) == (1, "RUNNING", "None")
    assert job.gres == "gpu:2"
    assert job.reservation == "r1"
    assert job.time_limit_minutes == 5


def test_job_without_time_limit_is_unlimited_and_its_hold_is_read() -> None:
    job = job_from_wire({**RUNNING_JOB, "time_limit": None, "job_state": "PENDING",
                         "state_reason": "JobHeldUser"})  # fmt: skip
    assert job.time_limit_minutes is None
    assert (job.state, job.state_reason) == ("PENDING", "JobHeldUser")


@pytest.mark.parametrize(
    ("entry", "number"),
    [
        ({"error_number": 2017, "error": "Invalid job id specified"}, 2017),
        ({"error_code": 2042, "error": "Job is in held state"}, 2042),
        ({"errno": 2018, "error": "Invalid node name specified"}, 2018),
        ({"description": 'Unknown key "bogus"', "source": "hsearch_r"}, None),
    ],
)
def test_wire_errors_read_every_spelling_of_the_number(entry: dict, number: int | None) -> None:
    [error] = wire_errors({"errors": [entry]})
    assert error.number == number


def test_api_error_carries_first_numbered_error_and_endpoint() -> None:
    body = {"errors": [
        {"description": 'Disabled key: "user_id"', "error_number": 1,
         "error": "Operation not permitted", "source": "openapi specification"},
        {"error_code": 9001, "error": "Failure during parsing"},
    ]}  # fmt: skip
    error = api_error("POST /slurm/v0.0.38/job/submit", 400, wire_errors(body))
    assert isinstance(error, SlurmApiError)
    assert (error.error_number, error.error_text) == (1, "Operation not permitted")
    assert error.endpoint == "POST /slurm/v0.0.38/job/submit"
    assert error.status == 400
    assert 'Disabled key: "user_id"' in str(error)
    assert "Failure during parsing [9001]" in str(error)
    assert error.hint is None


def test_generic_minus_one_error_hints_at_the_token() -> None:
    body = {"errors": [{"error_number": -1, "error": "Unspecified error",
                        "description": "slurmctld config is unable to load"}]}  # fmt: skip
    error = api_error("GET /slurm/v0.0.38/ping", 500, wire_errors(body))
    assert error.hint is not None and "JWT" in error.hint


def test_submission_maps_neutral_names_to_v0038_keys() -> None:
    spec = JobSpec(
        script="#!/bin/sh\ntrue\n", environment={"PATH": "/bin"}, name="j", nodes=2,
        required_nodes="node[1-2]", excluded_nodes="node3", time_limit_minutes=10,
        gres="gpu:2", hold=True, shared="user",
    )  # fmt: skip
    wire = submission_to_wire(spec)
    assert wire["script"] == "#!/bin/sh\ntrue\n"
    assert wire["job"] == {
        "name": "j", "nodes": "2", "node_list": "node[1-2]", "exclude_nodes": "node3",
        "time_limit": 10, "gres": "gpu:2", "hold": True, "exclusive": "user",
        "environment": {"PATH": "/bin"},
    }  # fmt: skip


def test_submission_leaves_unset_fields_out() -> None:
    wire = submission_to_wire(JobSpec(script="x", environment={"A": "b"}))
    assert wire["job"] == {"environment": {"A": "b"}}


def test_submission_without_environment_is_refused_before_sending() -> None:
    with pytest.raises(SlurmArgumentError, match="environment"):
        submission_to_wire(JobSpec(script="x", environment={}))


@pytest.mark.parametrize(
    ("shared", "key", "value"),
    [("none", "exclusive", "exclusive"), ("oversubscribe", "oversubscribe", True),
     ("user", "exclusive", "user"), ("mcs", "exclusive", "mcs")],
)  # fmt: skip
def test_sharing_modes_map_to_v0038_keys(shared: str, key: str, value: object) -> None:
    spec = JobSpec(script="x", environment={"A": "b"}, shared=shared)  # type: ignore[arg-type]
    assert submission_to_wire(spec)["job"][key] == value


def test_what_v0038_cannot_express_is_refused_before_sending() -> None:
    """topo needs Slurm 24.11; submitting as another uid needs v0.0.40+ (a disabled key)."""
    with pytest.raises(SlurmArgumentError, match="shared"):
        submission_to_wire(JobSpec(script="x", environment={"A": "b"}, shared="topo"))
    with pytest.raises(SlurmArgumentError, match="user_id"):
        submission_to_wire(JobSpec(script="x", environment={"A": "b"}, user_id=1001))


def test_update_maps_names_and_refuses_an_empty_update() -> None:
    assert update_to_wire(JobUpdate(comment="c", time_limit_minutes=3, hold=False)) == {
        "comment": "c", "time_limit": 3, "hold": False,
    }  # fmt: skip
    assert update_to_wire(JobUpdate(reservation="")) == {"reservation": ""}
    with pytest.raises(SlurmArgumentError):
        update_to_wire(JobUpdate())


@pytest.mark.parametrize(("given", "sent"), [("TERM", "TERM"), ("sigusr1", "USR1"), (None, None)])
def test_signals_are_normalized(given: str | None, sent: str | None) -> None:
    assert check_signal(given) == sent


def test_unknown_signal_is_refused() -> None:
    with pytest.raises(SlurmArgumentError):
        check_signal("9")


# -- tokens ------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_minted_token_has_the_claims_slurm_checks(tmp_path: Path) -> None:
    key = tmp_path / "jwt.key"
    key.write_bytes(KEY)
    tokens = MintedTokens(key, "alice", lifetime=600, clock=FakeClock(1000))
    claims = jwt.decode(tokens.token(), KEY, algorithms=["HS256"], options={"verify_exp": False})
    assert claims == {"exp": 1600, "iat": 1000, "sun": "alice"}


def test_minted_token_is_reused_then_refreshed_before_expiry(tmp_path: Path) -> None:
    key = tmp_path / "jwt.key"
    key.write_bytes(KEY)
    clock = FakeClock(1000)
    tokens = MintedTokens(key, "alice", lifetime=600, refresh_margin=60, clock=clock)
    first = tokens.token()
    clock.now = 1500
    assert tokens.token() == first
    clock.now = 1541  # within the margin of exp=1600
    assert tokens.token() != first


def test_a_replaced_key_file_is_signed_with_at_once(tmp_path: Path) -> None:
    """A key Secret made anew reaches the file (replaced, as kubelet and the node agent
    write it): tokens signed with the old key would all be refused until expiry."""
    key = tmp_path / "jwt.key"
    key.write_bytes(KEY)
    tokens = MintedTokens(key, "alice", lifetime=600, clock=FakeClock(1000))
    first = tokens.token()
    assert tokens.token() == first
    replacement = tmp_path / ".jwt.key.tmp"
    replacement.write_bytes(b"n" * 32)
    replacement.replace(key)
    claims = jwt.decode(tokens.token(), b"n" * 32, algorithms=["HS256"],
                        options={"verify_exp": False})  # fmt: skip
    assert claims["sun"] == "alice"


def test_repr_of_token_sources_holds_no_secret(tmp_path: Path) -> None:
    key = tmp_path / "jwt.key"
    key.write_bytes(KEY)
    minted = MintedTokens(key, "alice")
    token = minted.token()
    provided = ProvidedToken(lambda: token, origin="test")
    for source in (minted, provided):
        assert token not in repr(source) and "k" * 8 not in repr(source)
        assert "alice" in repr(source)


def test_provided_token_takes_user_from_claims_and_refuses_when_expired() -> None:
    token = mint_token(KEY, "bob", now=1000, lifetime=100)
    clock = FakeClock(1050)
    source = ProvidedToken(lambda: token, origin="$SLURM_JWT", clock=clock)
    assert source.user == "bob"
    assert source.token() == token
    clock.now = 1200
    with pytest.raises(SlurmAuthError) as caught:
        source.token()
    assert token not in str(caught.value)
    assert "expired" in str(caught.value)


def test_provided_token_is_reread_when_it_nears_expiry() -> None:
    tokens = iter([mint_token(KEY, "bob", now=0, lifetime=100),
                   mint_token(KEY, "bob", now=90, lifetime=100)])  # fmt: skip
    current = [next(tokens)]
    clock = FakeClock(10)
    source = ProvidedToken(lambda: current[0], origin="file", clock=clock, refresh_margin=30)
    first = source.token()
    current[0] = next(tokens)
    clock.now = 80
    assert source.token() != first


def test_garbage_token_is_an_auth_error_without_the_token() -> None:
    secret = "not-a-jwt-secret-value"
    with pytest.raises(SlurmAuthError) as caught:
        ProvidedToken(lambda: secret, origin="$SLURM_JWT")
    assert secret not in str(caught.value)
    assert caught.value.__cause__ is None


def test_token_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    token = mint_token(KEY, "carol", now=10**10, lifetime=100)
    monkeypatch.setenv("SLURM_JWT", token)
    assert ProvidedToken.from_env().user == "carol"
    monkeypatch.delenv("SLURM_JWT")
    with pytest.raises(SlurmAuthError, match="SLURM_JWT is not set"):
        ProvidedToken.from_env()


def test_token_from_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(mint_token(KEY, "dave", now=10**10, lifetime=100) + "\n")
    assert ProvidedToken.from_file(path).user == "dave"


@pytest.mark.parametrize(
    ("pings", "responds"),
    [
        # v0.0.42 from 24.11.5, with slurmctld up and with it stopped (slurmrestd said 200).
        ([{"hostname": "vm", "pinged": "UP", "responding": True, "mode": "primary"}], True),
        ([{"hostname": "vm", "pinged": "DOWN", "responding": False, "mode": "primary"}], False),
        ([{"hostname": "a", "ping": "DOWN"}, {"hostname": "b", "ping": "UP"}], True),  # v0.0.38
        ([{"hostname": "a", "ping": "DOWN", "status": -1}], False),
        ([], True),
    ],
)
def test_a_ping_answer_says_whether_slurmctld_responded(
    pings: list[dict[str, object]], responds: bool
) -> None:
    assert controller_responds({"pings": pings}) is responds


def test_a_missing_jwt_key_file_reads_as_slurm_not_answering_yet(tmp_path: Path) -> None:
    """A new cluster's reconciler starts before the key Secret it makes is mounted."""
    tokens = MintedTokens(tmp_path / "jwt_hs256.key", "root")
    with pytest.raises(SlurmKeyMissingError) as raised:
        tokens.token()
    assert isinstance(raised.value, SlurmUnavailableError | SlurmAuthError)


def test_an_admin_comment_is_not_sent_to_v0038() -> None:
    """Jobs are marked (admin comment) only where the operator submits every job (v0.0.40+)."""
    with pytest.raises(SlurmArgumentError, match="admin_comment"):
        submission_to_wire(JobSpec(script="x", environment={"A": "b"}, admin_comment="c"))
