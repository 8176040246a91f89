"""A plan whose Slurm release changes is carried out stage by stage before the rest of it
(apply/upgrade_effects.py; docs/plan-apply.md, "Upgrading Slurm"), by `reconciler apply` and
the daemon alike: the upgrade first (or its resumption), then the plan made again, which then
holds what is left."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from reconciler.apply.target import ApplyOptions, Say
from reconciler.apply.upgrade_effects import UpgradeRecords, carry_out
from reconciler.config.repo import Config
from reconciler.pipeline.plans import Planned


def upgrade_first(
    planned: Planned,
    records: UpgradeRecords,
    key: str,
    options: ApplyOptions,
    say: Say,
    proceed: Callable[[], bool] = lambda: True,
) -> bool:
    """Every step of the Slurm upgrade of `planned` (or of the one recorded for `key`); whether
    a step was taken, and so the caller plans again. UpgradeStoppedError where a check
    failed. A plan the policies deny, or a bootstrap (Slurm not up), is no upgrade: apply
    says why."""
    plan = planned.plan
    if plan.denials or plan.bootstrap:
        return False
    state = planned.state
    return carry_out(plan, state.kube_objects, state.slurm_conf, planned.target, records, key,
                     options, say, proceed)  # fmt: skip


def values_key(config: Config) -> str:
    """What an upgrade by `reconciler apply` is recorded for: the repo's values (a changed repo
    is a new upgrade; the daemon uses the revision)."""
    text = json.dumps(config.values, sort_keys=True, default=str)
    return "values " + hashlib.sha256(text.encode()).hexdigest()[:16]
