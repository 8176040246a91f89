"""The parts of a plan each step of a Slurm upgrade applies (pure; plan/upgrade_run.py says
when).

- Raising the timeouts: every change of the plan that is no stage's object, with slurm.conf
  carrying the raised SlurmctldTimeout and SlurmdTimeout; the stages' workloads keep the
  images they run.
- A stage: its objects' changes alone; slurmdbd's with a startup probe that waits out the
  database conversion of its first start on the new release (the liveness probe waits for it).
- Restoring: slurm.conf as the repo renders it, and every stage object as rendered (slurmdbd's
  startup probe as rendered).

Raised to 30 minutes (a larger value set in the repo is kept): longer than the slowest start
the probes allow a restarted daemon (slurmd's ten minutes of startup probe, slurmctld's five)
plus an image pull, so slurmctld never marks a node DOWN (and kills its jobs) while its slurmd
restarts on the new release, nor gives up on a controller that is starting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from reconciler.compile.probes import relaxed_for_conversion
from reconciler.plan.diff import kube_ref
from reconciler.plan.model import SLURM, SLURM_CONFIG, Action, Change, ObjectRef, Plan
from reconciler.plan.upgrade import SLURMDBD, UpgradeStage

UPGRADE_TIMEOUT_SECONDS = 1800
# How long slurmdbd's first start on a new release may convert the database before a probe
# may restart it: as long as apply waits for it (ApplyOptions.schema_timeout).
CONVERSION_SECONDS = 6 * 3600
TIMEOUT_KEYS = ("SlurmctldTimeout", "SlurmdTimeout")
SLURM_CONF = ObjectRef(SLURM, SLURM_CONFIG, "", "slurm.conf")


def raised_timeouts(slurm_conf: str, seconds: int = UPGRADE_TIMEOUT_SECONDS) -> str:
    """slurm.conf with SlurmctldTimeout and SlurmdTimeout at least `seconds`."""
    text = slurm_conf
    for key in TIMEOUT_KEYS:
        line = re.compile(rf"^{key}\s*=\s*(\d+)\s*$", re.MULTILINE | re.IGNORECASE)
        found = line.search(text)
        if found is None:
            text = text.rstrip("\n") + f"\n{key}={seconds}\n"
        elif int(found.group(1)) < seconds:
            text = text[: found.start()] + f"{key}={seconds}" + text[found.end() :]
    return text


def raising_plan(
    plan: Plan, stages: Sequence[UpgradeStage], conf_map: Mapping[str, Any], slurm_conf: str
) -> Plan:
    """The plan's changes that are no stage's, slurm.conf with the timeouts raised."""
    held = _stage_refs(stages)
    kept = [c for c in plan.changes if str(c.ref) not in held and not _is_conf(c, conf_map)]
    raised = _conf_changes(conf_map, raised_timeouts(slurm_conf))
    return replace(plan, changes=(*kept, *raised), upgrade=())


def stage_plan(plan: Plan, stage: UpgradeStage, conversion: int = CONVERSION_SECONDS) -> Plan:
    """The changes of one stage's objects; slurmdbd's first start on the new release under a
    startup probe that allows `conversion` s, so no probe kills its conversion of the
    database."""
    changes = [c for c in plan.changes if str(c.ref) in stage.objects]
    if stage.component == SLURMDBD:
        changes = [replace(c, desired=relaxed_for_conversion(c.desired, SLURMDBD, conversion))
                   if c.desired else c for c in changes]  # fmt: skip
    return replace(plan, changes=tuple(changes), upgrade=(), controller_restart=False)


def restoring_plan(
    plan: Plan, stages: Sequence[UpgradeStage], objects: Iterable[Mapping[str, Any]],
    conf_map: Mapping[str, Any], slurm_conf: str,
) -> Plan:  # fmt: skip
    """slurm.conf as rendered, and every stage object as rendered (`objects`: the desired
    state's), applied again: slurmdbd gets its probes back, the rest is unchanged."""
    held = _stage_refs(stages)
    again = [Change(kube_ref(o), Action.UPDATE, None, None, desired=dict(o))
             for o in objects if str(kube_ref(o)) in held]  # fmt: skip
    return replace(plan, changes=(*_conf_changes(conf_map, slurm_conf), *again), upgrade=(),
                   controller_restart=False)  # fmt: skip


def slurm_conf_map(objects: Iterable[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The ConfigMap that carries slurm.conf among the rendered objects."""
    for obj in objects:
        if obj.get("kind") == "ConfigMap" and "slurm.conf" in (obj.get("data") or {}):
            return obj
    raise ValueError("the rendered objects hold no ConfigMap with slurm.conf")


def _conf_changes(conf_map: Mapping[str, Any], slurm_conf: str) -> tuple[Change, Change]:
    data = {**(conf_map.get("data") or {}), "slurm.conf": slurm_conf}
    desired = {**conf_map, "data": data}
    return (Change(kube_ref(conf_map), Action.UPDATE, None, None, desired=desired),
            Change(SLURM_CONF, Action.UPDATE, None, slurm_conf))  # fmt: skip


def _is_conf(change: Change, conf_map: Mapping[str, Any]) -> bool:
    return change.ref in (SLURM_CONF, kube_ref(conf_map))


def _stage_refs(stages: Sequence[UpgradeStage]) -> set[str]:
    return {ref for stage in stages for ref in stage.objects}
