"""slurmrestd `openapi/v0.0.38` (Slurm 22.05): wire format <-> the plain data of model.py.

The mapping functions are pure (dict in, dataclass out and back) and unit-tested with bodies
captured from a real slurmrestd 22.05.8. Wire quirks they absorb:
- error numbers are spelled `error_number`, `error_code` or `errno` depending on the endpoint;
- "not found" is HTTP 500 with errno 2017 (job) or 2018 (node);
- a submit may answer 200 *with* errors and a job id (2042 "held", 2015 "partition config not
  available now"): the job exists, so those become warnings;
- `min nodes per job` has spaces in its key; unlimited limits are -1 or null;
- node state is lower case ("idle") beside upper-case flags; job gres is `tres_per_node`
  "gres:gpu:2";
- job update silently ignores `name`, so JobUpdate has no name;
- `user_id`/`group_id` are "Disabled keys" at submit: a job runs as its token's user;
- sharing is `exclusive` ("exclusive", "user", "mcs") or `oversubscribe`; no `topo`;
- no node update endpoint (drain, resume and weight go through scontrol);
- nodes in state FUTURE are not listed at all (and `node(name)` is None for them);
- `GET /diag` answers `statistics` with the names sdiag's RPC uses, in plain integers (v0.0.40+
  keep the names, and wrap the timestamps in `{"set", "number"}`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from reconciler.adapters.slurm.codec import (
    Codec,
    Wire,
    gres_per_node,
    integer,
    limit,
    text,
    upper_set,
    words,
)
from reconciler.adapters.slurm.model import (
    JobSpec,
    JobSummary,
    JobUpdate,
    SlurmDiag,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmReservation,
)
from reconciler.errors import SlurmArgumentError

VERSION = "v0.0.38"


def node_from_wire(d: Wire) -> SlurmNode:
    return SlurmNode(
        name=text(d.get("name")),
        state=text(d.get("state")).upper() or "UNKNOWN",
        flags=upper_set(d.get("state_flags")),
        reason=text(d.get("reason")),
        reason_set_by=d.get("reason_set_by_user") or None,
        reason_changed_at=integer(d.get("reason_changed_at")) or None,
        cpus=integer(d.get("cpus")),
        alloc_cpus=integer(d.get("alloc_cpus")),
        real_memory=integer(d.get("real_memory")),
        alloc_memory=integer(d.get("alloc_memory")),
        gres=text(d.get("gres")),
        gres_used=text(d.get("gres_used")),
        features=words(d.get("features")),
        active_features=words(d.get("active_features")),
        partitions=words(d.get("partitions")),
        address=text(d.get("address")),
        hostname=text(d.get("hostname")),
        weight=integer(d.get("weight"), 1),
    )


def partition_from_wire(d: Wire) -> SlurmPartition:
    flags = upper_set(d.get("flags"))
    min_nodes = d.get("min_nodes_per_job", d.get("min nodes per job"))  # 22.05 spells it so
    return SlurmPartition(
        name=text(d.get("name")),
        state=text(d.get("state")).upper(),
        nodes=text(d.get("nodes")),
        is_default="DEFAULT" in flags,
        priority_tier=integer(d.get("priority_tier")),
        max_time_minutes=limit(d.get("max_time_limit")),
        default_time_minutes=limit(d.get("default_time_limit")),
        max_nodes_per_job=limit(d.get("maximum_nodes_per_job")),
        min_nodes_per_job=integer(min_nodes),
        preempt_mode=tuple(w.upper() for w in words(d.get("preemption_mode"))),
        flags=flags,
        allowed_accounts=words(d.get("allowed_accounts")),
        allowed_qos=words(d.get("allowed_qos")),
        allowed_groups=words(d.get("allowed_groups")),
        qos=text(d.get("qos")),
        total_nodes=integer(d.get("total_nodes")),
        total_cpus=integer(d.get("total_cpus")),
    )


def reservation_from_wire(d: Wire) -> SlurmReservation:
    return SlurmReservation(
        name=text(d.get("name")),
        node_list=text(d.get("node_list")),
        node_count=integer(d.get("node_count")),
        start_time=integer(d.get("start_time")),
        end_time=integer(d.get("end_time")),
        flags=upper_set(d.get("flags")),
        users=words(d.get("users")),
        accounts=words(d.get("accounts")),
        partition=text(d.get("partition")),
        features=text(d.get("features")),
        core_count=integer(d.get("core_count")),
    )


def job_from_wire(d: Wire) -> SlurmJob:
    return SlurmJob(
        job_id=integer(d.get("job_id")),
        name=text(d.get("name")),
        state=text(d.get("job_state")).upper(),
        state_reason=text(d.get("state_reason")),
        state_description=text(d.get("state_description")),
        partition=text(d.get("partition")),
        nodes=text(d.get("nodes")),
        required_nodes=text(d.get("required_nodes")),
        excluded_nodes=text(d.get("excluded_nodes")),
        reservation=text(d.get("resv_name")),
        constraints=text(d.get("features")),
        gres=gres_per_node(d.get("tres_per_node")),
        user_name=text(d.get("user_name")),
        user_id=d["user_id"] if isinstance(d.get("user_id"), int) else None,
        group_id=d["group_id"] if isinstance(d.get("group_id"), int) else None,
        comment=text(d.get("comment")),
        time_limit_minutes=limit(d.get("time_limit")),
        priority=integer(d.get("priority")),
        node_count=integer(d.get("node_count")),
        cpus=integer(d.get("cpus")),
        submit_time=integer(d.get("submit_time")),
        start_time=integer(d.get("start_time")),
        end_time=integer(d.get("end_time")),
        exit_code=d["exit_code"] if isinstance(d.get("exit_code"), int) else None,
        batch_host=text(d.get("batch_host")),
        flags=upper_set(d.get("flags")),
        admin_comment=text(d.get("admin_comment")),
    )


def job_summary_from_wire(d: Wire) -> JobSummary:
    """job_from_wire's state, partition and reason alone (a unit test holds them equal)."""
    return JobSummary(
        state=text(d.get("job_state")).upper(),
        partition=text(d.get("partition")),
        state_reason=text(d.get("state_reason")),
    )


def diag_from_wire(d: Wire) -> SlurmDiag:
    """`statistics` of `GET /diag`; integers in either spelling (codec.integer), so v0.0.40+
    read it with this too."""
    return SlurmDiag(
        stats_since=integer(d.get("req_time_start")),
        server_thread_count=integer(d.get("server_thread_count")),
        agent_queue_size=integer(d.get("agent_queue_size")),
        agent_count=integer(d.get("agent_count")),
        dbd_agent_queue_size=integer(d.get("dbd_agent_queue_size")),
        schedule_cycle_last=integer(d.get("schedule_cycle_last")),
        schedule_cycle_max=integer(d.get("schedule_cycle_max")),
        schedule_cycle_mean=integer(d.get("schedule_cycle_mean")),
        schedule_cycles=integer(d.get("schedule_cycle_total")),
        schedule_queue_length=integer(d.get("schedule_queue_length")),
        jobs_submitted=integer(d.get("jobs_submitted")),
        jobs_started=integer(d.get("jobs_started")),
        jobs_completed=integer(d.get("jobs_completed")),
        jobs_canceled=integer(d.get("jobs_canceled")),
        jobs_failed=integer(d.get("jobs_failed")),
        backfill_active=d.get("bf_active") is True,
        backfill_cycle_last=integer(d.get("bf_cycle_last")),
        backfill_cycle_max=integer(d.get("bf_cycle_max")),
        backfill_cycle_mean=integer(d.get("bf_cycle_mean")),
        backfill_cycles=integer(d.get("bf_cycle_counter")),
        backfill_last_cycle_at=integer(d.get("bf_when_last_cycle")),
        backfilled_jobs=integer(d.get("bf_backfilled_jobs")),
        backfill_queue_length=integer(d.get("bf_queue_len")),
    )


# JobSpec/JobUpdate attribute -> v0.0.38 key, where they differ.
_WIRE_KEYS = {
    "time_limit_minutes": "time_limit",
    "required_nodes": "node_list",
    "excluded_nodes": "exclude_nodes",
}
# Fields submission_to_wire places itself, or refuses.
_NOT_HERE = ("script", "environment", "hold", "shared", "user_id", "group_id", "admin_comment")
_SUBMIT_FIELDS = tuple(f.name for f in fields(JobSpec) if f.name not in _NOT_HERE)
_UPDATE_FIELDS = tuple(f.name for f in fields(JobUpdate))
# JobSpec.shared -> v0.0.38's keys.
_SHARING: dict[str, tuple[str, Any]] = {
    "none": ("exclusive", "exclusive"),
    "oversubscribe": ("oversubscribe", True),
    "user": ("exclusive", "user"),
    "mcs": ("exclusive", "mcs"),
}


def _wire_fields(source: object, names: Iterable[str]) -> dict[str, Any]:
    wire: dict[str, Any] = {}
    for name in names:
        value = getattr(source, name)
        if value is None:
            continue
        wire[_WIRE_KEYS.get(name, name)] = str(value) if name == "nodes" else value
    return wire


def submission_to_wire(spec: JobSpec) -> dict[str, Any]:
    """The body of POST /job/submit; refuses what slurmrestd would reject with a vaguer error."""
    if not spec.environment:
        raise SlurmArgumentError(
            "environment", dict(spec.environment), "slurmrestd requires at least one variable"
        )
    if spec.user_id is not None or spec.group_id is not None:
        raise SlurmArgumentError(
            "user_id",
            spec.user_id,
            f"slurmrestd {VERSION} cannot submit as another user: submit with a token of that user",
        )
    if spec.admin_comment is not None:
        # A job here runs as its token's user, who may not set it; the scheduler marks jobs
        # only where an operator submits every job.
        raise SlurmArgumentError(
            "admin_comment", spec.admin_comment, f"not sent to slurmrestd {VERSION}"
        )
    job = _wire_fields(spec, _SUBMIT_FIELDS)
    if spec.shared is not None:
        if spec.shared not in _SHARING:
            raise SlurmArgumentError(
                "shared", spec.shared, f"{VERSION} (Slurm 22.05) knows only {', '.join(_SHARING)}"
            )
        key, value = _SHARING[spec.shared]
        job[key] = value
    job["environment"] = dict(spec.environment)
    if spec.hold:
        job["hold"] = True
    return {"script": spec.script, "job": job}


def update_to_wire(update: JobUpdate) -> dict[str, Any]:
    wire = _wire_fields(update, _UPDATE_FIELDS)
    if not wire:
        raise SlurmArgumentError("update", update, "no field to change")
    return wire


CODEC = Codec(
    version=VERSION,
    capabilities=frozenset(),
    node=node_from_wire,
    partition=partition_from_wire,
    reservation=reservation_from_wire,
    job=job_from_wire,
    job_summary=job_summary_from_wire,
    submission=submission_to_wire,
    job_update=update_to_wire,
    diag=diag_from_wire,
)
