"""slurmrestd `openapi/v0.0.38` (Slurm 22.05): wire format <-> the plain data of slurm_rest.py.

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
- nodes in state FUTURE are not listed at all (and `node(name)` is None for them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from time import perf_counter
from typing import Any, TypeVar, overload
from urllib.parse import quote

from reconciler.adapters.slurm_rest import (
    JobSpec,
    JobsSnapshot,
    JobUpdate,
    SlurmJob,
    SlurmNode,
    SlurmObserver,
    SlurmPartition,
    SlurmReservation,
    Snapshot,
    SubmittedJob,
    Transport,
    api_error,
    as_of_now,
    check_signal,
)
from reconciler.errors import SlurmArgumentError

BASE = "/slurm/v0.0.38"
ERR_INVALID_JOB_ID = 2017
ERR_INVALID_NODE_NAME = 2018
_NO_VALUE = 0xFFFFFFFE  # NO_VAL and INFINITE leak through some integer fields

T = TypeVar("T")
Wire = Mapping[str, Any]


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _limit(value: Any) -> int | None:
    """A limit where -1, null and NO_VAL/INFINITE all mean "none"."""
    if not isinstance(value, int) or value < 0 or value >= _NO_VALUE:
        return None
    return value


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _words(value: Any) -> tuple[str, ...]:
    """A comma-separated list ("debug,high") or a JSON list, as a tuple of non-empty words."""
    parts: Iterable[Any] = value.split(",") if isinstance(value, str) else value or ()
    return tuple(p.strip() for p in parts if isinstance(p, str) and p.strip())


def _upper_set(value: Any) -> frozenset[str]:
    return frozenset(word.upper() for word in _words(value))


def _gres(tres_per_node: Any) -> str:
    """ "gres:gpu:2" (v0.0.38) -> "gpu:2", the spelling submit takes."""
    items = (w.removeprefix("gres:").removeprefix("gres/") for w in _words(tres_per_node))
    return ",".join(items)


def node_from_wire(d: Wire) -> SlurmNode:
    return SlurmNode(
        name=_str(d.get("name")),
        state=_str(d.get("state")).upper() or "UNKNOWN",
        flags=_upper_set(d.get("state_flags")),
        reason=_str(d.get("reason")),
        reason_set_by=d.get("reason_set_by_user") or None,
        reason_changed_at=_int(d.get("reason_changed_at")) or None,
        cpus=_int(d.get("cpus")),
        alloc_cpus=_int(d.get("alloc_cpus")),
        real_memory=_int(d.get("real_memory")),
        alloc_memory=_int(d.get("alloc_memory")),
        gres=_str(d.get("gres")),
        gres_used=_str(d.get("gres_used")),
        features=_words(d.get("features")),
        active_features=_words(d.get("active_features")),
        partitions=_words(d.get("partitions")),
        address=_str(d.get("address")),
        hostname=_str(d.get("hostname")),
        weight=_int(d.get("weight"), 1),
    )


def partition_from_wire(d: Wire) -> SlurmPartition:
    flags = _upper_set(d.get("flags"))
    min_nodes = d.get("min_nodes_per_job", d.get("min nodes per job"))  # 22.05 spells it so
    return SlurmPartition(
        name=_str(d.get("name")),
        state=_str(d.get("state")).upper(),
        nodes=_str(d.get("nodes")),
        is_default="DEFAULT" in flags,
        priority_tier=_int(d.get("priority_tier")),
        max_time_minutes=_limit(d.get("max_time_limit")),
        default_time_minutes=_limit(d.get("default_time_limit")),
        max_nodes_per_job=_limit(d.get("maximum_nodes_per_job")),
        min_nodes_per_job=_int(min_nodes),
        preempt_mode=tuple(w.upper() for w in _words(d.get("preemption_mode"))),
        flags=flags,
        allowed_accounts=_words(d.get("allowed_accounts")),
        allowed_qos=_words(d.get("allowed_qos")),
        allowed_groups=_words(d.get("allowed_groups")),
        qos=_str(d.get("qos")),
        total_nodes=_int(d.get("total_nodes")),
        total_cpus=_int(d.get("total_cpus")),
    )


def reservation_from_wire(d: Wire) -> SlurmReservation:
    return SlurmReservation(
        name=_str(d.get("name")),
        node_list=_str(d.get("node_list")),
        node_count=_int(d.get("node_count")),
        start_time=_int(d.get("start_time")),
        end_time=_int(d.get("end_time")),
        flags=_upper_set(d.get("flags")),
        users=_words(d.get("users")),
        accounts=_words(d.get("accounts")),
        partition=_str(d.get("partition")),
        features=_str(d.get("features")),
        core_count=_int(d.get("core_count")),
    )


def job_from_wire(d: Wire) -> SlurmJob:
    return SlurmJob(
        job_id=_int(d.get("job_id")),
        name=_str(d.get("name")),
        state=_str(d.get("job_state")).upper(),
        state_reason=_str(d.get("state_reason")),
        state_description=_str(d.get("state_description")),
        partition=_str(d.get("partition")),
        nodes=_str(d.get("nodes")),
        required_nodes=_str(d.get("required_nodes")),
        excluded_nodes=_str(d.get("excluded_nodes")),
        reservation=_str(d.get("resv_name")),
        constraints=_str(d.get("features")),
        gres=_gres(d.get("tres_per_node")),
        user_name=_str(d.get("user_name")),
        user_id=d["user_id"] if isinstance(d.get("user_id"), int) else None,
        group_id=d["group_id"] if isinstance(d.get("group_id"), int) else None,
        comment=_str(d.get("comment")),
        time_limit_minutes=_limit(d.get("time_limit")),
        priority=_int(d.get("priority")),
        node_count=_int(d.get("node_count")),
        cpus=_int(d.get("cpus")),
        submit_time=_int(d.get("submit_time")),
        start_time=_int(d.get("start_time")),
        end_time=_int(d.get("end_time")),
        exit_code=d["exit_code"] if isinstance(d.get("exit_code"), int) else None,
        batch_host=_str(d.get("batch_host")),
        flags=_upper_set(d.get("flags")),
    )


# JobSpec/JobUpdate attribute -> v0.0.38 key, where they differ.
_WIRE_KEYS = {
    "time_limit_minutes": "time_limit",
    "required_nodes": "node_list",
    "excluded_nodes": "exclude_nodes",
}
# Everything but the script, environment and hold flag, which submission_to_wire places itself.
_SUBMIT_FIELDS = tuple(
    f.name for f in fields(JobSpec) if f.name not in ("script", "environment", "hold")
)
_UPDATE_FIELDS = tuple(f.name for f in fields(JobUpdate))
_EXCLUSIVE = ("exclusive", "user", "mcs")


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
    if spec.exclusive is not None and spec.exclusive not in _EXCLUSIVE:
        # true/"true" are refused by 22.05: only these three words are understood.
        raise SlurmArgumentError("exclusive", spec.exclusive, f"expected one of {_EXCLUSIVE}")
    job = _wire_fields(spec, _SUBMIT_FIELDS)
    job["environment"] = dict(spec.environment)
    if spec.hold:
        job["hold"] = True
    return {"script": spec.script, "job": job}


def update_to_wire(update: JobUpdate) -> dict[str, Any]:
    wire = _wire_fields(update, _UPDATE_FIELDS)
    if not wire:
        raise SlurmArgumentError("update", update, "no field to change")
    return wire


class SlurmRestV0038:
    """SlurmRestApi over `openapi/v0.0.38`. `observe` (see SlurmObserver) times each request
    with its error checks; arguments are checked before it and answers mapped after it."""

    api_version = "v0.0.38"

    def __init__(self, transport: Transport, *, observe: SlurmObserver | None = None) -> None:
        self._http = transport
        self._observe = observe

    def ping(self) -> None:
        self._timed("ping", self._checked, "GET", "/ping")

    @overload
    def nodes(self, since: None = None) -> Snapshot[SlurmNode]: ...
    @overload
    def nodes(self, since: int) -> Snapshot[SlurmNode] | None: ...
    def nodes(self, since: int | None = None) -> Snapshot[SlurmNode] | None:
        return self._snapshot("nodes", "/nodes", "nodes", node_from_wire, since)

    def node(self, name: str) -> SlurmNode | None:
        path = f"/node/{_segment(name)}"
        found = self._timed("node", self._one, path, "nodes", ERR_INVALID_NODE_NAME)
        return node_from_wire(found) if found is not None else None

    @overload
    def partitions(self, since: None = None) -> Snapshot[SlurmPartition]: ...
    @overload
    def partitions(self, since: int) -> Snapshot[SlurmPartition] | None: ...
    def partitions(self, since: int | None = None) -> Snapshot[SlurmPartition] | None:
        return self._snapshot("partitions", "/partitions", "partitions", partition_from_wire, since)

    @overload
    def reservations(self, since: None = None) -> Snapshot[SlurmReservation]: ...
    @overload
    def reservations(self, since: int) -> Snapshot[SlurmReservation] | None: ...
    def reservations(self, since: int | None = None) -> Snapshot[SlurmReservation] | None:
        return self._snapshot(
            "reservations", "/reservations", "reservations", reservation_from_wire, since
        )

    @overload
    def jobs(self, since: None = None) -> JobsSnapshot: ...
    @overload
    def jobs(self, since: int) -> JobsSnapshot | None: ...
    def jobs(self, since: int | None = None) -> JobsSnapshot | None:
        return self._snapshot("jobs", "/jobs", "jobs", job_from_wire, since)

    def job(self, job_id: int) -> SlurmJob | None:
        path = f"/job/{_job_id(job_id)}"
        found = self._timed("job", self._one, path, "jobs", ERR_INVALID_JOB_ID)
        return job_from_wire(found) if found is not None else None

    def submit(self, spec: JobSpec) -> SubmittedJob:
        return self._timed("submit", self._submit, submission_to_wire(spec))

    def update_job(self, job_id: int, update: JobUpdate) -> None:
        path, body = f"/job/{_job_id(job_id)}", update_to_wire(update)
        self._timed("update_job", self._checked, "POST", path, json=body)

    def cancel(self, job_id: int, signal: str | None = None) -> None:
        """Signal (default KILL) a job; a finished job is fine, an unknown id raises (2017)."""
        path, name = f"/job/{_job_id(job_id)}", check_signal(signal)
        params = {"signal": name} if name else None
        self._timed("cancel", self._checked, "DELETE", path, params=params)

    def close(self) -> None:
        self._http.close()

    def _timed(self, operation: str, call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        observe = self._observe
        if observe is None:
            return call(*args, **kwargs)
        started = perf_counter()
        try:
            result = call(*args, **kwargs)
        except Exception:
            observe(operation, perf_counter() - started, False)
            raise
        observe(operation, perf_counter() - started, True)
        return result

    def _submit(self, body: dict[str, Any]) -> SubmittedJob:
        path = "/job/submit"
        response = self._http.request("POST", BASE + path, json=body)
        job_id = response.body.get("job_id")
        if not isinstance(job_id, int) or job_id <= 0:
            raise api_error(f"POST {BASE}{path}", response.status, response.errors)
        return SubmittedJob(job_id, tuple(str(e) for e in response.errors))

    def _checked(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """A request whose `errors`, even inside a 200, mean failure."""
        response = self._http.request(method, BASE + path, **kwargs)
        if response.errors:
            raise api_error(f"{method} {BASE}{path}", response.status, response.errors)
        return response.body

    def _snapshot(
        self, operation: str, path: str, key: str, convert: Callable[[Wire], T], since: int | None
    ) -> Snapshot[T] | None:
        as_of = as_of_now()
        params = {"update_time": since} if since is not None else None
        body = self._timed(operation, self._listing, path, params)
        if body is None:
            return None
        return Snapshot(tuple(convert(d) for d in body.get(key) or ()), as_of)

    def _listing(self, path: str, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """The body of a list, or None for 304 (unchanged)."""
        response = self._http.request("GET", BASE + path, params=params)
        if response.status == 304:
            return None
        if response.errors:
            raise api_error(f"GET {BASE}{path}", response.status, response.errors)
        return response.body

    def _one(self, path: str, key: str, not_found: int) -> Wire | None:
        response = self._http.request("GET", BASE + path, allow=frozenset({500}))
        if any(e.number == not_found for e in response.errors):
            return None
        if response.errors or response.status != 200:
            raise api_error(f"GET {BASE}{path}", response.status, response.errors)
        items = response.body.get(key) or []
        return items[0] if items else None


def _segment(name: str) -> str:
    if not name or name in (".", ".."):
        raise SlurmArgumentError("name", name, "empty")
    return quote(name, safe="")


def _job_id(job_id: int) -> int:
    if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id <= 0:
        raise SlurmArgumentError("job id", job_id, "expected a positive integer")
    return job_id
