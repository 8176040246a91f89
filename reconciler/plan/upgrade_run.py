"""Carrying out a Slurm upgrade, one stage at a time (pure): the next step, from the planned
stages, the record of how far the upgrade got, and the latest check of the stage reached.

The steps, in order (SchedMD's doc/html/upgrades.shtml): back up StateSaveLocation and the
accounting database; raise SlurmctldTimeout and SlurmdTimeout (and apply the plan's changes
that are no stage's); then per stage, apply its objects and wait for its check (the component
answers at the new release) before the next; then restore the timeouts (and slurmdbd's
probes). A failed check stops the upgrade: the record says so, and every later step for the
same revision is that stop, so nothing further is applied until the repo changes.

The record is kept where the daemon keeps its status, so a restarted daemon resumes at the
stage it reached: it goes on from the recorded stages, not from a new plan (which no longer
shows a stage whose objects were applied).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from reconciler.plan.upgrade import UpgradeStage
from reconciler.slurm_release import SlurmRelease, maybe_release

# The record's states.
RUNNING, DONE, STOPPED = "running", "done", "stopped"
# The steps.
NONE = "none"  # no upgrade: apply the plan as it is
BACK_UP = "back-up"
RAISE_TIMEOUTS = "raise-timeouts"
APPLY_STAGE = "apply-stage"
WAIT = "wait"
RESTORE = "restore"
FINISHED = "done"  # the upgrade is done: apply what is left of the plan as usual
STOP = "stopped"
# A check's verdicts.
PASSED, WAITING, FAILED = "passed", "waiting", "failed"


@dataclass(frozen=True)
class UpgradeRecord:
    """How far the upgrade for `key` (the revision it is carried out for) got."""

    key: str
    stages: tuple[UpgradeStage, ...]
    applied: int = 0  # the last stage whose objects were applied (0: none)
    passed: int = 0  # the last stage whose check passed
    backup: str = ""  # where the backup was put ("": not yet taken)
    raised: bool = False  # the timeouts are raised
    state: str = RUNNING
    failure: str = ""  # the check that failed, when stopped
    applied_at: float = 0.0  # when stage `applied` was applied (its check's deadline counts)

    def to_json(self) -> str:
        data = asdict(self)
        data["stages"] = [asdict(s) for s in self.stages]
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> UpgradeRecord | None:
        """The record written by to_json; None for "" (no upgrade recorded)."""
        if not text:
            return None
        data: dict[str, Any] = json.loads(text)
        stages = tuple(UpgradeStage(**_stage_fields(s)) for s in data.pop("stages"))
        return cls(stages=stages, **data)

    @property
    def reached(self) -> UpgradeStage | None:
        return self.stages[self.applied - 1] if self.applied else None


def _stage_fields(stage: dict[str, Any]) -> dict[str, Any]:
    """A stage as JSON holds lists where the dataclass holds tuples."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in stage.items()}


@dataclass(frozen=True)
class Check:
    """The latest look at the check of stage `stage`."""

    stage: int
    verdict: str  # PASSED, WAITING or FAILED
    detail: str = ""  # what was seen ("slurmdbd answers at 24.11.5")


@dataclass(frozen=True)
class Step:
    kind: str
    # The record once the step is done (None: no upgrade recorded).
    record: UpgradeRecord | None
    stage: UpgradeStage | None = None
    detail: str = ""

    def line(self) -> str:
        """The progress line apply prints and the daemon logs."""
        stage = self.stage
        where = f"upgrade stage {stage.number}/{stage.of} ({stage.component})" if stage else ""
        return {
            NONE: "no Slurm upgrade",
            BACK_UP: "upgrade: backing up StateSaveLocation and the accounting database",
            RAISE_TIMEOUTS: "upgrade: raising SlurmctldTimeout and SlurmdTimeout for the upgrade",
            APPLY_STAGE: f"{where}: applying {', '.join(stage.objects) if stage else ''}",
            WAIT: f"{where}: waiting: {stage.check if stage else ''}"
                  + (f" (now: {self.detail})" if self.detail else ""),
            RESTORE: "upgrade: every stage passed; restoring the timeouts and slurmdbd's probes",
            FINISHED: "upgrade: done",
            STOP: f"{where}: {self.detail}",
        }[self.kind]  # fmt: skip


def next_step(
    planned: Sequence[UpgradeStage],
    record: UpgradeRecord | None,
    key: str,
    check: Check | None = None,
) -> Step:
    """What to do next for the revision `key`, whose plan has the stages `planned`; `record` is
    what was recorded (of this revision or an earlier one), `check` the latest look at the
    check of the stage reached."""
    if record is not None and record.key == key:
        if record.state == STOPPED:
            return Step(STOP, record, record.reached, record.failure)
        if record.state == RUNNING:
            return _running(record, check)
        # DONE for this revision: whatever a plan still shows, this revision's upgrade was
        # carried out (the plan held to the end shows every stage, one made after a restart
        # the stages left then); a workload set back by hand since is put forward with the
        # rest of the plan.
        return Step(FINISHED, record)
    if not planned:
        return Step(NONE, record)
    return Step(BACK_UP, UpgradeRecord(key, tuple(planned)))


def _running(record: UpgradeRecord, check: Check | None) -> Step:
    if not record.backup:
        return Step(BACK_UP, record)
    if not record.raised:
        return Step(RAISE_TIMEOUTS, replace(record, raised=True))
    if record.applied > record.passed:
        stage = record.reached
        assert stage is not None
        if check is None or check.stage != record.applied or check.verdict == WAITING:
            return Step(WAIT, record, stage, check.detail if check else "")
        if check.verdict == FAILED:
            failure = (f"stopped: its check failed: {stage.check}; {check.detail}; nothing "
                       "after this stage was applied: change the repo to go on")  # fmt: skip
            return Step(STOP, replace(record, state=STOPPED, failure=failure), stage, failure)
        record = replace(record, passed=record.applied)
    if record.applied < len(record.stages):
        stage = record.stages[record.applied]
        return Step(APPLY_STAGE, replace(record, applied=stage.number), stage)
    return Step(RESTORE, replace(record, state=DONE))


@dataclass(frozen=True)
class Seen:
    """What a check saw: each daemon of the stage (a node's name, "slurmdbd") and the release
    it answers at (None: it does not answer); whether the stage's workloads rolled out (every
    replica runs the new template and is ready)."""

    answers: tuple[tuple[str, str | None], ...]
    rolled_out: bool


def judge(stage: UpgradeStage, seen: Seen, waited: float, limit: float) -> Check:
    """PASSED when every daemon answers at the stage's release; FAILED when the workloads rolled
    out and a daemon still answers at another release, or nothing passed within `limit` s;
    else WAITING (a daemon that does not answer yet, slurmdbd converting its database)."""
    wanted = [r for r in (maybe_release(a) for a in stage.after) if r is not None]
    wrong = [(who, said) for who, said in seen.answers
             if said is not None and not at_release(maybe_release(said), wanted)]  # fmt: skip
    silent = [who for who, said in seen.answers if said is None]
    if seen.answers and not wrong and not silent:
        return Check(stage.number, PASSED, f"answers at {', '.join(stage.after)}")
    said = ", ".join(sorted({s or "" for _, s in wrong}))
    detail = "; ".join(
        ([f"{_names(w for w, _ in wrong)} answer at {said}"] if wrong else [])
        + ([f"{_names(silent)} do not answer"] if silent else [])
        + ([] if seen.answers else ["nothing to ask answers"])
    )
    if wrong and seen.rolled_out:
        return Check(stage.number, FAILED, f"rolled out, but {detail}")
    if waited >= limit:
        return Check(stage.number, FAILED, f"not at {', '.join(stage.after)} after "
                                           f"{waited:.0f} s: {detail}")  # fmt: skip
    return Check(stage.number, WAITING, detail)


def at_release(release: SlurmRelease | None, wanted: Sequence[SlurmRelease]) -> bool:
    """A release written as a series ("25.11") is met by every 25.11.x."""
    return release is not None and any(
        release.series == w.series and (w.patch == 0 or release == w) for w in wanted)  # fmt: skip


def _names(names: Any) -> str:
    listed = sorted(set(names))
    return ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
