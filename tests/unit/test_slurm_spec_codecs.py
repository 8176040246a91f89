"""The codecs of data parsers v0.0.43 to v0.0.45 against the OpenAPI documents Slurm 26.05.3's
slurmrestd publishes (tests/unit/slurm_openapi/): every body a codec writes validates against
its version's schema, every field it reads is one that version's answer has, and answers built
to the schema decode to what they say. v0.0.42, which 24.11.5 also serves, is read beside them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from reconciler.adapters.scontrol_args import NodeState
from reconciler.adapters.slurm import v0038
from reconciler.adapters.slurm.codec import controller_responds
from reconciler.adapters.slurm.model import SHARED_MODES, JobSpec, JobUpdate, NodeUpdate
from reconciler.adapters.slurm.versions import codec_for
from tests.unit import slurm_specs as specs

NEW = ("v0.0.43", "v0.0.44", "v0.0.45")
READ = ("v0.0.42", *NEW)
# GET path, list key, the codec's decoder of one entry.
LISTS: dict[str, tuple[str, str]] = {
    "job": ("/jobs/", "jobs"),
    "job_summary": ("/jobs/", "jobs"),
    "node": ("/nodes/", "nodes"),
    "partition": ("/partitions/", "partitions"),
    "reservation": ("/reservations/", "reservations"),
}
EVERY_FIELD = JobSpec(
    script="#!/bin/sh\ntrue\n", environment={"PATH": "/bin", "A": "x=y"}, name="j",
    partition="gpu", account="acct", comment="c", qos="normal", reservation="r1",
    constraints="a100", prefer="ib", priority=100, time_limit_minutes=10, nodes="2-3",
    required_nodes="n[1-2]", excluded_nodes="n3", gres="gpu:2", cpus_per_task=2,
    memory_per_node=1024, tasks=4, nice=5, current_working_directory="/tmp",
    standard_output="/tmp/out", shared="user", user_id=1001, group_id=1002, admin_comment="pod",
)  # fmt: skip
EVERY_UPDATE = JobUpdate(
    comment="c", time_limit_minutes=3, hold=False, priority=7, nice=1, partition="p",
    reservation="r", constraints="f", qos="q", nodes=2, required_nodes="n1",
    excluded_nodes="n2", gres="gpu:1",
)  # fmt: skip


def _entry(version: str, kind: str) -> tuple[dict[str, Any], Any]:
    """One entry of a list answer built to the schema, and the entry's schema."""
    path, key = LISTS[kind]
    schema = specs.response_schema(version, path)
    body = specs.build(version, schema)
    item = specs.field(version, schema, f"{key}/[]")
    assert item is not None
    return body[key][0], item


def _answer_problems(version: str, kind: str, entry: dict[str, Any]) -> list[str]:
    path, key = LISTS[kind]
    schema = specs.response_schema(version, path)
    return specs.problems(version, schema, {**specs.build(version, schema), key: [entry]})


@pytest.mark.parametrize("kind", list(LISTS))
@pytest.mark.parametrize("version", READ)
def test_every_field_a_codec_reads_is_in_its_versions_answer(version: str, kind: str) -> None:
    """A field the version renamed or dropped fails here, not as an empty value in production."""
    entry, item = _entry(version, kind)
    reads = specs.Reads(entry)
    getattr(codec_for(version), kind)(reads)
    assert len(reads.log) >= 3
    assert specs.missing_reads(version, item, reads.log) == []


@pytest.mark.parametrize("version", READ)
def test_every_diag_statistic_read_is_in_its_versions_answer(version: str) -> None:
    schema = specs.response_schema(version, "/diag/")
    statistics = specs.field(version, schema, "statistics")
    assert statistics is not None
    reads = specs.Reads(specs.build(version, statistics))
    codec_for(version).diag(reads)
    assert specs.missing_reads(version, statistics, reads.log) == []


def test_a_renamed_field_is_caught() -> None:
    """v0.0.38's partition reader on v0.0.45's partitions: its flat names are not there."""
    entry, item = _entry("v0.0.45", "partition")
    reads = specs.Reads(entry)
    v0038.partition_from_wire(reads)
    assert {"max_time_limit", "total_nodes", "preemption_mode"} <= set(
        specs.missing_reads("v0.0.45", item, reads.log)
    )


@pytest.mark.parametrize("version", READ)
def test_errors_warnings_meta_and_pings_are_where_the_client_reads_them(version: str) -> None:
    ping = specs.response_schema(version, "/ping/")
    for path in ("errors/[]/error_number", "errors/[]/error", "errors/[]/description",
                 "errors/[]/source", "warnings/[]/description", "meta/slurm/release",
                 "pings/[]/responding"):  # fmt: skip
        assert specs.field(version, ping, path) is not None, path
    submitted = specs.response_schema(version, "/job/submit", "post")
    assert specs.field(version, submitted, "job_id") is not None
    cancelled = specs.response_schema(version, "/job/{job_id}", "delete")
    for path in ("status/[]/error/code", "status/[]/error/message"):
        assert specs.field(version, cancelled, path) is not None, path


@pytest.mark.parametrize("responding", [True, False])
@pytest.mark.parametrize("version", READ)
def test_a_ping_says_whether_slurmctld_responds(version: str, responding: bool) -> None:
    """v0.0.45 dropped `pinged` ("UP"/"DOWN"); `responding` is in every version."""
    schema = specs.response_schema(version, "/ping/")
    body = specs.build(version, schema)
    body["pings"][0].update(responding=responding)
    if "pinged" in body["pings"][0]:
        body["pings"][0]["pinged"] = "UP" if responding else "DOWN"
    assert specs.problems(version, schema, body) == []
    assert controller_responds(body) is responding


def _job(version: str, **fields: Any) -> dict[str, Any]:
    entry = specs.job(version)
    entry.update(fields)
    return entry


@pytest.mark.parametrize("version", READ)
def test_a_job_built_to_the_schema_reads_as_it_says(version: str) -> None:
    entry = _job(
        version, job_id=7, name="train", job_state=["RUNNING"], partition="gpu",
        nodes="n[1-2]", tres_per_node="gres/gpu:2", user_id=1001, group_id=1002,
        time_limit={"set": True, "infinite": False, "number": 30},
        exit_code={"status": ["SUCCESS"], "return_code": {"set": True, "infinite": False,
                                                          "number": 0}},
        admin_comment="pod:ns/p", flags=["JOB_WAS_RUNNING"],
    )  # fmt: skip
    assert _answer_problems(version, "job", entry) == []
    job = codec_for(version).job(entry)
    assert (job.job_id, job.name, job.state, job.partition, job.nodes) == (
        7, "train", "RUNNING", "gpu", "n[1-2]",
    )  # fmt: skip
    assert (job.gres, job.user_id, job.group_id) == ("gpu:2", 1001, 1002)
    assert job.time_limit_minutes == 30
    assert (job.exit_code, job.admin_comment, job.flags) == (0, "pod:ns/p", {"JOB_WAS_RUNNING"})
    assert codec_for(version).job_summary(entry).state == "RUNNING"


@pytest.mark.parametrize("version", ["v0.0.44", "v0.0.45"])
def test_a_job_whose_requeue_is_expedited_reads_as_slurm_names_it(version: str) -> None:
    """v0.0.44 added EXPEDITING, a flag squeue shows in place of the base state."""
    entry = _job(version, job_state=["PENDING", "EXPEDITING"])
    assert _answer_problems(version, "job", entry) == []
    assert codec_for(version).job(entry).state == "EXPEDITING"
    assert codec_for(version).job_state({"job_id": "7", "state": ["PENDING", "EXPEDITING"]}) == (
        "7", "EXPEDITING",
    )  # fmt: skip


def test_v0043_has_no_expediting_state() -> None:
    entry = _job("v0.0.43", job_state=["PENDING", "EXPEDITING"])
    assert any("EXPEDITING" in p for p in _answer_problems("v0.0.43", "job", entry))


@pytest.mark.parametrize("version", READ)
def test_a_node_built_to_the_schema_reads_as_its_base_state_and_flags(version: str) -> None:
    entry, _ = _entry(version, "node")
    flags = ["DRAIN", "BLOCKED"] if version >= "v0.0.44" else ["DRAIN"]
    entry.update(
        name="n1", state=["MIXED", *flags], reason="r", cpus=8, real_memory=4096,
        weight=3, features=["a100"], partitions=["gpu"], gres="gpu:4",
    )  # fmt: skip
    assert _answer_problems(version, "node", entry) == []
    node = codec_for(version).node(entry)
    assert (node.name, node.state, node.flags) == ("n1", "MIXED", frozenset(flags))
    assert (node.cpus, node.real_memory, node.weight, node.gres) == (8, 4096, 3, "gpu:4")
    assert node.drain_requested and node.features == ("a100",)


@pytest.mark.parametrize("version", READ)
def test_a_partition_built_to_the_schema_reads_flat(version: str) -> None:
    entry, _ = _entry(version, "partition")
    entry.update(name="gpu")
    entry["nodes"].update(configured="n[1-4]", total=4)
    entry["maximums"]["time"] = {"set": True, "infinite": False, "number": 60}
    entry["partition"]["state"] = ["UP"]
    assert _answer_problems(version, "partition", entry) == []
    part = codec_for(version).partition(entry)
    assert (part.name, part.nodes, part.total_nodes, part.state) == ("gpu", "n[1-4]", 4, "UP")
    assert part.max_time_minutes == 60


def test_v0045_partitions_say_which_is_the_default_and_how_it_preempts() -> None:
    entry, _ = _entry("v0.0.45", "partition")
    entry.update(flags=["DEFAULT", "HIDDEN"], preempt_mode=["REQUEUE"])
    entry["partition"]["exclusive"] = "USER"
    assert _answer_problems("v0.0.45", "partition", entry) == []
    part = codec_for("v0.0.45").partition(entry)
    assert part.is_default and part.preempt_mode == ("REQUEUE",)
    assert part.flags == {"DEFAULT", "HIDDEN", "EXCLUSIVE_USER"}
    older = codec_for("v0.0.44").partition(copy.deepcopy(entry))
    assert not older.is_default and older.preempt_mode == ()  # v0.0.44 has no such fields


def _submit_problems(version: str, body: dict[str, Any]) -> list[str]:
    return specs.problems(version, specs.request_schema(version, "/job/submit"), body)


@pytest.mark.parametrize("version", NEW)
def test_a_submission_with_every_field_validates(version: str) -> None:
    body = codec_for(version).submission(EVERY_FIELD)
    assert _submit_problems(version, body) == []
    assert body["job"]["time_limit"] == {"set": True, "infinite": False, "number": 10}


@pytest.mark.parametrize("version", NEW)
def test_every_sharing_mode_and_a_hold_validate(version: str) -> None:
    submission = codec_for(version).submission
    for shared in SHARED_MODES:
        body = submission(JobSpec(script="x", environment={"A": "b"}, shared=shared))
        assert _submit_problems(version, body) == [], shared
    held = submission(JobSpec(script="x", environment={"A": "b"}, hold=True))
    assert _submit_problems(version, held) == []


@pytest.mark.parametrize("version", NEW)
def test_a_job_update_with_every_field_validates(version: str) -> None:
    body = codec_for(version).job_update(EVERY_UPDATE)
    schema = specs.request_schema(version, "/job/{job_id}")
    assert specs.problems(version, schema, body) == []
    assert body["priority"] == {"set": True, "infinite": False, "number": 7}


@pytest.mark.parametrize("version", NEW)
def test_every_node_update_the_reconciler_makes_validates(version: str) -> None:
    encode: Callable[[NodeUpdate], dict[str, Any]] | None = codec_for(version).node_update
    assert encode is not None
    schema = specs.request_schema(version, "/node/{node_name}")
    for state in NodeState:
        body = encode(NodeUpdate(state=state.value.lower(), reason="reconciler: test"))
        assert specs.problems(version, schema, body) == [], state
    assert specs.problems(version, schema, encode(NodeUpdate(weight=5))) == []


def test_the_schema_refuses_what_slurm_would_misread() -> None:
    """The validation can fail: v0040's plain integers are not the documented spelling, and a
    node state no version knows is refused."""
    plain = codec_for("v0.0.42").submission(EVERY_FIELD)
    assert any(p.startswith("job/time_limit") for p in _submit_problems("v0.0.45", plain))
    schema = specs.request_schema("v0.0.45", "/node/{node_name}")
    assert specs.problems("v0.0.45", schema, {"state": ["SLEEPY"]}) != []
