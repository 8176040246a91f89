"""Slurm's objects as the reconciler sees them, whatever the REST version: plain dataclasses
and the `SlurmRestApi` protocol. Each OpenAPI version is one codec module that maps its wire
format onto them (`v0038.py` for Slurm 22.05's `openapi/v0.0.38`, `v0040.py` for the data
parsers v0.0.40-v0.0.42 of Slurm 23.11+, `v0043.py` and `v0045.py` for v0.0.43-v0.0.45 of
25.05+); one client (`client.py`) speaks through whichever codec the server's `/openapi/v3`
offers, over `transport.py`.

`update_time` honestly: slurmrestd answers `?update_time=T` with 304 when nothing changed since
T and with *everything* otherwise, never a per-object delta. So `jobs(since=T)` returns None
("unchanged") or a full snapshot, and each snapshot says which `since` to pass next.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar, overload

from reconciler.errors import SlurmArgumentError

# The signal names every version's cancel endpoint accepts (v0.0.38's `signal` enum).
SIGNALS = frozenset(
    {
        "HUP",
        "INT",
        "QUIT",
        "ABRT",
        "KILL",
        "ALRM",
        "TERM",
        "USR1",
        "USR2",
        "URG",
        "CONT",
        "STOP",
        "TSTP",
        "TTIN",
        "TTOU",
    }
)

T = TypeVar("T")
# A GPU count in a gres string: "gpu:4", "gpu:a100:4(S:0-1)", "gpu:a100:2(IDX:0-1)".
_GPU = re.compile(r"gpu(?::[^:(,]+)?:(\d+)")


def gres_gpus(gres: str) -> int:
    """GPUs in a gres string (a node's `gres` or `gres_used`): "gpu:quadro_rtx_4000:4",
    "gpu:4(IDX:0-3)" -> 4; no GPU -> 0."""
    return sum(int(m) for m in _GPU.findall(gres or ""))


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str  # base state, upper case: IDLE, ALLOCATED, MIXED, DOWN, FUTURE, UNKNOWN, ...
    flags: frozenset[str]  # upper case: DRAIN, NOT_RESPONDING, RESERVED, COMPLETING, ...
    reason: str
    reason_set_by: str | None
    reason_changed_at: int | None
    cpus: int
    alloc_cpus: int
    real_memory: int  # MB
    alloc_memory: int  # MB
    gres: str  # as configured, e.g. "gpu:4"
    gres_used: str
    features: tuple[str, ...]
    active_features: tuple[str, ...]
    partitions: tuple[str, ...]
    address: str
    hostname: str
    weight: int

    @property
    def drain_requested(self) -> bool:
        """DRAIN flag set: DRAINING while jobs run, DRAINED once idle."""
        return "DRAIN" in self.flags


@dataclass(frozen=True)
class SlurmPartition:
    name: str
    state: str  # UP, DOWN, DRAIN, INACTIVE
    nodes: str  # hostlist expression, e.g. "node[1-4]"
    is_default: bool
    priority_tier: int
    max_time_minutes: int | None  # None: unlimited
    default_time_minutes: int | None
    max_nodes_per_job: int | None  # None: unlimited
    min_nodes_per_job: int
    preempt_mode: tuple[str, ...]  # upper case: REQUEUE, CANCEL, OFF, ...
    flags: frozenset[str]  # upper case: DEFAULT, HIDDEN, EXCLUSIVE_USER, ...
    allowed_accounts: tuple[str, ...]
    allowed_qos: tuple[str, ...]
    allowed_groups: tuple[str, ...]
    qos: str
    total_nodes: int
    total_cpus: int


@dataclass(frozen=True)
class SlurmReservation:
    name: str
    node_list: str
    node_count: int
    start_time: int
    end_time: int
    flags: frozenset[str]  # upper case: MAINT, IGNORE_JOBS, SPEC_NODES, ...
    users: tuple[str, ...]
    accounts: tuple[str, ...]
    partition: str
    features: str
    core_count: int


@dataclass(frozen=True)
class SlurmJob:
    job_id: int
    name: str
    state: str  # PENDING, RUNNING, COMPLETED, CANCELLED, FAILED, ...
    state_reason: str  # "None" when there is none, as Slurm says it
    state_description: str
    partition: str
    nodes: str  # allocated nodes (hostlist); "" while pending
    required_nodes: str
    excluded_nodes: str
    reservation: str
    constraints: str
    gres: str  # per node, e.g. "gpu:2"
    user_name: str
    user_id: int | None
    group_id: int | None
    comment: str
    time_limit_minutes: int | None  # None: unlimited
    priority: int
    node_count: int
    cpus: int
    submit_time: int
    start_time: int
    end_time: int
    exit_code: int | None
    batch_host: str
    flags: frozenset[str]
    # Only Slurm operators and admins can set it: what it says, no user can have written.
    admin_comment: str = ""


@dataclass(frozen=True, slots=True)
class JobSummary:
    """What the metrics count of a job, read as SlurmJob reads it: a job list decoded into
    these (`job_summaries()`) holds a few hundred bytes per job, not its whole object."""

    state: str  # as SlurmJob.state
    partition: str
    state_reason: str


# How a job shares its nodes, in Slurm's own words (job_desc `shared`, sbatch --exclusive and
# --oversubscribe): none = the whole node (--exclusive), oversubscribe = with any job,
# user/mcs = only with jobs of the same user / MCS label, topo = alone in its topology segment.
Shared = Literal["none", "oversubscribe", "user", "mcs", "topo"]
SHARED_MODES: tuple[Shared, ...] = ("none", "oversubscribe", "user", "mcs", "topo")

# What a server may or may not offer (see SlurmRestApi.capabilities).
CAN_UPDATE_NODES = "update_nodes"  # drain/resume/state/weight over REST (no scontrol)
CAN_SUBMIT_AS_USER = "submit_as_user"  # user_id/group_id in a submit (no per-user token)
CAN_SHARE_TOPO = "shared_topo"  # shared: topo
CAN_DELETE_NODES = "delete_nodes"  # DELETE /node/{name}: dynamic nodes (slurmd -Z) leave
CAN_LIST_JOB_STATES = "job_states"  # GET /jobs/state/: every job's id and state, cheaply


@dataclass(frozen=True)
class JobSpec:
    """A batch job to submit; `environment` must not be empty. It runs as `user_id` where the
    server can submit as a user (CAN_SUBMIT_AS_USER), otherwise as the token's user."""

    script: str
    environment: Mapping[str, str]
    name: str | None = None
    partition: str | None = None
    account: str | None = None
    comment: str | None = None
    qos: str | None = None
    reservation: str | None = None
    constraints: str | None = None
    prefer: str | None = None  # soft constraints (node features), Slurm 22.05+
    priority: int | None = None  # only operators (root) may set it; ignored for other users
    time_limit_minutes: int | None = None
    nodes: str | int | None = None  # 2 or "2-3"
    required_nodes: str | None = None  # hostlist
    excluded_nodes: str | None = None
    gres: str | None = None  # per node, e.g. "gpu:2"
    cpus_per_task: int | None = None
    memory_per_node: int | None = None  # MB
    tasks: int | None = None
    hold: bool = False
    nice: int | None = None
    current_working_directory: str | None = None
    standard_output: str | None = None
    shared: Shared | None = None  # None: the partition's default
    user_id: int | None = None
    group_id: int | None = None  # None: the user's primary group
    admin_comment: str | None = None  # needs an operator's token (v0.0.40+ here)


@dataclass(frozen=True)
class JobUpdate:
    """Fields to change on a job; None leaves a field alone, "" clears a string field."""

    comment: str | None = None
    time_limit_minutes: int | None = None
    hold: bool | None = None
    priority: int | None = None
    nice: int | None = None
    partition: str | None = None
    reservation: str | None = None
    constraints: str | None = None
    qos: str | None = None
    nodes: str | int | None = None
    required_nodes: str | None = None
    excluded_nodes: str | None = None
    gres: str | None = None


@dataclass(frozen=True)
class NodeUpdate:
    """Fields to change on a node; None leaves a field alone. `state` as scontrol takes it
    (DRAIN, RESUME, DOWN, FUTURE, ...); DRAIN and DOWN need a `reason`."""

    state: str | None = None
    reason: str | None = None
    weight: int | None = None


@dataclass(frozen=True)
class SubmittedJob:
    """A job Slurm accepted. `warnings` are errors Slurm reported *with* a job id (e.g. 2042
    "held"): the job exists, so they are information, not failure."""

    job_id: int
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Snapshot(Generic[T]):
    """All objects of one kind. Pass `as_of` as the next `since`: it is one second before the
    request left (by this host's clock; v0.0.38 does not say the server's), so a change in that
    same second is reported again rather than missed."""

    items: tuple[T, ...]
    as_of: int


JobsSnapshot = Snapshot[SlurmJob]


@dataclass(frozen=True)
class SlurmDiag:
    """slurmctld's scheduler statistics (`sdiag`, `GET /diag`). Times are Slurm's
    microseconds; counts of jobs and cycles run since `stats_since` (slurmctld resets them at
    midnight and on `sdiag --reset`)."""

    stats_since: int  # epoch seconds; 0 when not reported
    server_thread_count: int
    agent_queue_size: int
    agent_count: int
    dbd_agent_queue_size: int
    schedule_cycle_last: int
    schedule_cycle_max: int
    schedule_cycle_mean: int
    schedule_cycles: int
    schedule_queue_length: int
    jobs_submitted: int
    jobs_started: int
    jobs_completed: int
    jobs_canceled: int
    jobs_failed: int
    backfill_active: bool
    backfill_cycle_last: int
    backfill_cycle_max: int
    backfill_cycle_mean: int
    backfill_cycles: int
    backfill_last_cycle_at: int  # epoch seconds; 0: no backfill cycle yet
    backfilled_jobs: int
    backfill_queue_length: int


class SlurmRestApi(Protocol):
    """What the reconciler needs from slurmrestd, independent of the OpenAPI version."""

    api_version: str  # the OpenAPI version spoken, e.g. "v0.0.42"
    capabilities: frozenset[str]  # CAN_* names this server and version offer

    @property
    def slurm_version(self) -> str: ...  # "24.11.5", from the server's answers

    def ping(self) -> None: ...
    def diag(self) -> SlurmDiag: ...
    @overload
    def nodes(self, since: None = None) -> Snapshot[SlurmNode]: ...
    @overload
    def nodes(self, since: int) -> Snapshot[SlurmNode] | None: ...
    def node(self, name: str) -> SlurmNode | None: ...
    @overload
    def partitions(self, since: None = None) -> Snapshot[SlurmPartition]: ...
    @overload
    def partitions(self, since: int) -> Snapshot[SlurmPartition] | None: ...
    @overload
    def reservations(self, since: None = None) -> Snapshot[SlurmReservation]: ...
    @overload
    def reservations(self, since: int) -> Snapshot[SlurmReservation] | None: ...
    @overload
    def jobs(self, since: None = None) -> JobsSnapshot: ...
    @overload
    def jobs(self, since: int) -> JobsSnapshot | None: ...
    def job(self, job_id: int) -> SlurmJob | None: ...
    def job_summaries(self) -> tuple[JobSummary, ...]: ...  # every job, few fields: metrics
    def jobs_where(self, keep: Callable[[SlurmJob], bool]) -> JobsSnapshot: ...  # streamed
    def job_states(self) -> dict[int, str]: ...  # CAN_LIST_JOB_STATES
    def job_state_counts(self) -> dict[str, int]: ...  # CAN_LIST_JOB_STATES, every job
    def submit(self, spec: JobSpec) -> SubmittedJob: ...
    def update_job(self, job_id: int, update: JobUpdate) -> None: ...
    def cancel(self, job_id: int, signal: str | None = None) -> None: ...
    def update_node(self, name: str, update: NodeUpdate) -> None: ...
    def delete_node(self, name: str) -> None: ...
    def close(self) -> None: ...


def check_signal(signal: str | None) -> str | None:
    if signal is None:
        return None
    name = signal.upper().removeprefix("SIG")
    if name not in SIGNALS:
        raise SlurmArgumentError("signal", signal, f"expected one of {', '.join(sorted(SIGNALS))}")
    return name
