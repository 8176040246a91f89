"""slurmrestd data parsers v0.0.40, v0.0.41 and v0.0.42 (Slurm 23.11 to 25.05; 24.11 serves
all three): wire format <-> the plain data of model.py.

The three versions agree on everything the reconciler reads and writes, so one set of pure
functions serves them; the version only changes the path. Unit-tested with bodies captured from
a real slurmrestd 24.11.5. What differs from v0.0.38 (v0038.py), and is absorbed here:
- integers may be `{"set", "infinite", "number"}` (codec.number reads both);
- job and node states are lists: a base state and flags (["IDLE", "DRAIN"]);
- `exit_code` is `{"status": [...], "return_code": {...}}`;
- partitions are nested (`nodes/configured`, `maximums/time`, `partition/state`); their flags
  and preemption mode are not reported (Slurm's own FIXME), so `is_default` is always False;
- a submit takes `environment` as a list of "NAME=value", GRES as `tres_per_node` "gres/gpu:2",
  required/excluded nodes as lists, sharing as `shared: [mode]` (a field named `exclusive` is
  dropped with only a warning), and `user_id`/`group_id` (the job runs as that user, submitted
  by an operator token); `hold` and `priority` are one field on the wire;
- `update_time` is "uts<seconds>"; an unchanged job list is a 200 with no jobs and
  `last_update` 0, not a 304 (codec.unchanged_listing);
- an unknown job is 404 with error 2017; an unknown (or FUTURE) node is a 200 whose error says
  "Failure to query node" with error number 0;
- `POST /node/{name}` updates state, reason and weight: no scontrol needed;
- warnings come in their own `warnings` array;
- `GET /diag` keeps v0.0.38's names; its timestamps are `{"set", "number"}` (v0038.diag_from_wire).
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, MutableMapping
from typing import Any, cast

from reconciler.adapters.slurm.codec import (
    Codec,
    Wire,
    integer,
    limit,
    number,
    text,
    upper_set,
    words,
)
from reconciler.adapters.slurm.model import (
    CAN_DELETE_NODES,
    CAN_LIST_JOB_STATES,
    CAN_SHARE_TOPO,
    CAN_SUBMIT_AS_USER,
    CAN_UPDATE_NODES,
    SHARED_MODES,
    JobSpec,
    JobSummary,
    JobUpdate,
    NodeUpdate,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
)
from reconciler.adapters.slurm.v0038 import diag_from_wire, reservation_from_wire
from reconciler.adapters.slurm.v0038 import job_from_wire as job_from_v0038_wire
from reconciler.adapters.slurm.v0038 import node_from_wire as node_from_v0038_wire
from reconciler.errors import SlurmArgumentError

VERSIONS = ("v0.0.42", "v0.0.41", "v0.0.40")
NODE_BASE_STATES = ("IDLE", "ALLOCATED", "MIXED", "DOWN", "ERROR", "FUTURE", "UNKNOWN")
# Job state flags in the order Slurm's job_state_string() names them before the base state:
# v0.0.38 reported `job_state` as that one word, and callers read it so.
# EXPEDITING (a requeue being expedited) is reported by v0.0.44+ only.
JOB_FLAG_STATES = (
    "COMPLETING", "STAGE_OUT", "CONFIGURING", "EXPEDITING", "RESIZING", "REQUEUED", "REQUEUE_FED",
    "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING",
)  # fmt: skip


def _base_and_flags(value: Any, bases: tuple[str, ...]) -> tuple[str, frozenset[str]]:
    states = upper_set(value)
    base = next((s for s in bases if s in states), "")
    return base, states - {base}


def node_from_wire(d: Wire) -> SlurmNode:
    """v0.0.38's mapping (same keys) with the state list split into base state and flags."""
    base, flags = _base_and_flags(d.get("state"), NODE_BASE_STATES)
    return node_from_v0038_wire(ChainMap({"state": base, "state_flags": sorted(flags)}, _read(d)))


def _job_state(value: Any) -> str:
    states = [w.upper() for w in words(value)]
    return next((s for s in JOB_FLAG_STATES if s in states), states[0] if states else "")


def job_state_from_wire(d: Wire) -> tuple[str, str]:
    """One entry of `GET /jobs/state/` ({"job_id": "7", "state": ["RUNNING"]}) as (id, state);
    an array or heterogeneous job's id as Slurm writes it ("7_1", "7+0")."""
    return text(d.get("job_id")), _job_state(d.get("state"))


def _exit_code(value: Any) -> int | None:
    if isinstance(value, Mapping):
        return number(value.get("return_code"))
    return number(value)


def job_from_wire(d: Wire) -> SlurmJob:
    """v0.0.38's mapping (same keys, integers read in both spellings) with the state list and
    exit code object of v0.0.40+."""
    # A ChainMap, not a copy: every other key is still read from `d` (the spec tests record
    # which keys a codec reads).
    flat = ChainMap(
        {"job_state": _job_state(d.get("job_state")), "exit_code": _exit_code(d.get("exit_code"))},
        _read(d),
    )
    return job_from_v0038_wire(flat)


def job_summary_from_wire(d: Wire) -> JobSummary:
    """job_from_wire's state, partition and reason alone (a unit test holds them equal)."""
    return JobSummary(
        state=_job_state(d.get("job_state")),
        partition=text(d.get("partition")),
        state_reason=text(d.get("state_reason")),
    )


def _section(d: Wire, key: str) -> Wire:
    value = d.get(key)
    return value if isinstance(value, Mapping) else {}


def partition_from_wire(d: Wire) -> SlurmPartition:
    nodes, maximums = _section(d, "nodes"), _section(d, "maximums")
    state = words(_section(d, "partition").get("state"))
    return SlurmPartition(
        name=text(d.get("name")),
        state=state[0].upper() if state else "",
        nodes=text(nodes.get("configured")),
        is_default=False,  # not reported by v0.0.40-v0.0.42
        priority_tier=integer(_section(d, "priority").get("tier")),
        max_time_minutes=limit(maximums.get("time")),
        default_time_minutes=limit(_section(d, "defaults").get("time")),
        max_nodes_per_job=limit(maximums.get("nodes")),
        min_nodes_per_job=integer(_section(d, "minimums").get("nodes")),
        preempt_mode=(),  # not reported by v0.0.40-v0.0.42
        flags=frozenset(),
        allowed_accounts=words(_section(d, "accounts").get("allowed")),
        allowed_qos=words(_section(d, "qos").get("allowed")),
        allowed_groups=words(_section(d, "groups").get("allowed")),
        qos=text(_section(d, "qos").get("assigned")),
        total_nodes=integer(nodes.get("total")),
        total_cpus=integer(_section(d, "cpus").get("total")),
    )


# JobSpec/JobUpdate attribute -> v0.0.40+ key, where they differ.
_WIRE_KEYS = {"time_limit_minutes": "time_limit", "gres": "tres_per_node"}
_PLAIN = (
    "name", "partition", "account", "comment", "qos", "reservation", "constraints", "prefer",
    "priority", "time_limit_minutes", "required_nodes", "excluded_nodes", "cpus_per_task",
    "memory_per_node", "tasks", "nice", "current_working_directory", "standard_output",
    "user_id", "group_id", "admin_comment",
)  # fmt: skip


def _job_fields(source: object, names: tuple[str, ...]) -> dict[str, Any]:
    wire: dict[str, Any] = {}
    for name in names:
        value = getattr(source, name, None)
        if value is None:
            continue
        if name == "gres":
            value = ",".join(f"gres/{item}" for item in value.split(",") if item)
        elif name == "nodes":
            value = str(value)
        elif name in ("user_id", "group_id"):
            value = str(value)  # USER_ID/GROUP_ID take a name or a numeric string
        elif name in ("required_nodes", "excluded_nodes"):
            value = [value] if value else []  # a list (a string is taken with a warning)
        wire[_WIRE_KEYS.get(name, name)] = value
    return wire


def submission_to_wire(spec: JobSpec) -> dict[str, Any]:
    """The body of POST /job/submit; refuses what slurmrestd would reject with a vaguer error."""
    if not spec.environment:
        raise SlurmArgumentError(
            "environment", dict(spec.environment), "slurmrestd requires at least one variable"
        )
    bad = [k for k in spec.environment if not k or "=" in k]
    if bad:
        raise SlurmArgumentError("environment", bad, "variable names must not be empty or hold =")
    if spec.group_id is not None and spec.user_id is None:
        raise SlurmArgumentError("group_id", spec.group_id, "needs a user_id")
    if spec.hold and spec.priority is not None:
        # v0.0.40+ read both into the job's priority: the later key would silently win.
        raise SlurmArgumentError("hold", spec.hold, "a held job cannot be given a priority")
    job = _job_fields(spec, (*_PLAIN, "nodes", "gres"))
    if spec.shared is not None:
        if spec.shared not in SHARED_MODES:
            raise SlurmArgumentError("shared", spec.shared, f"expected one of {SHARED_MODES}")
        job["shared"] = [spec.shared]
    job["environment"] = [f"{k}={v}" for k, v in spec.environment.items()]
    if spec.hold:
        job["hold"] = True
    return {"script": spec.script, "job": job}


def update_to_wire(update: JobUpdate) -> dict[str, Any]:
    wire = _job_fields(update, (*_PLAIN, "nodes", "gres", "hold"))
    if not wire:
        raise SlurmArgumentError("update", update, "no field to change")
    return wire


def node_update_to_wire(update: NodeUpdate) -> dict[str, Any]:
    wire: dict[str, Any] = {}
    if update.state is not None:
        wire["state"] = [update.state.upper()]
    if update.reason is not None:
        wire["reason"] = update.reason
    if update.weight is not None:
        wire["weight"] = update.weight
    if not wire:
        raise SlurmArgumentError("node update", update, "no field to change")
    return wire


def since_param(seconds: int) -> str:
    """`update_time` as Slurm's parse_time reads it: a bare number fails to parse on v0.0.40
    and v0.0.41 (422 "Parsing of N for timestamp failed"); "uts" + seconds works on all."""
    return f"uts{seconds}"


def codec(version: str) -> Codec:
    return Codec(
        version=version,
        capabilities=frozenset(
            {
                CAN_UPDATE_NODES,
                CAN_SUBMIT_AS_USER,
                CAN_SHARE_TOPO,
                CAN_DELETE_NODES,
                CAN_LIST_JOB_STATES,
            }
        ),
        node=node_from_wire,
        partition=partition_from_wire,
        reservation=reservation_from_wire,
        job=job_from_wire,
        job_summary=job_summary_from_wire,
        job_state=job_state_from_wire,
        submission=submission_to_wire,
        job_update=update_to_wire,
        node_update=node_update_to_wire,
        diag=diag_from_wire,
        since=since_param,
    )


CODECS = tuple(codec(version) for version in VERSIONS)


def _read(d: Wire) -> MutableMapping[str, Any]:
    """`d` as ChainMap's typing wants its maps; the codecs only read through it."""
    return cast(MutableMapping[str, Any], d)
