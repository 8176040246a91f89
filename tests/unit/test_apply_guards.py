"""Apply refuses what it cannot finish before it changes anything."""

from __future__ import annotations

import pytest

from reconciler.apply.executor import apply_plan
from reconciler.apply.target import ApplyError, ApplyOptions, Target
from reconciler.plan.diff import plan_changes
from reconciler.plan.live import LiveState
from tests.unit.test_compile import fixture_state


def test_a_controller_restart_without_a_restarter_is_refused_before_any_change() -> None:
    state = fixture_state()
    live = LiveState(slurm_conf=state.slurm_conf.replace("slurm-gpu-small-[2-3]", "x-[0-1]"))
    plan = plan_changes(state, live)
    assert plan.controller_restart
    # No adapters at all: touching any of them would fail with AttributeError, not ApplyError.
    target = Target(kube=None, slurm=None, scontrol=None, namespace="slurm")  # type: ignore[arg-type]
    said: list[str] = []
    with pytest.raises(ApplyError, match="nothing was changed"):
        apply_plan(plan, target, ApplyOptions(), said.append)
    assert said == []
