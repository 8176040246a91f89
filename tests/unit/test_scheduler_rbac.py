"""`reconciler render-rbac`'s objects from scheduler.scope (scheduler/rbac.py), over plain
values: the namespaces the daemon's scheduler watches are the ones it is granted."""

from __future__ import annotations

from typing import Any

from reconciler.scheduler.rbac import SCHEDULER_RULES, scheduler_rbac
from reconciler.scheduler.settings import settings_from_values

ACCOUNT = ("slurm", "reconciler")


def _rbac(scope: dict[str, Any] | None, namespace: str = "slurm") -> list[dict[str, Any]]:
    values = {"scheduler": {"scope": scope}} if scope is not None else {}
    return scheduler_rbac(settings_from_values(values, release="slurm", namespace=namespace),
                          ACCOUNT)  # fmt: skip


def _where(objects: list[dict[str, Any]]) -> list[tuple[str, str | None, str]]:
    return [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects]


def test_a_role_in_each_other_namespace_of_a_comma_separated_scope() -> None:
    """SUNK's form (a comma-separated string); the release namespace is deploy/base's."""
    objects = _rbac({"type": "namespace", "namespaces": "slurm, team-a,team-b"})
    assert _where(objects) == [
        ("Role", "team-a", "slurm-reconciler-scheduler"),
        ("RoleBinding", "team-a", "slurm-reconciler-scheduler"),
        ("Role", "team-b", "slurm-reconciler-scheduler"),
        ("RoleBinding", "team-b", "slurm-reconciler-scheduler"),
        ("ClusterRole", None, "slurm-reconciler-scheduled-namespaces"),
        ("ClusterRoleBinding", None, "slurm-reconciler-scheduled-namespaces"),
    ]
    assert objects[0]["rules"] == list(SCHEDULER_RULES)
    assert objects[4]["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "resourceNames": ["team-a", "team-b"],
            "verbs": ["get"],
        }
    ]
    for binding in objects[1::2]:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "reconciler",
                                        "namespace": "slurm"}]  # fmt: skip
        assert binding["roleRef"]["name"] == binding["metadata"]["name"]


def test_a_blank_scope_is_the_release_namespace_which_deploy_base_grants() -> None:
    assert _rbac(None) == []
    assert _rbac({"type": "namespace", "namespaces": ""}) == []
    assert _rbac({"type": "namespace", "namespaces": ["slurm"]}) == []


def test_a_cluster_scope_is_one_cluster_role_and_never_patches_pods() -> None:
    objects = _rbac({"type": "cluster", "namespaces": ["ignored"]})
    assert _where(objects) == [
        ("ClusterRole", None, "slurm-reconciler-scheduler"),
        ("ClusterRoleBinding", None, "slurm-reconciler-scheduler"),
    ]
    rules = objects[0]["rules"]
    assert rules[:-1] == list(SCHEDULER_RULES)
    assert rules[-1] == {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}
    for rule in rules:
        assert not ({"pods", "*"} & set(rule["resources"])
                    and {"patch", "update", "*"} & set(rule["verbs"])), rule  # fmt: skip
