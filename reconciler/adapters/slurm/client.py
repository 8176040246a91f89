"""One slurmrestd client for every OpenAPI version: discovery, then requests through a codec.

`connect()` asks the server which versions it serves (`GET /openapi/v3`, the spec slurmrestd
generates from its loaded plugins) and speaks the newest one a codec exists for (versions.py):
v0.0.45 to v0.0.40 (Slurm 23.11-26.05) or v0.0.38 (Slurm 22.05). Everything
version-specific is in the codec; this module only sends, times and checks requests.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from time import perf_counter
from typing import Any, TypeVar, cast, overload
from urllib.parse import quote

from reconciler.adapters.slurm.codec import (
    ERR_INVALID_JOB_ID,
    ERR_INVALID_NODE_NAME,
    Codec,
    Wire,
    controller_responds,
    slurm_release,
    unchanged_listing,
)
from reconciler.adapters.slurm.jwt import TokenSource
from reconciler.adapters.slurm.model import (
    CAN_DELETE_NODES,
    JobSpec,
    JobsSnapshot,
    JobSummary,
    JobUpdate,
    NodeUpdate,
    SlurmDiag,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmReservation,
    SlurmRestApi,
    Snapshot,
    SubmittedJob,
    check_signal,
)
from reconciler.adapters.slurm.transport import (
    DEFAULT_TIMEOUT_SECONDS,
    SlurmObserver,
    Transport,
    WireError,
    api_error,
    as_of_now,
)
from reconciler.adapters.slurm.versions import choose_codec, codec_for, served_versions
from reconciler.errors import SlurmArgumentError, SlurmUnavailableError, SlurmUnsupportedError

T = TypeVar("T")
log = logging.getLogger(__name__)

# "not found" answers: v0.0.38 and v0.0.40+ both say 500 with Slurm's error number.
_NOT_FOUND_STATUSES = frozenset({404, 500})
_UNKNOWN_NODE = "Failure to query node"
ERR_ALREADY_DONE = 2021  # cancel of a finished job: nothing left to do, as on v0.0.38


def connect(
    url: str,
    tokens: TokenSource,
    *,
    api_version: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    observe: SlurmObserver | None = None,
) -> SlurmRestClient:
    """A client for slurmrestd at `url` ("http://host:port", no version path), speaking
    `api_version` or, by default, the newest version both sides know (one GET /openapi/v3).
    `observe`, if given, is told of each request (metrics)."""
    transport = Transport(url, tokens, timeout=timeout)
    try:
        if api_version is None:
            codec = choose_codec(served_versions(transport.request("GET", "/openapi/v3").body))
        else:
            codec = codec_for(api_version)
    except BaseException:
        transport.close()
        raise
    return SlurmRestClient(transport, codec, observe=observe)


def connect_lazily(
    url: str, tokens: TokenSource, *, timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> SlurmRestApi:
    """As `connect`, but discovery waits for the first request: plan and apply then get as
    far as seeing that slurmrestd does not run yet (a control plane being brought up)."""
    return cast(SlurmRestApi, _Deferred(lambda: connect(url, tokens, timeout=timeout)))


class _Deferred:
    def __init__(self, open_client: Callable[[], SlurmRestClient]) -> None:
        self._open = open_client
        self._client: SlurmRestClient | None = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connected(), name)

    def _connected(self) -> SlurmRestClient:
        with self._lock:
            if self._client is None:
                self._client = self._open()
            return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


class SlurmRestClient:
    """SlurmRestApi over one codec. `observe` (see SlurmObserver) times each request with its
    error checks; arguments are checked before it and answers mapped after it."""

    def __init__(
        self, transport: Transport, codec: Codec, *, observe: SlurmObserver | None = None
    ) -> None:
        self._http = transport
        self._codec = codec
        self._observe = observe
        self._release: str | None = None
        self.api_version = codec.version
        self.capabilities = codec.capabilities

    @property
    def slurm_version(self) -> str:
        """The Slurm release of the server, e.g. "24.11.5" (asked once, then remembered)."""
        if self._release is None:
            self.ping()
        return self._release or "unknown"

    def ping(self) -> None:
        """slurmctld answers through slurmrestd, or SlurmUnavailableError."""
        body = self._timed("ping", self._checked, "GET", "/ping")
        self._release = slurm_release(body) or self._release
        if not controller_responds(body):
            raise SlurmUnavailableError(
                "slurmrestd answers, but slurmctld does not respond to its ping",
                endpoint="GET /ping",
                hint="is the controller Pod running? (kubectl get pods -l "
                "app.kubernetes.io/name=slurmctld)",
            )

    def diag(self) -> SlurmDiag:
        """slurmctld's scheduler statistics, as `sdiag` shows them."""
        body = self._timed("diag", self._checked, "GET", "/diag")
        statistics = body.get("statistics")
        return self._codec.diag(statistics if isinstance(statistics, Mapping) else {})

    @overload
    def nodes(self, since: None = None) -> Snapshot[SlurmNode]: ...
    @overload
    def nodes(self, since: int) -> Snapshot[SlurmNode] | None: ...
    def nodes(self, since: int | None = None) -> Snapshot[SlurmNode] | None:
        return self._snapshot("nodes", "/nodes", "nodes", self._codec.node, SlurmNode, since)

    def node(self, name: str) -> SlurmNode | None:
        path = f"/node/{_segment(name)}"
        found = self._timed("node", self._one, path, "nodes", ERR_INVALID_NODE_NAME)
        return self._codec.node(found) if found is not None else None

    @overload
    def partitions(self, since: None = None) -> Snapshot[SlurmPartition]: ...
    @overload
    def partitions(self, since: int) -> Snapshot[SlurmPartition] | None: ...
    def partitions(self, since: int | None = None) -> Snapshot[SlurmPartition] | None:
        codec = self._codec
        return self._snapshot(
            "partitions", "/partitions", "partitions", codec.partition, SlurmPartition, since
        )

    @overload
    def reservations(self, since: None = None) -> Snapshot[SlurmReservation]: ...
    @overload
    def reservations(self, since: int) -> Snapshot[SlurmReservation] | None: ...
    def reservations(self, since: int | None = None) -> Snapshot[SlurmReservation] | None:
        codec = self._codec
        return self._snapshot(
            "reservations", "/reservations", "reservations", codec.reservation,
            SlurmReservation, since,
        )  # fmt: skip

    @overload
    def jobs(self, since: None = None) -> JobsSnapshot: ...
    @overload
    def jobs(self, since: int) -> JobsSnapshot | None: ...
    def jobs(self, since: int | None = None) -> JobsSnapshot | None:
        return self._snapshot("jobs", "/jobs", "jobs", self._codec.job, SlurmJob, since)

    def job(self, job_id: int) -> SlurmJob | None:
        path = f"/job/{_job_id(job_id)}"
        # None only when Slurm says "no such job" (2017): the caller takes that as purged,
        # and deletes the job's Pod. A 200 without the job is no such answer.
        found = self._timed("job", self._one, path, "jobs", ERR_INVALID_JOB_ID, strict=True)
        return self._codec.job(found) if found is not None else None

    def job_summaries(self) -> tuple[JobSummary, ...]:
        """Every job's state, partition and reason: what the metrics count. The job list is
        decoded as it arrives and each job reduced at once, so a 50,000-job answer costs
        tens of MiB where `jobs()` holds well over a GiB at its peak (bench/README.md)."""
        path = self._codec.base + "/jobs"
        reduce = self._codec.job_summary
        response = self._timed("job_summaries", self._http.listing, path, "jobs", reduce)
        if response.errors:
            raise api_error(f"GET {path}", response.status, response.errors)
        items = _listed(f"GET {path}", response.body, "jobs", JobSummary)
        return tuple(items)

    def jobs_where(self, keep: Callable[[SlurmJob], bool]) -> JobsSnapshot:
        """Every job that `keep` keeps: the list is decoded as it arrives and each job dropped
        at once unless kept, so what is held follows the kept jobs, not Slurm's list (the
        scheduler's own placeholders, read at its start and after a gap)."""
        as_of, path, decode = as_of_now(), self._codec.base + "/jobs", self._codec.job

        def reduce(wire: Wire) -> SlurmJob | None:
            job = decode(wire)
            return job if keep(job) else None

        response = self._timed("jobs_where", self._http.listing, path, "jobs", reduce)
        if response.errors:
            raise api_error(f"GET {path}", response.status, response.errors)
        items = _listed(f"GET {path}", response.body, "jobs", (SlurmJob, type(None)))
        return Snapshot(tuple(j for j in items if j is not None), as_of)

    def job_states(self) -> dict[int, str]:
        """Every job's id and state, and nothing else (v0.0.40+): a few ms where the whole
        list takes a hundred (docs/slurm-versions.md). The scheduler asks it while jobs it
        submitted are pending, to bind their Pods as soon as Slurm allocates. Array and
        heterogeneous jobs ("7_1", "7+0") are left out: they are never placeholders."""
        return {int(i): state for i, state in self._job_state_entries() if i.isascii() and
                i.isdigit()}  # fmt: skip

    def job_state_counts(self) -> dict[str, int]:
        """How many jobs are in each state, every job counted (the same read as job_states):
        the metrics' job figures without the whole list."""
        return dict(Counter(state for _, state in self._job_state_entries()))

    def _job_state_entries(self) -> list[tuple[str, str]]:
        decode = self._codec.job_state
        if decode is None:
            raise self._unsupported(
                "list job states", "GET /jobs/state/", "poll GET /jobs/ with update_time instead"
            )
        body = self._timed("job_states", self._checked, "GET", "/jobs/state/")
        entries = _listed(f"GET {self._codec.base}/jobs/state/", body, "jobs")
        return [decode(entry) for entry in entries]

    def submit(self, spec: JobSpec) -> SubmittedJob:
        return self._timed("submit", self._submit, self._codec.submission(spec))

    def update_job(self, job_id: int, update: JobUpdate) -> None:
        path, body = f"/job/{_job_id(job_id)}", self._codec.job_update(update)
        self._timed("update_job", self._checked, "POST", path, json=body)

    def cancel(self, job_id: int, signal: str | None = None) -> None:
        """Signal (default KILL) a job; a finished job is fine, an unknown id raises (2017)."""
        path, name = f"/job/{_job_id(job_id)}", check_signal(signal)
        params = {"signal": name} if name else None
        self._timed("cancel", self._cancel, path, params)

    def _cancel(self, path: str, params: dict[str, Any] | None) -> None:
        """v0.0.42 reports a signal that failed per job in `status` (in a 200); v0.0.40 and
        v0.0.41 of Slurm 24.11 say nothing for an unknown id (so nor do we)."""
        body = self._checked("DELETE", path, params=params)
        failed = [
            WireError(number=e.get("code"), text=str(e.get("message") or e.get("string") or ""))
            for entry in body.get("status") or ()
            if isinstance(entry, Mapping)
            and isinstance(e := entry.get("error"), Mapping)
            and e.get("code") not in (None, 0, ERR_ALREADY_DONE)
        ]
        if failed:
            raise api_error(f"DELETE {self._codec.base}{path}", 200, failed)

    def update_node(self, name: str, update: NodeUpdate) -> None:
        """Drain, resume, retire or weigh a node (v0.0.40+; v0.0.38 has no such endpoint)."""
        encode = self._codec.node_update
        if encode is None:
            raise self._unsupported(
                "update nodes", "POST /node/{name}",
                "use scontrol, or a Slurm whose slurmrestd serves v0.0.40 or later",
            )  # fmt: skip
        path, body = f"/node/{_segment(name)}", encode(update)
        self._timed("update_node", self._checked, "POST", path, json=body)

    def delete_node(self, name: str) -> None:
        """Remove a dynamic node (one a `slurmd -Z` registered) from slurmctld (v0.0.40+)."""
        if CAN_DELETE_NODES not in self.capabilities:
            raise self._unsupported(
                "delete nodes", "DELETE /node/{name}",
                "use a Slurm whose slurmrestd serves v0.0.40 or later",
            )  # fmt: skip
        self._timed("delete_node", self._checked, "DELETE", f"/node/{_segment(name)}")

    def close(self) -> None:
        self._http.close()

    def _unsupported(self, what: str, endpoint: str, hint: str) -> SlurmUnsupportedError:
        """`endpoint` is "METHOD /path" under the version's base."""
        method, _, path = endpoint.partition(" ")
        return SlurmUnsupportedError(
            f"slurmrestd {self.api_version} cannot {what}",
            endpoint=f"{method} {self._codec.base}{path}",
            hint=hint,
        )

    def __repr__(self) -> str:
        return f"SlurmRestClient({self._http.url!r}, {self.api_version})"

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
        path = self._codec.base + "/job/submit"
        response = self._http.request("POST", path, json=body)
        job_id = response.body.get("job_id")
        if not isinstance(job_id, int) or job_id <= 0:
            raise api_error(f"POST {path}", response.status, response.errors)
        notes = (*response.errors, *response.warnings)
        return SubmittedJob(job_id, tuple(str(e) for e in notes))

    def _checked(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """A request whose `errors`, even inside a 200, mean failure."""
        path = self._codec.base + path
        response = self._http.request(method, path, **kwargs)
        if response.errors:
            raise api_error(f"{method} {path}", response.status, response.errors)
        if response.warnings:  # e.g. a field this version ignores: worth a look, not a failure
            warnings = "; ".join(str(w) for w in response.warnings)
            log.warning("slurmrestd %s %s warned: %s", method, path, warnings)
        return response.body

    def _snapshot(
        self,
        operation: str,
        path: str,
        key: str,
        convert: Callable[[Wire], T],
        kind: type[T],
        since: int | None,
    ) -> Snapshot[T] | None:
        as_of = as_of_now()
        params = {"update_time": self._codec.since(since)} if since is not None else None
        body = self._timed(operation, self._listing, path, key, convert, params)
        if body is None:
            return None
        return Snapshot(tuple(_listed(f"GET {self._codec.base}{path}", body, key, kind)), as_of)

    def _listing(
        self, path: str, key: str, convert: Callable[[Wire], object], params: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """The body of a list, each object converted as it arrives (a whole job list is
        hundreds of MB of JSON on a busy cluster: never held as text or dicts), or None when
        unchanged since `update_time` (304, or v0.0.40+'s empty job list with `last_update`
        0)."""
        path = self._codec.base + path
        response = self._http.listing(path, key, convert, params=params)
        if response.status == 304 or (params and unchanged_listing(response.body, key)):
            return None
        if response.errors:
            raise api_error(f"GET {path}", response.status, response.errors)
        return response.body

    def _one(self, path: str, key: str, not_found: int, *, strict: bool = False) -> Wire | None:
        """The object at `path`; None when Slurm says it does not exist or (unless `strict`)
        when the answer holds none (v0.0.38 lists no FUTURE node)."""
        path = self._codec.base + path
        response = self._http.request("GET", path, allow=_NOT_FOUND_STATUSES)
        if any(_is_not_found(e, not_found) for e in response.errors):
            return None
        if response.errors or response.status != 200:
            raise api_error(f"GET {path}", response.status, response.errors)
        items = _listed(f"GET {path}", response.body, key) if strict else response.body.get(key)
        if strict and not items:
            raise SlurmUnavailableError(
                f"slurmrestd answered 200 with no {key!r} and no error", endpoint=f"GET {path}"
            )
        return items[0] if items else None


def _listed(
    endpoint: str, body: Mapping[str, Any], key: str, kind: type | tuple[type, ...] = Mapping
) -> list[Any]:
    """The objects a list answer holds under `key` (each a `kind`: a streamed answer holds
    them reduced, stream.py). Without the key (or with something else there) the answer is
    not a list at all: read as empty, it would say every job and node is gone, and the
    scheduler would delete their Pods."""
    items = body.get(key)
    if not isinstance(items, list) or not all(isinstance(i, kind) for i in items):
        found = "no " + repr(key) if items is None else f"{type(items).__name__} {key!r}"
        raise SlurmUnavailableError(
            f"slurmrestd answered a list with {found}, not a list of objects",
            endpoint=endpoint,
            status=200,
        )
    return items


def _is_not_found(error: WireError, number: int) -> bool:
    """Slurm's "no such job/node"; v0.0.40+ answer an unknown node with error number 0."""
    if error.number == number:
        return True
    return (
        number == ERR_INVALID_NODE_NAME
        and error.number in (0, None)
        and (error.description.startswith(_UNKNOWN_NODE))
    )


def _segment(name: str) -> str:
    if not name or name in (".", ".."):
        raise SlurmArgumentError("name", name, "empty")
    return quote(name, safe="")


def _job_id(job_id: int) -> int:
    if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id <= 0:
        raise SlurmArgumentError("job id", job_id, "expected a positive integer")
    return job_id
