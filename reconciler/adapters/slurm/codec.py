"""What every slurmrestd codec shares: the `Codec` a version module exports, and the pure
helpers that read the loosely typed JSON every version answers with.

A codec is plain functions, wire dict <-> the dataclasses of model.py; it does no I/O, so
each version is unit-tested with bodies captured from the real daemon that serves it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.adapters.slurm.model import (
    JobSpec,
    JobSummary,
    JobUpdate,
    NodeUpdate,
    SlurmDiag,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmReservation,
)

Wire = Mapping[str, Any]
# NO_VAL and INFINITE of Slurm's 16- and 32-bit fields leak through some integer fields.
_NO_VALUE_32 = 0xFFFFFFFE
ERR_INVALID_JOB_ID = 2017
ERR_INVALID_NODE_NAME = 2018


@dataclass(frozen=True)
class Codec:
    """One OpenAPI version of slurmrestd: its paths, what it can do, and its wire mappings.
    `node_update` is None where the version has no node update endpoint."""

    version: str  # "v0.0.42"
    capabilities: frozenset[str]
    node: Callable[[Wire], SlurmNode]
    partition: Callable[[Wire], SlurmPartition]
    reservation: Callable[[Wire], SlurmReservation]
    job: Callable[[Wire], SlurmJob]
    job_summary: Callable[[Wire], JobSummary]  # the same job, only the fields it keeps
    submission: Callable[[JobSpec], dict[str, Any]]
    job_update: Callable[[JobUpdate], dict[str, Any]]
    diag: Callable[[Wire], SlurmDiag]  # the `statistics` of `GET /diag`
    node_update: Callable[[NodeUpdate], dict[str, Any]] | None = None
    # An entry of `GET /jobs/state/` as (job id as written, state); None where the version
    # has no such list.
    job_state: Callable[[Wire], tuple[str, str]] | None = None
    # How `?update_time=` carries seconds since the epoch.
    since: Callable[[int], str | int] = int

    @property
    def base(self) -> str:
        return f"/slurm/{self.version}"


def unchanged_listing(body: Wire, key: str) -> bool:
    """v0.0.40+ answer `GET /jobs/?update_time=T` with 200, no jobs and `last_update` 0 when
    nothing changed since T (their nodes, partitions and reservations say 304, as v0.0.38
    does for all). An empty cluster still has a `last_update` of when it last changed."""
    return not body.get(key) and "last_update" in body and number(body["last_update"]) == 0


def number(value: Any) -> int | None:
    """An integer field in any version's spelling: a plain int, or v0.0.40+'s
    `{"set": bool, "infinite": bool, "number": int}`. None when unset or infinite."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def integer(value: Any, default: int = 0) -> int:
    found = number(value)
    return default if found is None else found


def limit(value: Any) -> int | None:
    """A limit where -1, null, unset, infinite and NO_VAL/INFINITE all mean "none"."""
    found = number(value)
    if found is None or found < 0 or found >= _NO_VALUE_32:
        return None
    return found


def text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def words(value: Any) -> tuple[str, ...]:
    """A comma-separated list ("debug,high") or a JSON list, as a tuple of non-empty words;
    () for anything else (a number or an object where a list belongs reads as none, rather
    than failing the whole answer's decode)."""
    parts: Iterable[Any] = value.split(",") if isinstance(value, str) else value
    if not isinstance(parts, list | tuple):
        return ()
    return tuple(p.strip() for p in parts if isinstance(p, str) and p.strip())


def upper_set(value: Any) -> frozenset[str]:
    return frozenset(word.upper() for word in words(value))


def gres_per_node(tres_per_node: Any) -> str:
    """ "gres:gpu:2" (v0.0.38) or "gres/gpu:2" (v0.0.40+) -> "gpu:2", the spelling we use."""
    items = (w.removeprefix("gres:").removeprefix("gres/") for w in words(tres_per_node))
    return ",".join(items)


def controller_responds(body: Wire) -> bool:
    """Whether a /ping answer says a slurmctld responded: slurmrestd answers 200 either way,
    with each controller `pinged` (v0.0.40+; `ping` on v0.0.38) UP or DOWN."""
    pings = body.get("pings")
    if not isinstance(pings, list) or not pings:
        return True  # nothing said: the 200 stands
    return any(
        isinstance(p, Mapping)
        and p.get("responding", True) is not False
        and str(p.get("pinged", p.get("ping", "UP"))).upper() == "UP"
        for p in pings
    )


def slurm_release(body: Wire) -> str | None:
    """The Slurm release a response's `meta` names ("24.11.5"); v0.0.38 spells it `Slurm`."""
    meta = body.get("meta")
    if not isinstance(meta, Mapping):
        return None
    slurm = meta.get("slurm", meta.get("Slurm"))
    if not isinstance(slurm, Mapping):
        return None
    release = slurm.get("release")
    if isinstance(release, str) and release:
        return release
    version = slurm.get("version")
    if isinstance(version, Mapping):
        parts = [version.get(k) for k in ("major", "minor", "micro")]
        if all(isinstance(p, int | str) for p in parts):
            major, minor, micro = (int(p) for p in parts)  # type: ignore[arg-type]
            return f"{major}.{minor:02d}.{micro}"
    return None
