"""Desired x live -> Plan (pure). Live state arrives as the same plain shapes desired state has,
so one differ serves the offline plan (live is empty) and the live one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.compile.desired import KIND_ORDER, DesiredState, SlurmNode
from reconciler.compile.slurm_conf import Partition, partitions_in
from reconciler.compile.topology import TOPOLOGY_FILES
from reconciler.errors import ReconcilerError
from reconciler.plan.accounting import accounting_changes
from reconciler.plan.bootstrap import bootstrap_plan, control_plane_down
from reconciler.plan.declared import desired_nodes, live_nodes
from reconciler.plan.fields import field_changes
from reconciler.plan.live import LiveNode, LiveState, comparable, contains
from reconciler.plan.model import (
    KUBERNETES,
    SLURM,
    SLURM_ACCOUNT,
    SLURM_CONFIG,
    SLURM_NODE,
    SLURM_PARTITION,
    SLURM_QOS,
    SLURM_RESERVATION,
    SLURM_USER,
    STEP_DRAIN,
    STEP_REGISTER,
    STEP_RESUME,
    STEP_RETIRE,
    Action,
    Change,
    ObjectRef,
    Plan,
)
from reconciler.plan.reservations import reservation_changes
from reconciler.plan.topology import topology_changes
from reconciler.wellknown import DRAIN_REASON_PREFIX


class SlurmSilentError(ReconcilerError):
    """Slurm's state is needed and slurmrestd does not answer."""


# Listed so a plan can compare them, never deleted: the controller's state claim holds every
# job slurmctld knows (a claim going away with a typo in git would lose them all).
NEVER_PRUNED = frozenset({"PersistentVolumeClaim"})

# Apply order across scopes: Kubernetes config objects, then Slurm config, nodes, partitions,
# reservations.
_SLURM_ORDER = {
    SLURM_CONFIG: 10, SLURM_NODE: 11, SLURM_PARTITION: 12, SLURM_RESERVATION: 13,
    SLURM_QOS: 14, SLURM_ACCOUNT: 15, SLURM_USER: 16,
}  # fmt: skip


def desired_objects(state: DesiredState) -> dict[ObjectRef, Any]:
    """Every object of the desired state, keyed by what identifies it in its system."""
    objects: dict[ObjectRef, Any] = {**desired_kube_objects(state)}
    for manifest in [*(s.manifest() for s in state.secrets),
                     *(s.manifest() for s in state.value_secrets)]:  # fmt: skip
        objects[kube_ref(manifest)] = manifest
    objects[ObjectRef(SLURM, SLURM_CONFIG, "", "slurm.conf")] = state.slurm_conf
    objects[ObjectRef(SLURM, SLURM_CONFIG, "", "gres.conf")] = state.gres_conf
    for name, text in state.topology_files.items():
        objects[ObjectRef(SLURM, SLURM_CONFIG, "", name)] = text
    for node in state.slurm_nodes:
        objects[ObjectRef(SLURM, SLURM_NODE, "", node.name)] = node_shape(node)
    for partition in state.partitions:
        objects[_partition_ref(partition)] = partition_shape(partition)
    return objects


def desired_kube_objects(state: DesiredState) -> dict[ObjectRef, dict[str, Any]]:
    return {kube_ref(obj): obj for obj in state.kube_objects}


def kube_ref(obj: Mapping[str, Any]) -> ObjectRef:
    meta = obj["metadata"]
    return ObjectRef(KUBERNETES, obj["kind"], meta.get("namespace", ""), meta["name"])


def node_shape(node: SlurmNode | LiveNode) -> dict[str, Any]:
    return {
        "name": node.name,
        "cpus": node.cpus,
        "realMemory": node.real_memory_mb,
        "gres": node.gres,
        "features": list(node.features),
    }


def partition_shape(partition: Partition) -> dict[str, Any]:
    return {"name": partition.name, **dict(partition.options)}


def _partition_ref(partition: Partition) -> ObjectRef:
    return ObjectRef(SLURM, SLURM_PARTITION, "", partition.name)


def needs_dry_run(state: DesiredState, live: LiveState) -> list[ObjectRef]:
    """Objects whose server view we must ask for: new ones, and those whose live fields
    differ from ours. The rest are unchanged without a request."""
    return [
        ref
        for ref, obj in desired_kube_objects(state).items()
        if ref not in live.kube_objects or not contains(live.kube_objects[ref], obj)
    ]


def plan_changes(
    state: DesiredState,
    live: LiveState | Mapping[ObjectRef, Any] | None = None,
    *,
    server_view: Mapping[ObjectRef, dict[str, Any]] | None = None,
    revision: str | None = None,
    offline: bool = False,
) -> Plan:
    """`server_view` holds the server-side-apply dry-run result of each object in
    `needs_dry_run`: the diff is then what the API server would really store."""
    if not isinstance(live, LiveState):
        live = _live_from_objects(live or {})
    kube, kube_unchanged = _kube_changes(state, live, server_view or {})
    secrets, secrets_unchanged = _secret_changes(state, live)
    kube, kube_unchanged = secrets + kube, kube_unchanged + secrets_unchanged
    slurm, slurm_unchanged, warnings = _slurm_changes(state, live)
    restart = live.slurm_conf is not None and live_nodes(state, live) != desired_nodes(state)
    plan = Plan(
        release=state.release,
        namespace=state.namespace,
        profile=state.profile,
        changes=tuple(kube + slurm),
        unchanged=kube_unchanged + slurm_unchanged,
        revision=revision,
        offline=offline,
        warnings=(*(str(w) for w in state.warnings), *warnings),
        fingerprint=None if offline else live.fingerprint(),
        controller_restart=restart,
    )
    if live.slurm_error is None:
        return plan
    return bootstrap_plan(plan, desired_kube_objects(state), live,
                          _why_silent(state, live, live.slurm_error))  # fmt: skip


def _why_silent(state: DesiredState, live: LiveState, error: str) -> str:
    """Slurm is silent because our control plane is down; otherwise that is an outage, and
    no plan can be made without Slurm's state."""
    down = control_plane_down(desired_kube_objects(state), live)
    if not down:
        raise SlurmSilentError(
            f"Slurm does not answer ({error}), and no control plane of release "
            f"{state.release} that we render is down to explain it; nothing was planned",
            hint="check slurmrestd and slurmctld (kubectl get pods; their logs), or the "
            "--slurm-url this command was given",
        )
    return f"{', '.join(down)} not running ({error})"


def _live_from_objects(objects: Mapping[ObjectRef, Any]) -> LiveState:
    """Live state given as the same shapes `desired_objects` returns (tests, offline)."""
    kube = {r: o for r, o in objects.items() if r.scope == KUBERNETES}
    nodes = {
        r.name: LiveNode(
            r.name,
            frozenset({"IDLE"}),
            None,
            o.get("cpus", 0),
            o.get("realMemory", 0),
            o.get("gres"),
            tuple(o.get("features") or ()),
        )
        for r, o in objects.items()
        if r.kind == SLURM_NODE
    }
    conf = objects.get(ObjectRef(SLURM, SLURM_CONFIG, "", "slurm.conf"))
    gres = objects.get(ObjectRef(SLURM, SLURM_CONFIG, "", "gres.conf"))
    topology = {
        name: objects[ref]
        for name in TOPOLOGY_FILES
        if (ref := ObjectRef(SLURM, SLURM_CONFIG, "", name)) in objects
    }
    secrets = frozenset(r.name for r in kube if r.kind == "Secret")
    kube = {r: o for r, o in kube.items() if r.kind != "Secret"}
    return LiveState(kube, nodes, conf, gres, secrets=secrets, topology_files=topology)


def _kube_changes(
    state: DesiredState, live: LiveState, server_view: Mapping[ObjectRef, dict[str, Any]]
) -> tuple[list[Change], int]:
    desired = desired_kube_objects(state)
    changes: list[Change] = []
    unchanged = 0
    for ref in sorted(desired, key=apply_order):
        want, have = desired[ref], live.kube_objects.get(ref)
        view = server_view.get(ref)
        if have is None:
            after = comparable(view) if view is not None else want
            changes.append(Change(ref, Action.CREATE, None, after, desired=want))
            continue
        if view is None:  # every field we set is already live
            unchanged += 1
            continue
        before, after = comparable(have), comparable(view)
        fields = tuple(field_changes(before, after))
        if fields:
            changes.append(Change(ref, Action.UPDATE, before, after, fields, desired=want))
        else:
            unchanged += 1
    # Deletions run last and in reverse order: StatefulSets shrink before their ConfigMaps go.
    gone = sorted(
        (r for r in live.kube_objects if r not in desired and r.kind not in NEVER_PRUNED),
        key=apply_order,
        reverse=True,
    )
    changes += [Change(r, Action.DELETE, comparable(live.kube_objects[r]), None) for r in gone]
    return changes, unchanged


def _secret_changes(state: DesiredState, live: LiveState) -> tuple[list[Change], int]:
    """Generated Secrets are created when missing, and otherwise never touched: shown without
    data, as created or unchanged."""
    changes = [
        Change(kube_ref(s.manifest()), Action.CREATE, None, s.manifest(), desired=s.manifest())
        for s in state.secrets
        if s.name not in live.secrets
    ]
    generated = len(state.secrets) - len(changes)
    values, values_unchanged = _value_secret_changes(state, live)
    return changes + values, generated + values_unchanged


def _value_secret_changes(state: DesiredState, live: LiveState) -> tuple[list[Change], int]:
    """Secrets whose data values give: created when missing, updated when their live data
    differs (by digest; offline, a recorded one counts as equal). Shown without data."""
    changes = []
    for secret in state.value_secrets:
        shown = secret.manifest()
        if secret.name not in live.secrets:
            action = Action.CREATE
        elif live.secret_digests.get(secret.name, secret.digest()) != secret.digest():
            action = Action.UPDATE
        else:
            continue
        changes.append(Change(kube_ref(shown), action, None, shown, desired=shown,
                              notes=(f"data from {secret.source}",),
                              payload=secret.with_data()))  # fmt: skip
    return changes, len(state.value_secrets) - len(changes)


def _slurm_changes(state: DesiredState, live: LiveState) -> tuple[list[Change], int, list[str]]:
    changes: list[Change] = []
    unchanged = 0
    for name, want, have in (
        ("slurm.conf", state.slurm_conf, live.slurm_conf),
        ("gres.conf", state.gres_conf, live.gres_conf),
    ):
        change = _compare(ObjectRef(SLURM, SLURM_CONFIG, "", name), have, want)
        if change is None:
            unchanged += 1
        else:
            changes.append(change)
    changes += topology_changes(state.topology_files, live.topology_files)
    node_changes, node_unchanged, warnings = _node_changes(state, live)
    part_changes, part_unchanged = _partition_changes(state, live)
    resv_changes, resv_unchanged, resv_warnings = reservation_changes(state, live)
    acct_changes, acct_unchanged, acct_warnings = accounting_changes(state, live)
    return (
        [*changes, *node_changes, *part_changes, *resv_changes, *acct_changes],
        unchanged + node_unchanged + part_unchanged + resv_unchanged + acct_unchanged,
        [*warnings, *resv_warnings, *acct_warnings],
    )


def _node_changes(state: DesiredState, live: LiveState) -> tuple[list[Change], int, list[str]]:
    """Running nodes to register, resume or update; ours that go away to drain and retire.
    Only nodes our slurm.conf declares are ever touched."""
    changes: list[Change] = []
    warnings: list[str] = []
    unchanged = 0
    wanted = {n.name: n for n in state.slurm_nodes}
    for name, node in wanted.items():
        ref = ObjectRef(SLURM, SLURM_NODE, "", name)
        have = live.slurm_nodes.get(name)
        if have is None:
            note = f"joins when its slurmd Pod {name} starts (declared in slurm.conf)"
            changes.append(
                Change(ref, Action.CREATE, None, node_shape(node), notes=(note,),
                       steps=(STEP_REGISTER,))
            )  # fmt: skip
            continue
        fields = tuple(field_changes(node_shape(have), node_shape(node)))
        steps, notes = _resume(have, warnings)
        if fields or steps:
            changes.append(
                Change(ref, Action.UPDATE, node_shape(have), node_shape(node), fields,
                       notes=notes, steps=steps)
            )  # fmt: skip
        else:
            unchanged += 1
    ours = live_nodes(state, live) | {n.name for n in state.spare_nodes}
    for name in sorted(set(live.slurm_nodes) - set(wanted)):
        if name in ours:
            have = live.slurm_nodes[name]
            note = (
                f"drain (reason {DRAIN_REASON_PREFIX} ...), wait for its jobs, then retire "
                f"(FUTURE) before its Pod goes; now {have.state_text()}"
            )
            changes.append(
                Change(ObjectRef(SLURM, SLURM_NODE, "", name), Action.DELETE, node_shape(have),
                       None, notes=(note,), steps=(STEP_DRAIN, STEP_RETIRE))
            )  # fmt: skip
    return changes, unchanged, warnings


def _resume(have: LiveNode, warnings: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if have.drained_by_us:
        return (STEP_RESUME,), (f"resume: drained by reconciler ({have.reason})",)
    if have.drained:
        warnings.append(
            f"Slurm node {have.name} is drained by someone else ({have.reason!r}); left alone"
        )
    return (), ()


def _partition_changes(state: DesiredState, live: LiveState) -> tuple[list[Change], int]:
    desired = {_partition_ref(p): partition_shape(p) for p in state.partitions}
    current = {_partition_ref(p): partition_shape(p) for p in partitions_in(live.slurm_conf or "")}
    changes: list[Change] = []
    unchanged = 0
    for ref in sorted(desired, key=apply_order):
        change = _compare(ref, current.get(ref), desired[ref])
        if change is None:
            unchanged += 1
        else:
            changes.append(change)
    gone = sorted(r for r in current if r not in desired)
    changes += [Change(r, Action.DELETE, current[r], None) for r in gone]
    return changes, unchanged


def apply_order(ref: ObjectRef) -> tuple[int, str, str]:
    rank = (
        KIND_ORDER.get(ref.kind, 9) if ref.scope == KUBERNETES else _SLURM_ORDER.get(ref.kind, 19)
    )
    return (rank, ref.namespace, ref.name)


def _compare(ref: ObjectRef, before: Any, after: Any) -> Change | None:
    if before is None:
        return Change(ref, Action.CREATE, None, after)
    fields = tuple(field_changes(before, after))
    if not fields:
        return None
    return Change(ref, Action.UPDATE, before, after, fields)
