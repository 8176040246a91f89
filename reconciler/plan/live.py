"""What is live, as plain data: the adapters fill it, the differ reads it (pure)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.compile.accounting import Account, Qos, User
from reconciler.plan.model import ObjectRef
from reconciler.wellknown import DRAIN_REASON_PREFIX

# Server-managed metadata that says nothing about what we asked for.
_VOLATILE_METADATA = (
    "resourceVersion", "generation", "managedFields", "uid", "creationTimestamp", "selfLink",
)  # fmt: skip
_BUSY = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})


@dataclass(frozen=True)
class LiveNode:
    """A Slurm node as slurmctld reports it (FUTURE nodes are not reported)."""

    name: str
    states: frozenset[str]
    reason: str | None = None
    cpus: int = 0
    real_memory_mb: int = 0
    gres: str | None = None
    features: tuple[str, ...] = ()

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.states

    @property
    def drained_by_us(self) -> bool:
        return self.drained and (self.reason or "").startswith(DRAIN_REASON_PREFIX)

    @property
    def busy(self) -> bool:
        return bool(self.states & _BUSY)

    def state_text(self) -> str:
        return "+".join(sorted(self.states))


@dataclass(frozen=True)
class LiveJob:
    """A Slurm job as slurmctld reports it: whom a plan's disruptive actions touch. Read for
    the PR comment only; not part of the fingerprint (a job starting never makes a plan
    stale)."""

    job_id: int
    user: str
    partition: str
    state: str  # RUNNING, PENDING, ...
    nodes: tuple[str, ...] = ()  # allocated, one name each; () while pending
    node_list: str = ""  # as Slurm writes it, e.g. "slurm-cpu-[0-3]"


@dataclass(frozen=True)
class LiveReservation:
    """A Slurm reservation as slurmctld reports it, flags spelled as scontrol takes them."""

    name: str
    nodes: tuple[str, ...]  # Slurm node names, sorted
    start: int  # seconds since the epoch
    end: int
    flags: frozenset[str]  # MAINT, DAILY, ...; without SPEC_NODES (Slurm sets it itself)
    users: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()


@dataclass(frozen=True)
class LiveAccounting:
    """Slurm accounts, users and QOS as slurmdbd reports them (sacctmgr), in the shapes git's
    compile to; users carry their associations on this cluster."""

    qos: Mapping[str, Qos] = field(default_factory=dict)
    accounts: Mapping[str, Account] = field(default_factory=dict)
    users: Mapping[str, User] = field(default_factory=dict)

    def fingerprint_text(self) -> str:
        return repr(
            (
                sorted((n, replace_where(q)) for n, q in self.qos.items()),
                sorted((n, replace_where(a)) for n, a in self.accounts.items()),
                sorted((n, replace_where(u)) for n, u in self.users.items()),
            )
        )


def replace_where(obj: Any) -> Any:
    return dataclasses.replace(obj, where="")


@dataclass(frozen=True)
class LiveState:
    kube_objects: Mapping[ObjectRef, dict[str, Any]] = field(default_factory=dict)
    slurm_nodes: Mapping[str, LiveNode] = field(default_factory=dict)
    slurm_conf: str | None = None
    gres_conf: str | None = None
    reservations: Mapping[str, LiveReservation] = field(default_factory=dict)
    # When it was read (seconds since the epoch): whether a reservation has begun or ended is
    # judged against it. None offline. Not part of the fingerprint.
    now: int | None = None
    # None: not read (offline, or no slurmdbd answers).
    accounting: LiveAccounting | None = None
    # Names of the generated Secrets that exist (their data is never read into live state).
    # Not part of the fingerprint: creating one is idempotent (one made meanwhile is kept).
    secrets: frozenset[str] = frozenset()
    # Digests of the data of the Secrets whose data values give (value_secrets.py), by name:
    # whether apply must update one. The data itself is never kept.
    secret_digests: Mapping[str, str] = field(default_factory=dict)
    # Why Slurm's state could not be read (slurmrestd does not answer); None when it was.
    # Its nodes and reservations are then unknown, not absent.
    slurm_error: str | None = None
    # topology.conf / topology.yaml as the slurm.conf ConfigMap holds them (by file name).
    topology_files: Mapping[str, str] = field(default_factory=dict)

    def fingerprint(self) -> str:
        """Changes whenever something a plan depends on changes, and only then: a Pod becoming
        Ready (StatefulSet status) or a job starting on a node does not make a plan stale."""
        digest = hashlib.sha256()
        for ref in sorted(self.kube_objects):
            body = json.dumps(comparable(self.kube_objects[ref]), sort_keys=True, default=str)
            digest.update(f"{ref}|{body}\n".encode())
        for name in sorted(self.slurm_nodes):
            node = self.slurm_nodes[name]
            down = "DOWN" in node.states
            digest.update(f"{name}|{node.drained}|{down}|{node.reason}\n".encode())
        for text in (self.slurm_conf, self.gres_conf):
            digest.update(json.dumps(text).encode())
        for name in sorted(self.reservations):
            resv = self.reservations[name]
            digest.update(
                f"{name}|{resv.nodes}|{resv.start}|{resv.end}|{sorted(resv.flags)}|"
                f"{resv.users}|{resv.accounts}\n".encode()
            )
        if self.accounting is not None:
            digest.update(self.accounting.fingerprint_text().encode())
        digest.update(f"slurm answers: {self.slurm_error is None}".encode())
        return digest.hexdigest()


def comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A server object without status and server-managed metadata."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    out["metadata"] = meta
    return out


def contains(live: Any, desired: Any) -> bool:
    """Every field we set has that value live (what the server adds is not our concern).

    The fast path of a live plan: objects that pass need no dry-run request.
    """
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            k in live and contains(live[k], v) for k, v in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(live) == len(desired)
            and all(contains(a, b) for a, b in zip(live, desired, strict=True))
        )
    return bool(live == desired)
