"""Which placeholder job each Pod has, merged from Slurm's job lists and from what the
scheduler learned itself (hooks, submits, cancels). Pure.

A list is a snapshot taken when its request left; anything learned after that moment is newer
and wins. Without that rule a list sent just before a job's `started` hook says PENDING, and a
just-bound Pod's job looks requeued (the benchmark caught it).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass

from reconciler.adapters.slurm_rest import SlurmJob
from reconciler.scheduler.placeholder import pod_uid_of


@dataclass(frozen=True)
class Merged:
    jobs: dict[str, SlurmJob]  # Pod uid -> its placeholder job
    learned: dict[str, float]  # what is still newer than this list
    changed: list[str]  # Pod uids to look at again


def placeholders_by_uid(
    jobs: Iterable[SlurmJob], abandoned: Container[int] = ()
) -> dict[str, SlurmJob]:
    """Our jobs by Pod UID; of several for one Pod (a resubmit), the newest. `abandoned` jobs
    (cancelled to submit again, or for a refused Pod) no longer stand for their Pod."""
    found: dict[str, SlurmJob] = {}
    for job in jobs:
        if job.job_id in abandoned:
            continue
        uid = pod_uid_of(job.name)
        if uid is not None and (uid not in found or job.job_id > found[uid].job_id):
            found[uid] = job
    return found


def merge_listing(
    known: Mapping[str, SlurmJob],
    learned: Mapping[str, float],
    listed: Iterable[SlurmJob],
    *,
    sent: float,
    abandoned: Container[int] = (),
) -> Merged:
    """`known` updated by a full job list whose request left at `sent` (same clock as
    `learned`). A job missing from the list was purged by Slurm (MinJobAge), unless we
    learned of it after the list was asked for."""
    seen = placeholders_by_uid(listed, abandoned)
    fresh = {uid for uid, at in learned.items() if at > sent}
    jobs = dict(known)
    changed: list[str] = []
    for uid, job in seen.items():
        before = jobs.get(uid)
        if uid in fresh or (before is not None and before.job_id > job.job_id):
            continue
        if before is None or _differs(before, job):
            changed.append(uid)
        jobs[uid] = job
    for uid in [u for u in jobs if u not in seen and u not in fresh]:
        del jobs[uid]
        changed.append(uid)
    return Merged(jobs, {u: at for u, at in learned.items() if u in fresh}, changed)


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
