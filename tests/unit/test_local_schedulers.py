"""Which repos `local up` must run our Pod scheduler for: the
`slurmConfig.slurmd.suspendTime` of SUNK's "Slurm Workload Manager" page ("Pods which remain idle or
down for this amount of time will be deleted", default `INFINITE`) puts the slurmd Pods under our
scheduler, which the node agent never stands in for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconciler.compile.desired import DesiredState
from reconciler.local.agent.schedulers import scheduler_needed

NODES = """
compute:
  nodes:
    cpu:
      definitions: [cpu-epyc]
      replicas: 2
"""


def _workload(kind: str, scheduler: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": []}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"kind": kind, "metadata": {"name": "x"}, "spec": {"template": {"spec": spec}}}


def test_pods_of_the_default_scheduler_need_none() -> None:
    objects = [
        {"kind": "ConfigMap", "metadata": {"name": "conf"}, "data": {}},
        _workload("Deployment", None),
        _workload("StatefulSet", "default-scheduler"),
    ]
    assert scheduler_needed(objects) is None


def test_a_pod_template_naming_another_scheduler_needs_it() -> None:
    objects = [_workload("Deployment", None), _workload("StatefulSet", "mine")]
    assert scheduler_needed(objects) == "mine"


@pytest.mark.parametrize("suspend_time", ["INFINITE", None])
def test_page_default_suspend_time_needs_no_scheduler(
    compile_values: Callable[..., DesiredState], suspend_time: str | None
) -> None:
    power = f"slurmConfig:\n  slurmd:\n    suspendTime: {suspend_time}\n" if suspend_time else ""
    assert scheduler_needed(compile_values(power + NODES).kube_objects) is None


def test_a_suspend_time_needs_our_scheduler_by_its_default_name(
    compile_values: Callable[..., DesiredState],
) -> None:
    state = compile_values("slurmConfig:\n  slurmd:\n    suspendTime: 600\n" + NODES)
    assert scheduler_needed(state.kube_objects) == "slurm-slurm-slurm-scheduler"


def test_a_suspend_time_needs_our_scheduler_by_the_name_values_give(
    compile_values: Callable[..., DesiredState],
) -> None:
    values = "slurmConfig:\n  slurmd:\n    suspendTime: 600\nscheduler:\n  name: night-shift\n"
    assert scheduler_needed(compile_values(values + NODES).kube_objects) == "night-shift"
