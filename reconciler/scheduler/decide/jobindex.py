"""Which placeholder job each Pod has, merged from Slurm's job lists and from what the
scheduler learned itself (hooks, submits, cancels). Pure.

A list is a snapshot taken when its request left; anything learned after that moment is newer
and wins. Without that rule a list sent just before a job's `started` hook says PENDING, and a
just-bound Pod's job looks requeued (the benchmark caught it).
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable, Mapping
from dataclasses import dataclass, field

from reconciler.adapters.slurm.model import SlurmJob
from reconciler.scheduler.decide.ownership import Ownership, Records, placeholders
from reconciler.scheduler.decide.pod_decide import ACTIVE_STATES

# A job in these states may still hold its Pod's resources: gone from a list, it is confirmed
# gone with Slurm before its Pod is touched. An ended one was merely purged (MinJobAge).
HOLDING_STATES = ACTIVE_STATES | {"COMPLETING"}


@dataclass(frozen=True)
class Merged:
    jobs: dict[str, SlurmJob]  # Pod uid -> its placeholder job
    learned: dict[str, float]  # what is still newer than this list
    changed: list[str]  # Pod uids to look at again
    vanished: dict[str, int] = field(default_factory=dict)  # kept until Slurm confirms
    extras: list[SlurmJob] = field(default_factory=list)  # duplicates of ours to cancel


def merge_listing(
    known: Mapping[str, SlurmJob],
    learned: Mapping[str, float],
    listed: Iterable[SlurmJob],
    *,
    sent: float,
    owner: Ownership,
    records: Records,
    abandoned: Container[int] = (),
    submitting: Collection[str] = (),
) -> Merged:
    """`known` updated by a full job list whose request left at `sent` (same clock as
    `learned`). `records(key)` are the job ids the key's Pods record (see ownership.py; the
    known job's id counts too). Keys learned of after the list was asked for, or with a submit
    in flight, are left as they are. A job still holding resources that is missing from the
    list stays known and is reported `vanished`: one bad list must not delete Pods."""
    fresh = {uid for uid, at in learned.items() if at > sent}
    skip = fresh | set(submitting)

    def recorded(key: str) -> set[int]:
        ids = set(records(key))
        if key in known:
            ids.add(known[key].job_id)
        return ids

    found = placeholders(listed, owner, recorded, abandoned=abandoned, skip=skip)
    jobs = dict(known)
    changed: list[str] = []
    for uid, job in found.jobs.items():
        before = jobs.get(uid)
        if before is None or _differs(before, job):
            changed.append(uid)
        jobs[uid] = job
    vanished: dict[str, int] = {}
    for uid in [u for u in jobs if u not in found.jobs and u not in skip]:
        if jobs[uid].state in HOLDING_STATES:
            vanished[uid] = jobs[uid].job_id
        else:  # it ended (we saw it) and Slurm purged it
            del jobs[uid]
            changed.append(uid)
    kept = {u: at for u, at in learned.items() if u in fresh}
    return Merged(jobs, kept, changed, vanished, found.extras)


def _differs(a: SlurmJob, b: SlurmJob) -> bool:
    return (a.job_id, a.state, a.nodes) != (b.job_id, b.state, b.nodes)


def pending_job(job_id: int, name: str, now: float) -> SlurmJob:
    """What we know of a job we just submitted, until Slurm tells us more."""
    return SlurmJob(
        job_id=job_id, name=name, state="PENDING", state_reason="None", state_description="",
        partition="", nodes="", required_nodes="", excluded_nodes="", reservation="",
        constraints="", gres="", user_name="", user_id=None, group_id=None, comment="",
        time_limit_minutes=None, priority=0, node_count=1, cpus=0, submit_time=int(now),
        start_time=0, end_time=0, exit_code=None, batch_host="", flags=frozenset(),
    )  # fmt: skip
