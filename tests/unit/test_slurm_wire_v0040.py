"""slurmrestd data parsers v0.0.40-v0.0.42: the codec, version discovery and the node-change
path, with bodies captured from a real slurmrestd 24.11.5 (tests/unit/slurm_bodies/)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.node_control import NodeControl
from reconciler.adapters.scontrol_args import NodeState
from reconciler.adapters.slurm.client import SlurmRestClient, connect_lazily
from reconciler.adapters.slurm.codec import number, slurm_release
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.adapters.slurm.model import (
    CAN_SUBMIT_AS_USER,
    CAN_UPDATE_NODES,
    JobSpec,
    JobUpdate,
    NodeUpdate,
)
from reconciler.adapters.slurm.transport import Response, wire_errors
from reconciler.adapters.slurm.v0040 import (
    job_from_wire,
    node_from_wire,
    node_update_to_wire,
    partition_from_wire,
    reservation_from_wire,
    submission_to_wire,
    update_to_wire,
)
from reconciler.adapters.slurm.versions import (
    SUPPORTED_VERSIONS,
    choose_codec,
    codec_for,
    served_versions,
)
from reconciler.errors import (
    ReconcilerError,
    SlurmApiError,
    SlurmArgumentError,
    SlurmUnsupportedError,
)
from tests.unit.slurm_answers import listed

BODIES = Path(__file__).parent / "slurm_bodies"
VERSIONS = ("v0.0.40", "v0.0.41", "v0.0.42")


def captured(version: str) -> dict[str, Any]:
    return json.loads((BODIES / f"{version}.json").read_text())


@pytest.mark.parametrize("version", VERSIONS)
def test_a_draining_node_with_a_job_reads_as_its_base_state_and_flags(version: str) -> None:
    node = node_from_wire(captured(version)["node_draining"])
    assert (node.name, node.state, node.flags) == ("slurm-cpu-0", "MIXED", frozenset({"DRAIN"}))
    assert node.drain_requested and node.reason == "reconciler: capture"
    assert (node.cpus, node.real_memory, node.features) == (4, 8192, ("cpu", "epyc", "las1"))
    assert node.partitions == ("all",) and node.address == "127.0.0.1"
    assert node.reason_changed_at and node.reason_changed_at > 1_700_000_000


@pytest.mark.parametrize("version", VERSIONS)
def test_a_running_job_reads_as_v0038_did(version: str) -> None:
    """Submitted by root with user_id/group_id 1001, shared user, required/excluded nodes."""
    job = job_from_wire(captured(version)["job_running"])
    assert (job.job_id, job.name, job.state, job.state_reason) == (2, "capture", "RUNNING", "None")
    assert (job.nodes, job.batch_host, job.node_count, job.cpus) == (
        "slurm-cpu-0", "slurm-cpu-0", 1, 1,
    )  # fmt: skip
    assert (job.user_id, job.group_id, job.user_name) == (1001, 1001, "sunk-pods")
    assert (job.required_nodes, job.excluded_nodes) == ("slurm-cpu-0", "slurm-gpu-small-[0-1]")
    assert (job.time_limit_minutes, job.exit_code, job.comment) == (5, 0, "updated")
    assert "JOB_WAS_RUNNING" in job.flags and job.submit_time > 1_700_000_000


@pytest.mark.parametrize(
    ("states", "expected"),
    [(["RUNNING"], "RUNNING"), (["COMPLETED", "COMPLETING"], "COMPLETING"),
     (["PENDING", "REQUEUED"], "REQUEUED"), (["CANCELLED"], "CANCELLED"), ([], "")],
)  # fmt: skip
def test_job_state_flags_win_over_the_base_state_as_in_slurms_job_state_string(
    states: list[str], expected: str
) -> None:
    assert job_from_wire({"job_id": 1, "job_state": states}).state == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_a_nested_partition_reads_flat(version: str) -> None:
    part = partition_from_wire(captured(version)["partition_gpu"])
    assert (part.name, part.state, part.nodes) == ("gpu", "UP", "slurm-gpu-small-[0-3]")
    assert (part.priority_tier, part.total_nodes, part.total_cpus) == (10, 4, 16)
    assert (part.max_time_minutes, part.max_nodes_per_job, part.default_time_minutes) == (
        None, None, None,
    )  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
def test_a_reservation_reads_with_its_times_unwrapped(version: str) -> None:
    resv = reservation_from_wire(captured(version)["reservation"])
    assert (resv.name, resv.node_list, resv.users) == ("r1", "slurm-cpu-0", ("root",))
    assert resv.flags == frozenset({"MAINT", "SPEC_NODES"})
    assert resv.end_time - resv.start_time == 3600


@pytest.mark.parametrize(
    ("wire", "expected"),
    [(5, 5), ({"set": True, "infinite": False, "number": 5}, 5),
     ({"set": False, "infinite": False, "number": 0}, None),
     ({"set": True, "infinite": True, "number": 0}, None), (None, None), (True, None)],
)  # fmt: skip
def test_numbers_in_both_spellings(wire: Any, expected: int | None) -> None:
    assert number(wire) == expected


def test_submission_speaks_v0040_keys() -> None:
    spec = JobSpec(
        script="#!/bin/sh\ntrue\n", environment={"PATH": "/bin", "A": "x=y"}, name="j", nodes=2,
        required_nodes="node[1-2]", excluded_nodes="node3", time_limit_minutes=10,
        gres="gpu:2", shared="none", user_id=1001, group_id=1002, priority=100,
    )  # fmt: skip
    assert submission_to_wire(spec) == {
        "script": "#!/bin/sh\ntrue\n",
        "job": {
            "name": "j", "nodes": "2", "required_nodes": ["node[1-2]"],
            "excluded_nodes": ["node3"], "time_limit": 10, "tres_per_node": "gres/gpu:2",
            "shared": ["none"], "user_id": "1001", "group_id": "1002", "priority": 100,
            "environment": ["PATH=/bin", "A=x=y"],
        },
    }  # fmt: skip


@pytest.mark.parametrize("shared", ["none", "oversubscribe", "user", "mcs", "topo"])
def test_every_sharing_mode_is_a_one_word_list(shared: Any) -> None:
    job = submission_to_wire(JobSpec(script="x", environment={"A": "b"}, shared=shared))["job"]
    assert job["shared"] == [shared]


@pytest.mark.parametrize(
    ("spec", "field"),
    [(JobSpec(script="x", environment={}), "environment"),
     (JobSpec(script="x", environment={"A=B": "c"}), "environment"),
     (JobSpec(script="x", environment={"A": "b"}, group_id=5), "group_id"),
     (JobSpec(script="x", environment={"A": "b"}, hold=True, priority=3), "hold"),
     (JobSpec(script="x", environment={"A": "b"}, shared="all"), "shared")],  # type: ignore[arg-type]
)  # fmt: skip
def test_what_slurm_would_misread_is_refused_before_sending(spec: JobSpec, field: str) -> None:
    with pytest.raises(SlurmArgumentError, match=field):
        submission_to_wire(spec)


def test_job_and_node_updates() -> None:
    assert update_to_wire(JobUpdate(comment="c", time_limit_minutes=3, hold=False)) == {
        "comment": "c", "time_limit": 3, "hold": False,
    }  # fmt: skip
    assert node_update_to_wire(NodeUpdate(state="drain", reason="r")) == {
        "state": ["DRAIN"], "reason": "r",
    }  # fmt: skip
    assert node_update_to_wire(NodeUpdate(weight=7)) == {"weight": 7}
    with pytest.raises(SlurmArgumentError):
        node_update_to_wire(NodeUpdate())


def test_discovery_takes_the_newest_version_both_sides_know() -> None:
    spec = {"paths": {"/slurm/v0.0.40/ping/": {}, "/slurm/v0.0.42/jobs/": {},
                      "/slurm/v0.0.41/nodes/": {}, "/slurmdb/v0.0.42/qos/": {}}}  # fmt: skip
    assert served_versions(spec) == ["v0.0.42", "v0.0.41", "v0.0.40"]
    assert choose_codec(served_versions(spec)).version == "v0.0.42"
    assert choose_codec(["v0.0.39", "v0.0.38"]).version == "v0.0.38"
    assert choose_codec(["v0.0.46", "v0.0.41"]).version == "v0.0.41"
    assert choose_codec(["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"]).version == "v0.0.45"
    with pytest.raises(SlurmUnsupportedError, match=r"v0\.0\.37"):
        choose_codec(["v0.0.37"])
    assert SUPPORTED_VERSIONS == (
        "v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40", "v0.0.38",
    )  # fmt: skip


def test_the_slurm_release_is_read_from_either_meta_spelling() -> None:
    assert slurm_release({"meta": {"slurm": {"release": "24.11.5"}}}) == "24.11.5"
    v0038 = {"meta": {"Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}}}
    assert slurm_release(v0038) == "22.05.8"
    assert slurm_release({}) is None


class Answers:
    """A transport that answers from a list and remembers what was asked."""

    url = "http://slurm"

    def __init__(self, *answers: tuple[int, dict[str, Any]]) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[str, str, Any]] = []

    def request(self, method: str, path: str, **kwargs: Any) -> Response:
        self.sent.append((method, path, kwargs.get("json")))
        status, body = self.answers.pop(0)
        return Response(status, body, wire_errors(body), wire_errors(body, "warnings"))

    def listing(self, path: str, key: str, reduce: Any, **kwargs: Any) -> Response:
        return listed(self.request("GET", path, **kwargs), key, reduce)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_jobs_and_nodes_are_none_not_errors(version: str) -> None:
    """24.11 answers an unknown job 404/2017 and an unknown or FUTURE node 200 with error 0."""
    bodies = captured(version)
    http = Answers(
        (bodies["job_unknown"]["status"], bodies["job_unknown"]["body"]),
        (bodies["node_unknown"]["status"], bodies["node_unknown"]["body"]),
    )
    api = SlurmRestClient(http, codec_for(version))  # type: ignore[arg-type]
    assert api.job(99999) is None
    assert api.node("nosuch") is None


def test_a_submit_keeps_warnings_from_their_own_array() -> None:
    warned = {"job_id": 9, "errors": [], "warnings": [{"description": "field ignored"}]}
    api = SlurmRestClient(Answers((200, warned)), codec_for("v0.0.42"))  # type: ignore[arg-type]
    submitted = api.submit(JobSpec(script="x", environment={"A": "b"}))
    assert (submitted.job_id, submitted.warnings) == (9, ("field ignored",))


def test_node_changes_go_over_rest_where_the_server_can_and_scontrol_otherwise() -> None:
    http = Answers((200, {"errors": []}), (200, {"errors": []}))
    rest = SlurmRestClient(http, codec_for("v0.0.42"))  # type: ignore[arg-type]
    assert {CAN_UPDATE_NODES, CAN_SUBMIT_AS_USER} <= rest.capabilities
    nodes = NodeControl(rest, scontrol=None)
    nodes.drain_node("n1", "reconciler: test")
    nodes.set_node_weight("n1", 3)
    assert http.sent == [
        ("POST", "/slurm/v0.0.42/node/n1", {"state": ["DRAIN"], "reason": "reconciler: test"}),
        ("POST", "/slurm/v0.0.42/node/n1", {"weight": 3}),
    ]
    assert nodes.path == "slurmrestd v0.0.42"
    # The same grammar as scontrol's: nothing reaches the wire that scontrol would refuse.
    with pytest.raises(SlurmArgumentError):
        nodes.drain_node("n1", "bad\nreason")
    with pytest.raises(SlurmArgumentError):
        nodes.set_node_state("n1", NodeState.DOWN)

    old = NodeControl(SlurmRestClient(Answers(), codec_for("v0.0.38")), scontrol=None)  # type: ignore[arg-type]
    assert not old.available and old.path == "none"
    with pytest.raises(SlurmUnsupportedError, match="scontrol"):
        old.resume_node("n1")


def test_an_unchanged_job_list_is_none_not_an_empty_cluster() -> None:
    """24.11's `GET /jobs/?update_time=uts<T>`: nothing changed is a 200 with no jobs and
    last_update 0. Read as "no jobs", it would look as if every placeholder job vanished."""
    unchanged = {"jobs": [], "last_update": {"set": True, "infinite": False, "number": 0}}
    empty = {"jobs": [], "last_update": {"set": True, "infinite": False, "number": 1795583044}}
    http = Answers((200, unchanged), (200, empty), (304, {}))
    api = SlurmRestClient(http, codec_for("v0.0.42"))  # type: ignore[arg-type]
    assert api.jobs(since=1795583000) is None
    snapshot = api.jobs(since=1795583000)
    assert snapshot is not None and snapshot.items == ()
    assert api.nodes(since=1795583000) is None


def test_update_time_is_sent_as_uts_seconds() -> None:
    seen: list[Any] = []

    class Params(Answers):
        def request(self, method: str, path: str, **kwargs: Any) -> Response:
            seen.append(kwargs.get("params"))
            return super().request(method, path, **kwargs)

    api = SlurmRestClient(Params((304, {})), codec_for("v0.0.40"))  # type: ignore[arg-type]
    api.jobs(since=1795583000)
    assert seen == [{"update_time": "uts1795583000"}]


def test_a_cancel_that_failed_per_job_raises_with_slurms_number() -> None:
    body = {"status": [{"error": {"string": "Invalid job id specified", "code": 2017,
                                  "message": "Invalid job id specified"}, "step_id": "7"}],
            "errors": []}  # fmt: skip
    api = SlurmRestClient(Answers((200, body)), codec_for("v0.0.42"))  # type: ignore[arg-type]
    with pytest.raises(SlurmApiError) as caught:
        api.cancel(7)
    assert caught.value.error_number == 2017


def test_cancelling_a_finished_job_is_fine() -> None:
    body = {"status": [{"error": {"code": 2021, "message": "Job/step already completing or "
                                  "completed"}, "step_id": "7"}], "errors": []}  # fmt: skip
    api = SlurmRestClient(Answers((200, body)), codec_for("v0.0.42"))  # type: ignore[arg-type]
    api.cancel(7)


def test_the_admin_comment_goes_out_at_submit_and_comes_back() -> None:
    """The scheduler names its job in the admin comment, which only Slurm operators
    can set, so no user can pass a job of their own off as a placeholder."""
    spec = JobSpec(script="x", environment={"A": "b"}, admin_comment="pod:ns/p@u:s")
    assert submission_to_wire(spec)["job"]["admin_comment"] == "pod:ns/p@u:s"
    wire = {**captured("v0.0.42")["job_running"], "admin_comment": "pod:ns/p@u:s"}
    assert job_from_wire(wire).admin_comment == "pod:ns/p@u:s"
    assert job_from_wire(captured("v0.0.42")["job_running"]).admin_comment == ""


@pytest.mark.parametrize("version", VERSIONS)
def test_diag_reads_the_scheduler_statistics_with_their_timestamps_unwrapped(
    version: str,
) -> None:
    """Captured after 3 submits (1 started, 2 pending) and 15 backfill cycles."""
    http = Answers((200, captured(version)["diag"]))
    diag = SlurmRestClient(http, codec_for(version)).diag()  # type: ignore[arg-type]
    assert http.sent == [("GET", f"/slurm/{version}/diag", None)]
    assert (diag.jobs_submitted, diag.jobs_started, diag.jobs_failed) == (3, 1, 0)
    assert (diag.schedule_cycles, diag.backfill_cycles, diag.backfill_cycle_last) == (56, 15, 198)
    assert (diag.stats_since, diag.backfill_last_cycle_at) == (1795772457, 1795772563)
    assert diag.server_thread_count == 1 and diag.backfill_active is False
    assert 0 < diag.schedule_cycle_mean <= diag.schedule_cycle_max


def test_node_control_asks_slurmrestd_on_first_use_not_at_start(tmp_path: Path) -> None:
    """The in-cluster daemon starts before slurmrestd answers (it creates slurmrestd's Pod): a
    node sync made at start must not reach slurmrestd, and a failed first use is tried again."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    (key := tmp_path / "jwt_hs256.key").write_bytes(b"k" * 32)
    rest = connect_lazily(url, MintedTokens(key, "slurm"), timeout=1)
    nodes = NodeControl(rest, scontrol=None)  # nothing listens: no error yet
    for _ in range(2):
        with pytest.raises(ReconcilerError):
            nodes.drain_node("n1", "reconciler: test")
