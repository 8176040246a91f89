"""Plans made while Slurm does not answer: on a new cluster, or with a control-plane Deployment
gone, only what brings the control plane up is planned; with the control plane running, a
silent Slurm is an outage and nothing is planned."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.plan.diff import SlurmSilentError, kube_ref, plan_changes
from reconciler.plan.live import LiveState
from reconciler.plan.model import KUBERNETES, Action
from tests.unit.conftest import config_from

VALUES = """
accounting: {enabled: true}
slurmConfig:
  reservations:
    maint:
      {nodeDefinition: cpu, startTime: "2030-01-01T00:00:00+00:00", duration: 60, users: [root]}
compute:
  nodes:
    cpu: {enabled: true, replicas: 2, resources: {limits: {cpu: 2, memory: 4Gi}}}
"""
SILENT = "slurmrestd at http://slurm-rest:6820 unreachable: ConnectionError"


def state() -> DesiredState:
    return compile_desired_state(config_from(VALUES))


def live_with(objects: list[dict[str, Any]], **kwargs: Any) -> LiveState:
    return LiveState({kube_ref(o): o for o in objects}, slurm_error=SILENT, **kwargs)


def ready(obj: dict[str, Any], replicas: int = 1) -> dict[str, Any]:
    live = copy.deepcopy(obj)
    live["status"] = {"readyReplicas": replicas}
    return live


def by_name(desired: DesiredState) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in desired.kube_objects}


def views(desired: DesiredState) -> dict[Any, dict[str, Any]]:
    """What a server-side dry run returns for our objects: themselves (no defaults here)."""
    return {kube_ref(o): o for o in desired.kube_objects}


def test_a_new_cluster_gets_every_object_and_nothing_of_slurm() -> None:
    desired = state()
    plan = plan_changes(desired, live_with([]))
    assert plan.bootstrap and not plan.controller_restart
    kinds = {c.ref.kind for c in plan.changes}
    assert {"Secret", "ConfigMap", "Deployment", "StatefulSet", "Service"} <= kinds
    assert all(c.ref.scope == KUBERNETES and c.action is Action.CREATE for c in plan.changes)
    assert len(plan.changes) == len(desired.kube_objects) + len(desired.secrets)
    # Nodes, partitions and the reservation wait for the next plan, and the plan says so.
    [note] = [w for w in plan.warnings if w.startswith("Slurm does not answer")]
    assert "Deployment slurm-controller" in note and "wait for the next plan" in note


def test_a_lost_rest_deployment_is_recreated_but_a_running_slurmctlds_config_waits() -> None:
    desired = state()
    objects = by_name(desired)
    changed_conf = copy.deepcopy(objects[("ConfigMap", "slurm-slurm-conf")])
    changed_conf["data"]["slurm.conf"] += "# edited by hand\n"
    shrunk = copy.deepcopy(objects[("StatefulSet", "slurm-cpu")])
    shrunk["spec"]["replicas"] = 5  # the plan's 2 would shrink it: needs drains first
    gone = {("Deployment", "slurm-rest"), ("ConfigMap", "slurm-slurm-conf"),
            ("StatefulSet", "slurm-cpu")}  # fmt: skip
    live = [ready(o) for key, o in objects.items() if key not in gone]
    plan = plan_changes(desired, live_with([*live, changed_conf, ready(shrunk, 5)],
                                           secrets=frozenset(s.name for s in desired.secrets)),
                        server_view=views(desired))  # fmt: skip
    assert plan.bootstrap
    assert [(c.ref.kind, c.ref.name, c.action) for c in plan.changes] == [
        ("Deployment", "slurm-rest", Action.CREATE)
    ]


def test_with_the_controller_down_its_config_and_deployment_are_updated() -> None:
    desired = state()
    objects = by_name(desired)
    changed_conf = copy.deepcopy(objects[("ConfigMap", "slurm-slurm-conf")])
    changed_conf["data"]["slurm.conf"] = "# a NodeName line slurmctld dies on\n"
    controller = copy.deepcopy(objects[("Deployment", "slurm-controller")])
    controller["spec"]["replicas"] = 0
    gone = {("ConfigMap", "slurm-slurm-conf"), ("Deployment", "slurm-controller")}
    live = [ready(o) for key, o in objects.items() if key not in gone]
    plan = plan_changes(desired, live_with([*live, changed_conf, controller]),
                        server_view=views(desired))  # fmt: skip
    updated = {(c.ref.kind, c.ref.name) for c in plan.changes if c.action is Action.UPDATE}
    assert {("ConfigMap", "slurm-slurm-conf"), ("Deployment", "slurm-controller")} <= updated
    assert not plan.controller_restart  # a slurmctld that starts reads the new file anyway


def test_pruning_waits_for_slurm() -> None:
    desired = state()
    orphan = copy.deepcopy(by_name(desired)[("StatefulSet", "slurm-cpu")])
    orphan["metadata"]["name"] = "slurm-old-nodes"
    plan = plan_changes(desired, live_with([orphan]))
    assert not [c for c in plan.changes if c.action is Action.DELETE]


def test_slurm_silent_with_the_whole_control_plane_running_is_an_error() -> None:
    desired = state()
    live = live_with([ready(o) for o in desired.kube_objects])
    with pytest.raises(SlurmSilentError, match="no control plane of release slurm"):
        plan_changes(desired, live)


def test_a_plan_made_while_slurm_answers_is_never_a_bootstrap() -> None:
    desired = state()
    plan = plan_changes(desired, LiveState())
    assert not plan.bootstrap
    assert any(c.ref.kind == "Node" for c in plan.changes)
