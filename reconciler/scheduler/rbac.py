"""The RBAC the scheduler needs outside the release namespace, from the repo's
`scheduler.scope`: what `reconciler render-rbac` prints for an admin to apply. Pure.

deploy/base grants the release namespace (the daemon's own Role, which holds the same
scheduler rules: slurmd Pods live there) and reads its Namespace. The rest follows the scope:

- `type: namespace` (SUNK's default): a Role and RoleBinding in each other namespace listed,
  and a ClusterRole that reads those Namespaces by name (policies' `namespaceObject`);
- `type: cluster`: one ClusterRole with the scheduler's rules in every namespace, and every
  Namespace readable (deploy/cluster-scope holds it for the default release).

Generated rather than applied by the daemon: creating Roles and bindings would need
`escalate`/`bind` on RBAC, enough to grant itself anything. The admin applies the output
with their own rights, once per change of scope.
"""

from __future__ import annotations

from reconciler.objects import Obj
from reconciler.scheduler.settings import SchedulerSettings

RBAC = "rbac.authorization.k8s.io/v1"
LABELS = {"app.kubernetes.io/name": "reconciler"}

# What the scheduler does to the Pods it serves: watch, bind (pods/binding carries the bind's
# annotations), refuse and annotate through pods/status (where the API server keeps the spec:
# no `patch` on pods, which could change a tenant's image), delete when the job ends, read a
# coscheduling PodGroup's minMember, and tell the Pod's Events. deploy/base's Role repeats
# them for the release namespace (tests/unit/test_deploy_manifests.py checks they agree).
SCHEDULER_RULES: tuple[Obj, ...] = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
)


def scheduler_role_name(release: str) -> str:
    return f"{release}-reconciler-scheduler"


def scheduler_rbac(settings: SchedulerSettings, service_account: tuple[str, str]) -> list[Obj]:
    """The objects that let `service_account` (namespace, name) schedule the scope's Pods
    beyond the release namespace; [] when the scope is the release namespace alone."""
    name = scheduler_role_name(settings.release)
    subject = {"kind": "ServiceAccount", "name": service_account[1],
               "namespace": service_account[0]}  # fmt: skip
    if settings.watch_namespaces is None:
        rules = [*SCHEDULER_RULES,
                 {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]  # fmt: skip
        return [_role("ClusterRole", name, None, rules),
                _binding("ClusterRoleBinding", name, None, subject)]  # fmt: skip
    others = [n for n in settings.watch_namespaces if n != settings.namespace]
    if not others:
        return []
    objects: list[Obj] = []
    for namespace in others:
        objects += [_role("Role", name, namespace, list(SCHEDULER_RULES)),
                    _binding("RoleBinding", name, namespace, subject)]  # fmt: skip
    reads = f"{settings.release}-reconciler-scheduled-namespaces"
    rule = {"apiGroups": [""], "resources": ["namespaces"], "resourceNames": others,
            "verbs": ["get"]}  # fmt: skip
    return [*objects, _role("ClusterRole", reads, None, [rule]),
            _binding("ClusterRoleBinding", reads, None, subject)]  # fmt: skip


def _metadata(name: str, namespace: str | None) -> Obj:
    return {"name": name, **({"namespace": namespace} if namespace else {}),
            "labels": dict(LABELS)}  # fmt: skip


def _role(kind: str, name: str, namespace: str | None, rules: list[Obj]) -> Obj:
    return {"apiVersion": RBAC, "kind": kind, "metadata": _metadata(name, namespace),
            "rules": [dict(rule) for rule in rules]}  # fmt: skip


def _binding(kind: str, name: str, namespace: str | None, subject: Obj) -> Obj:
    role_kind = "ClusterRole" if kind == "ClusterRoleBinding" else "Role"
    return {"apiVersion": RBAC, "kind": kind, "metadata": _metadata(name, namespace),
            "subjects": [subject],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                        "name": name}}  # fmt: skip
