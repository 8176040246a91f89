"""Which Slurm jobs are this scheduler's placeholders, and which one stands for each Pod. Pure.

Any Slurm user can submit a job named like a placeholder (`sbatch -J 'pod:ns/p@<uid>'`). Taken
for the Pod's job, a held look-alike reads as "requeued" and the Pod is deleted while its real
job leaks; a look-alike of another scheduler's name gets that scheduler's jobs cancelled. So a
job stands for the Pod (or gang) key its name gives only when:

- its name says this scheduler made it (other schedulers' jobs are never ours), and
- its id is the one recorded for the key (in our memory or on the Pods' annotations), or,
  when none is recorded yet (a restart between submit and annotation), it is vouched for: its
  admin comment, which only Slurm operators can set, names it (servers where our operator
  submits every job, v0.0.40+), or else it runs as the operator or as the user its own Pod
  (or gang) runs as: any other user we submit as could name a job after another tenant's Pod.

Names from before they carried the scheduler's name still count, but only by recorded id.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import hostlist

from reconciler.adapters.slurm.model import SlurmJob
from reconciler.scheduler.decide.admission import run_as_user
from reconciler.scheduler.decide.gang_decide import gang_key_of
from reconciler.scheduler.decide.placeholder import parse_job_name
from reconciler.scheduler.decide.pod_decide import ACTIVE_STATES


@dataclass(frozen=True)
class Claim:
    key: str  # a Pod UID or a gang's key
    vouched: bool  # ours even before any record names its id


@dataclass(frozen=True)
class Ownership:
    scheduler: str  # our name, which every job name we submit carries
    operator: str  # the Slurm user of the operator's token
    marked: bool  # every job we submit carries its name in the admin comment
    # unmarked: key -> the users (uids) its job runs as, besides the operator (run_as_users)
    users: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def claim(self, job: SlurmJob) -> Claim | None:
        """The key `job` holds resources for, if it may be ours; None for any other job."""
        marked = parse_job_name(job.admin_comment)
        if marked is not None:  # an operator wrote it: it is the word that counts
            return Claim(marked.key, vouched=True) if marked.scheduler == self.scheduler else None
        named = parse_job_name(job.name)
        if named is None or named.scheduler not in (None, self.scheduler):
            return None
        vouched = named.scheduler is not None and not self.marked and self._runs_as(job, named.key)
        return Claim(named.key, vouched)

    def _runs_as(self, job: SlurmJob, key: str) -> bool:
        """The job runs as the operator or as the user `key`'s own Pods run as."""
        users = {self.operator, *self.users.get(key, ())}
        return job.user_name in users or (job.user_id is not None and str(job.user_id) in users)


def run_as_users(
    pods: Iterable[Mapping[str, Any]], default_user_id: int | None = None
) -> dict[str, frozenset[str]]:
    """Key (a Pod's UID, its gang's key) -> the uids its job runs as besides the operator,
    as admission reads each Pod's user-id (or applies the default uid)."""
    found: dict[str, set[str]] = {}
    for pod in pods:
        user = run_as_user(pod, default_user_id)
        if user is None:
            continue
        for key in (pod["metadata"]["uid"], gang_key_of(pod)):
            if key is not None:
                found.setdefault(key, set()).add(str(user))
    return {key: frozenset(users) for key, users in found.items()}


@dataclass(frozen=True)
class Placeholders:
    jobs: dict[str, SlurmJob]  # key -> the job that stands for it
    extras: list[SlurmJob] = field(default_factory=list)  # active duplicates to cancel


Records = Callable[[str], Collection[int]]


def placeholders(
    listed: Iterable[SlurmJob],
    owner: Ownership,
    records: Records,
    *,
    abandoned: Container[int] = (),
    skip: Container[str] = (),
) -> Placeholders:
    """Our job for each key a listed job claims; `records(key)` are the job ids recorded for
    it. Keys in `skip` (a submit in flight: its id is not recorded yet) are left out."""
    candidates: dict[str, list[tuple[SlurmJob, bool]]] = {}
    for job in listed:
        claim = owner.claim(job)
        if claim is not None and job.job_id not in abandoned and claim.key not in skip:
            candidates.setdefault(claim.key, []).append((job, claim.vouched))
    found = Placeholders({})
    for key, jobs in candidates.items():
        chosen, extras = choose(jobs, {i for i in records(key) if i not in abandoned})
        if chosen is not None:
            found.jobs[key] = chosen
        found.extras.extend(extras)
    return found


def choose(
    candidates: list[tuple[SlurmJob, bool]], recorded: Collection[int]
) -> tuple[SlurmJob | None, list[SlurmJob]]:
    """The one of a key's (job, vouched) candidates that stands for it, and the duplicates:
    vouched, active and recorded nowhere (a submit that timed out after Slurm took it)."""
    vouched = sorted((j for j, ok in candidates if ok), key=lambda j: j.job_id)
    if recorded:
        ids = [j for j, _ in candidates if j.job_id in recorded]
        chosen = max(ids, key=lambda j: j.job_id) if ids else None
    else:  # the first submit wins: a later one can only be a duplicate
        active = [j for j in vouched if j.state in ACTIVE_STATES]
        chosen = active[0] if active else (vouched[-1] if vouched else None)
    extras = [
        j for j in vouched
        if j is not chosen and j.job_id not in recorded and j.state in ACTIVE_STATES
    ]  # fmt: skip
    return chosen, extras


def hook_refusal(
    kind: str,
    key: str,
    node: str,
    job: SlurmJob | None,
    owner: Ownership,
    recorded: Collection[int],
) -> str | None:
    """Why a hook call for `key` about `job` (as Slurm describes it; None: no such job) must
    not be acted on, or None. The caller holds the key's token, no more: the job must be the
    key's placeholder by our rules, and a `started` job must run on the node it names."""
    if job is None:
        return "Slurm has no such job"
    claim = owner.claim(job)
    if claim is None or claim.key != key:
        return f"Slurm job {job.job_id} is not this scheduler's placeholder for {key}"
    if recorded and job.job_id not in recorded:
        return f"{key} holds job {', '.join(str(i) for i in sorted(recorded))}, not {job.job_id}"
    if not recorded and not claim.vouched:
        return f"nothing records Slurm job {job.job_id} for {key}"
    if kind == "started" and node not in _nodes(job):
        return f"Slurm runs job {job.job_id} on {job.nodes or 'no node yet'}, not on {node!r}"
    return None


def _nodes(job: SlurmJob) -> set[str]:
    return {str(n) for n in hostlist.expand_hostlist(job.nodes)} if job.nodes else set()
