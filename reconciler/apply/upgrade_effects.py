"""Carrying out a Slurm upgrade: the steps plan/upgrade_run.py decides, done through the
target's adapters, the record written after each (docs/plan-apply.md, "Upgrading Slurm").

A stage's check asks the daemons themselves: slurmdbd through `sacctmgr show configuration`,
slurmctld through `scontrol show config`, every slurmd of the stage's workloads through
`scontrol show node` (the release each registered with), slurmrestd through its ping. A
check that fails stops the upgrade: the record says so and `UpgradeStoppedError` is raised;
nothing after it is applied until the repo changes.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from reconciler.adapters.sacctmgr import SacctmgrError
from reconciler.apply.controller import rolled_out
from reconciler.apply.executor import apply_plan
from reconciler.apply.slurmd_roll import replica_names, roll_slurmd
from reconciler.apply.target import ApplyError, ApplyOptions, Say, Target
from reconciler.errors import ReconcilerError
from reconciler.plan.model import Plan
from reconciler.plan.upgrade import CLIENTS, SLURMCTLD, SLURMD, SLURMDBD, UpgradeStage
from reconciler.plan.upgrade_parts import (
    raising_plan,
    restoring_plan,
    slurm_conf_map,
    stage_plan,
)
from reconciler.plan.upgrade_roll import Roll
from reconciler.plan.upgrade_run import (
    APPLY_STAGE,
    BACK_UP,
    FINISHED,
    NONE,
    RAISE_TIMEOUTS,
    RESTORE,
    STOP,
    WAIT,
    WAITING,
    Check,
    Seen,
    Step,
    UpgradeRecord,
    judge,
    next_step,
)

log = logging.getLogger(__name__)


class UpgradeStoppedError(ApplyError):
    """A stage's check failed: the upgrade stopped there (its record says which)."""


class UpgradePausedError(ReconcilerError):
    """This process may no longer act (it is stopping, or another replica leads): the upgrade
    stays recorded at the step it reached, for whoever acts next to resume there."""


class UpgradeRecords(Protocol):
    """Where the record of the upgrade is kept (the daemon's status ConfigMap), and told of
    each step (written there; a stop is also an Event)."""

    def read(self) -> UpgradeRecord | None: ...
    def write(self, record: UpgradeRecord | None, step: Step) -> None: ...


@dataclass(frozen=True)
class FileBackup:
    """Where apply sees slurmctld's files (the local stack): StateSaveLocation copied into
    `root/<time>-<label>/StateSaveLocation`, the database dumped beside it by `dump` (a
    mariadb-dump command line; empty when accounting is off)."""

    state: Path
    root: Path
    dump: tuple[str, ...] = ()

    def take(self, label: str, say: Say) -> str:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        where, again = self.root / f"{stamp}-{label}", 1
        while where.exists():  # never over an earlier backup, even of the same second
            again += 1
            where = self.root / f"{stamp}-{label}-{again}"
        where.mkdir(parents=True)
        shutil.copytree(self.state, where / "StateSaveLocation", symlinks=True)
        if self.dump:
            with (where / "slurm_acct_db.sql").open("wb") as out:
                done = subprocess.run(
                    self.dump,
                    stdout=out,
                    stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                    timeout=3600,
                    check=False,
                )
            if done.returncode != 0:
                raise ApplyError(
                    f"the accounting database could not be dumped before the upgrade: "
                    f"{done.stderr.decode(errors='replace').strip()[-400:]}",
                    hint="nothing was upgraded; is MariaDB up?",
                )
        say(f"backed up StateSaveLocation{' and the accounting database' if self.dump else ''}"
            f" to {where}")  # fmt: skip
        return str(where)


def carry_out(
    plan: Plan,
    objects: Sequence[Mapping[str, Any]],
    slurm_conf: str,
    target: Target,
    records: UpgradeRecords,
    key: str,
    options: ApplyOptions,
    say: Say,
    proceed: Callable[[], bool] = lambda: True,
) -> bool:
    """Every step of the upgrade of revision `key` (resumed from what `records` holds) until it
    is done; whether any step was taken. `objects` and `slurm_conf` are the desired state's.
    UpgradeStoppedError when a check fails (now, or before for this revision);
    UpgradePausedError once `proceed()` says this process may no longer act (asked before
    each step and each look at a check: an upgrade can wait for hours)."""
    record = records.read()
    check: Check | None = None
    said = ""
    acted = False
    while True:
        step = next_step(plan.upgrade, record, key, check)
        if step.kind not in (NONE, FINISHED, STOP) and not proceed():
            raise UpgradePausedError(f"upgrade paused before: {step.line()}",
                                     hint="whoever acts next resumes here")  # fmt: skip
        if step.kind in (NONE, FINISHED):
            return acted
        if step.kind == STOP:
            if step.record != record:
                records.write(step.record, step)
                say(step.line())
            raise UpgradeStoppedError(step.line(), hint="see the upgrade in `reconciler status`")
        assert step.record is not None
        if step.kind == WAIT:
            assert step.stage is not None
            if step.line() != said:  # what it waits for, in the status while it waits
                records.write(step.record, step)
                say(step.line())
                said = step.line()
            if check is not None:
                time.sleep(options.upgrade_poll)
            check, moved = _check(step.stage, step.record, target, options, say)
            if moved:  # the roll went on: its deadline counts from now
                record = replace(step.record, applied_at=time.time())
                records.write(record, step)
            continue
        say(step.line())
        acted = True
        record = _act(step, plan, objects, slurm_conf, target, options, say)
        records.write(record, step)
        check = None


def _act(
    step: Step,
    plan: Plan,
    objects: Sequence[Mapping[str, Any]],
    slurm_conf: str,
    target: Target,
    options: ApplyOptions,
    say: Say,
) -> UpgradeRecord:
    record = step.record
    assert record is not None
    stages = record.stages
    if step.kind == BACK_UP:
        label = f"{'-'.join(stages[0].before)}-to-{'-'.join(stages[0].after)}"
        if target.backup is None:
            say(
                "warning: apply cannot reach StateSaveLocation or the database here: back "
                "them up by hand before the first stage (SchedMD's doc/html/upgrades.shtml)"
            )
            return replace(record, backup="not taken: apply cannot reach them here")
        return replace(record, backup=target.backup.take(label, say))
    conf_map = slurm_conf_map(objects)
    if step.kind == RAISE_TIMEOUTS:
        apply_plan(raising_plan(plan, stages, conf_map, slurm_conf), target, options, say)
    elif step.kind == APPLY_STAGE:
        assert step.stage is not None
        apply_plan(stage_plan(plan, step.stage, int(options.schema_timeout)), target, options,
                   say)  # fmt: skip
        return replace(record, applied_at=time.time())
    elif step.kind == RESTORE:
        apply_plan(restoring_plan(plan, stages, objects, conf_map, slurm_conf), target, options,
                   say)  # fmt: skip
    return record


def _check(
    stage: UpgradeStage, record: UpgradeRecord, target: Target, options: ApplyOptions, say: Say
) -> tuple[Check, bool]:
    """The stage's check, and whether slurmd's roll moved on (a slurmd stage rolls its nodes
    as it is checked: the check waits while it moves, and while jobs hold drained nodes)."""
    limit = options.schema_timeout if stage.component == SLURMDBD else options.upgrade_timeout
    waited = time.time() - record.applied_at if record.applied_at else 0.0
    try:
        if stage.component == SLURMD:
            moves = roll_slurmd(stage, _workloads(stage, target), target, say)
            if moves or moves.held:
                return Check(stage.number, WAITING, _rolling(moves)), bool(moves)
        seen = Seen(_answers(stage, target), _rolled_out(stage, target))
    except ReconcilerError as error:  # the API server or slurmctld away: look again
        log.info("upgrade check of stage %d: %s", stage.number, error)
        return Check(stage.number, WAITING, str(error)), False
    return judge(stage, seen, waited, limit), False


def _rolling(moves: Roll) -> str:
    said = [f"{verb} {', '.join(names)}" for verb, names in (
        ("drained", moves.drain), ("restarting", moves.delete), ("resumed", moves.resume),
        ("jobs still hold", moves.held)) if names]  # fmt: skip
    return "rolling slurmd: " + "; ".join(said)


def _answers(stage: UpgradeStage, target: Target) -> tuple[tuple[str, str | None], ...]:
    if stage.component == SLURMDBD:
        if target.sacctmgr is None:
            return ()
        try:
            release = target.sacctmgr.slurmdbd_release()
        except SacctmgrError:
            release = None
        return (("slurmdbd", str(release) if release else None),)
    if stage.component == SLURMCTLD:
        try:
            return (("slurmctld", target.scontrol.slurmctld_release()),)
        except ReconcilerError:
            return (("slurmctld", None),)
    if stage.component == SLURMD:
        try:
            versions = target.scontrol.node_versions()
        except ReconcilerError:
            versions = {}
        return tuple((name, versions.get(name)) for name in _nodes_of(stage, target))
    assert stage.component == CLIENTS
    try:
        target.slurm.ping()
        return (("slurmrestd", target.slurm.slurm_version),)
    except ReconcilerError:
        return (("slurmrestd", None),)


def _workloads(stage: UpgradeStage, target: Target) -> list[dict[str, Any]]:
    found = []
    for ref in stage.objects:
        kind, _, where = ref.partition(" ")
        namespace, _, name = where.partition("/")
        obj = target.kube.get("apps/v1", kind, name, namespace)
        if obj is not None:
            found.append(obj)
    return found


def _nodes_of(stage: UpgradeStage, target: Target) -> list[str]:
    """The Slurm nodes of the stage's StatefulSets, one per replica (a Pod being made anew
    is asked too: it must answer before the stage passes)."""
    return sorted(name for w in _workloads(stage, target) for name in replica_names(w))


def _rolled_out(stage: UpgradeStage, target: Target) -> bool:
    """Every workload of the stage runs its new template on every replica, all ready (a
    StatefulSet that updates OnDelete never moves its currentRevision: its updated replicas
    are what count)."""
    workloads = _workloads(stage, target)
    return len(workloads) == len(stage.objects) and all(
        rolled_out(w, int(w["metadata"].get("generation") or 0)) for w in workloads
    )
