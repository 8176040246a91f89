"""The differ: what a live plan will show, checked over plain data."""

from __future__ import annotations

import copy

from reconciler.compile.desired import compile_desired_state
from reconciler.plan.diff import desired_objects, field_changes, needs_dry_run, plan_changes
from reconciler.plan.live import LiveNode, LiveState
from reconciler.plan.model import (
    STEP_DRAIN,
    STEP_REGISTER,
    STEP_RESUME,
    STEP_RETIRE,
    Action,
    ObjectRef,
)
from reconciler.plan.text import render_text
from tests.unit.conftest import config_from
from tests.unit.test_compile import fixture_state

STS = ObjectRef("kubernetes", "StatefulSet", "slurm", "slurm-gpu-small")


def _node(name: str, *states: str, reason: str | None = None) -> LiveNode:
    return LiveNode(
        name, frozenset(states or {"IDLE"}), reason, 4, 8192,
        "gpu:quadro_rtx_4000:7" if "gpu" in name else None,
        ("gpu-small", "gpu", "cu117", "las1", "inference") if "gpu" in name
        else ("cpu", "epyc", "las1"),
    )  # fmt: skip


def _live(**changes: object) -> LiveState:
    state = fixture_state()
    kube = {ref: copy.deepcopy(obj) for ref, obj in desired_objects(state).items()
            if ref.scope == "kubernetes" and ref.kind != "Secret"}  # fmt: skip
    nodes = {n.name: _node(n.name) for n in state.slurm_nodes}
    secrets = frozenset(s.name for s in state.secrets)
    live = LiveState(kube, nodes, state.slurm_conf, state.gres_conf, secrets=secrets)
    for key, value in changes.items():
        live = LiveState(**{**live.__dict__, key: value})
    return live


def test_live_equal_to_desired_is_no_changes_and_needs_no_dry_run() -> None:
    state, live = fixture_state(), _live()
    assert needs_dry_run(state, live) == []
    plan = plan_changes(state, live)
    assert not plan.has_changes and plan.unchanged == len(desired_objects(state))
    assert not plan.controller_restart
    assert "No changes." in render_text(plan)


def test_kube_update_uses_the_server_view_and_names_field_paths() -> None:
    state, live = fixture_state(), _live()
    live.kube_objects[STS]["spec"]["replicas"] = 5
    live.kube_objects[STS]["spec"]["template"]["spec"]["containers"][0]["image"] = "old:1"
    assert needs_dry_run(state, live) == [STS]
    view = copy.deepcopy(desired_objects(state)[STS])
    view["metadata"]["resourceVersion"] = "42"  # server-managed: never a change
    plan = plan_changes(state, live, server_view={STS: view})
    [change] = plan.changes
    assert change.action is Action.UPDATE and change.desired == desired_objects(state)[STS]
    assert [f.path for f in change.fields] == [
        "spec.replicas",
        "spec.template.spec.containers[name=slurmd].image",
    ]
    text = render_text(plan)
    assert "-  replicas: 5" in text and "+  replicas: 2" in text


def test_fields_set_by_others_are_not_changes() -> None:
    state, live = fixture_state(), _live()
    live.kube_objects[STS]["metadata"]["annotations"] = {"someone.else/note": "x"}
    live.kube_objects[STS]["status"] = {"replicas": 2}
    assert needs_dry_run(state, live) == []
    assert not plan_changes(state, live).has_changes


def test_pruned_kube_objects_go_last_statefulsets_before_configmaps() -> None:
    live = _live()
    for kind in ("ConfigMap", "StatefulSet"):
        ref = ObjectRef("kubernetes", kind, "slurm", "old")
        live.kube_objects[ref] = {"kind": kind, "metadata": {"name": "old"}}
    plan = plan_changes(fixture_state(), live)
    kube = [(c.action, c.ref.kind) for c in plan.changes if c.ref.scope == "kubernetes"]
    assert kube == [(Action.DELETE, "StatefulSet"), (Action.DELETE, "ConfigMap")]


def test_slurm_nodes_register_resume_retire_and_leave_others_alone() -> None:
    state = fixture_state()
    nodes = {
        "slurm-cpu-0": _node("slurm-cpu-0", "IDLE", "DRAIN", reason="reconciler: scale-down"),
        "slurm-gpu-small-1": _node("slurm-gpu-small-1", "IDLE", "DRAIN", reason="bad gpu"),
        "slurm-gpu-small-2": _node("slurm-gpu-small-2", "MIXED"),  # a spare still running
        "login-0": _node("login-0"),  # not ours: declared by nobody we know
    }
    plan = plan_changes(state, _live(slurm_nodes=nodes))
    by_name = {c.ref.name: c for c in plan.changes if c.ref.kind == "Node"}
    assert by_name["slurm-gpu-small-0"].steps == (STEP_REGISTER,)
    assert by_name["slurm-cpu-0"].steps == (STEP_RESUME,)
    assert by_name["slurm-gpu-small-2"].action is Action.DELETE
    assert by_name["slurm-gpu-small-2"].steps == (STEP_DRAIN, STEP_RETIRE)
    assert "slurm-gpu-small-1" not in by_name and "login-0" not in by_name
    assert any("drained by someone else ('bad gpu')" in w for w in plan.warnings)
    assert plan.summary().drain == 1


def test_declared_nodes_changing_needs_a_controller_restart() -> None:
    """Against a cluster applied before our nodes were recorded on the slurm.conf ConfigMap
    (test_declared_nodes.py has the record), the live slurm.conf's NodeName lines count."""
    state = fixture_state()
    live = _live(slurm_conf=state.slurm_conf.replace("slurm-gpu-small-[2-3]", "slurm-gpu-small-2"))
    conf_map = ObjectRef("kubernetes", "ConfigMap", "slurm", "slurm-slurm-conf")
    del live.kube_objects[conf_map]["metadata"]["annotations"]
    plan = plan_changes(state, live)
    assert plan.controller_restart
    assert [c.ref.name for c in plan.changes] == ["slurm.conf"]


def test_partitions_are_compared_with_the_live_slurm_conf() -> None:
    state = fixture_state()
    live = _live(slurm_conf=state.slurm_conf.replace("PriorityTier=10", "PriorityTier=5"))
    changes = {c.ref.name: c for c in plan_changes(state, live).changes}
    assert [f.path for f in changes["gpu"].fields] == ["PriorityTier"]
    assert changes["slurm.conf"].action is Action.UPDATE


def test_fingerprint_follows_node_state_and_resource_versions() -> None:
    live = _live()
    drained = _live(slurm_nodes={**live.slurm_nodes, "slurm-cpu-0": _node("slurm-cpu-0", "DRAIN")})
    assert live.fingerprint() == _live().fingerprint() != drained.fingerprint()


def test_field_changes_of_unnamed_lists_compare_whole() -> None:
    assert [f.path for f in field_changes({"a": [1, 2]}, {"a": [2, 1]})] == ["a"]
    assert field_changes({"a": {"b": 1}}, {"a": {"b": 1}}) == []


def test_a_fake_nodes_comment_in_extra_config_cannot_skip_a_drain() -> None:
    """The live slurm.conf's own `# Nodes:` comment was how we knew our nodes; one
    written in extraConfig hid them, and removing a definition deleted its Pods undrained."""
    values = """
        slurmConfig:
          extraConfig: |
            # Nodes: (not really)
            PreemptMode=REQUEUE
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc, las1], replicas: 1}
            gpu: {definitions: [rtx4000, las1], replicas: 2}
        """
    before = compile_desired_state(config_from(values))
    after = compile_desired_state(config_from(values.replace("gpu: {", "gpu: {enabled: false, ")))
    plan = plan_changes(after, desired_objects(before))
    gone = {c.ref.name: c.steps for c in plan.changes if c.ref.kind == "Node"}
    assert gone == {
        "slurm-gpu-0": (STEP_DRAIN, STEP_RETIRE),
        "slurm-gpu-1": (STEP_DRAIN, STEP_RETIRE),
    }
    assert plan.controller_restart
