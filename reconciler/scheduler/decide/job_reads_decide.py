"""What the steady-state poll reads of Slurm, decided from `GET /jobs/state/` (every job's id
and state, a few ms) and the cache: only the jobs of ours whose state moved are read back, one
GET each; Slurm's whole job list is read only at start and after a gap. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from reconciler.adapters.slurm.model import SlurmJob
from reconciler.scheduler.decide.jobindex import HOLDING_STATES


@dataclass(frozen=True)
class StateLook:
    reread: dict[str, int] = field(default_factory=dict)  # key -> its job: its state moved
    vanished: dict[str, int] = field(default_factory=dict)  # key -> its job, holding, unlisted
    purged: list[str] = field(default_factory=list)  # keys whose ended job Slurm purged


def look_at_states(
    known: Mapping[str, SlurmJob],
    states: Mapping[int, str],
    *,
    skip: Collection[str] = (),
    start_watched: Collection[int] = (),
) -> StateLook:
    """Our jobs (`known`: key -> job) against every job's state as Slurm lists it. Keys in
    `skip` (learned of after the list was asked for, or a submit in flight) are newer than
    it and left alone. A job still holding resources that the list lacks is `vanished`, to be
    confirmed with Slurm before its Pod is touched (job_trust.py), as after a whole list.
    A job of `start_watched` that left PENDING is the start watch's to read (starts.py): read
    here too, a burst's starts were read twice (1.5 GETs per Pod)."""
    look = StateLook()
    for key, job in known.items():
        if key in skip:
            continue
        state = states.get(job.job_id)
        if state is None:
            if job.state in HOLDING_STATES:
                look.vanished[key] = job.job_id
            else:
                look.purged.append(key)
        elif state != job.state and job.job_id not in start_watched:
            look.reread[key] = job.job_id
    return look


def list_needed(
    *, listed_once: bool, gap: bool, uncertain: Mapping[str, float], listed_at: float
) -> bool:
    """Whether the next poll must read the whole list: at start, after a gap (a poll that
    failed), and while a submit that failed without Slurm's verdict waits for a list asked for
    after it (job_trust.may_submit): had Slurm taken that job, only a list finds it."""
    return not listed_once or gap or any(at >= listed_at for at in uncertain.values())
