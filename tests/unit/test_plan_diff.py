"""The differ: what a live plan will show, checked over plain data."""

from __future__ import annotations

import copy

from reconciler.plan.diff import desired_objects, field_changes, plan_changes
from reconciler.plan.model import Action, ObjectRef
from reconciler.plan.text import render_text
from tests.unit.test_compile import fixture_state


def test_live_equal_to_desired_is_no_changes() -> None:
    state = fixture_state()
    plan = plan_changes(state, desired_objects(state))
    assert not plan.has_changes and plan.unchanged == len(desired_objects(state))
    assert "No changes." in render_text(plan)


def test_update_delete_and_field_paths() -> None:
    state = fixture_state()
    live = copy.deepcopy(desired_objects(state))
    sts = ObjectRef("kubernetes", "StatefulSet", "slurm", "slurm-gpu-small")
    live[sts]["spec"]["replicas"] = 5
    live[sts]["spec"]["template"]["spec"]["containers"][0]["image"] = "old:1"
    stale = ObjectRef("slurm", "Node", "", "slurm-old-0")
    live[stale] = {"name": "slurm-old-0"}
    plan = plan_changes(state, live)
    by_ref = {c.ref: c for c in plan.changes}
    assert by_ref[sts].action is Action.UPDATE
    assert [f.path for f in by_ref[sts].fields] == [
        "spec.replicas",
        "spec.template.spec.containers[name=slurmd].image",
    ]
    assert by_ref[stale].action is Action.DELETE
    summary = plan.summary()
    assert (summary.add, summary.change, summary.destroy, summary.drain) == (0, 1, 1, 1)
    text = render_text(plan)
    assert "-  replicas: 5" in text and "+  replicas: 2" in text


def test_deletions_come_last_statefulsets_before_configmaps() -> None:
    state = fixture_state()
    live = {
        ObjectRef("kubernetes", "ConfigMap", "slurm", "old"): {"a": 1},
        ObjectRef("kubernetes", "StatefulSet", "slurm", "old"): {"a": 1},
    }
    kinds = [(c.action, c.ref.kind) for c in plan_changes(state, live).changes[-2:]]
    assert kinds == [(Action.DELETE, "StatefulSet"), (Action.DELETE, "ConfigMap")]


def test_field_changes_of_unnamed_lists_compare_whole() -> None:
    assert [f.path for f in field_changes({"a": [1, 2]}, {"a": [2, 1]})] == ["a"]
    assert field_changes({"a": {"b": 1}}, {"a": {"b": 1}}) == []
