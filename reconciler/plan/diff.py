"""Desired x live -> Plan (pure). Live state arrives as the same plain shapes desired state has,
so one differ serves the offline plan (live is empty) and the live one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.compile.desired import KIND_ORDER, DesiredState
from reconciler.plan.model import (
    KUBERNETES,
    SLURM,
    SLURM_CONFIG,
    SLURM_NODE,
    SLURM_PARTITION,
    Action,
    Change,
    FieldChange,
    ObjectRef,
    Plan,
)

# Apply order across scopes: Kubernetes config objects, then Slurm config, nodes, partitions.
_SLURM_ORDER = {SLURM_CONFIG: 10, SLURM_NODE: 11, SLURM_PARTITION: 12}


def desired_objects(state: DesiredState) -> dict[ObjectRef, Any]:
    """Every object of the desired state, keyed by what identifies it in its system."""
    objects: dict[ObjectRef, Any] = {}
    for obj in state.kube_objects:
        meta = obj["metadata"]
        objects[ObjectRef(KUBERNETES, obj["kind"], meta.get("namespace", ""), meta["name"])] = obj
    objects[ObjectRef(SLURM, SLURM_CONFIG, "", "slurm.conf")] = state.slurm_conf
    objects[ObjectRef(SLURM, SLURM_CONFIG, "", "gres.conf")] = state.gres_conf
    for node in state.slurm_nodes:
        objects[ObjectRef(SLURM, SLURM_NODE, "", node.name)] = {
            "name": node.name,
            "cpus": node.cpus,
            "realMemory": node.real_memory_mb,
            "gres": node.gres,
            "features": list(node.features),
        }
    for partition in state.partitions:
        objects[ObjectRef(SLURM, SLURM_PARTITION, "", partition.name)] = {
            "name": partition.name,
            **dict(partition.options),
        }
    return objects


def plan_changes(
    state: DesiredState,
    live: Mapping[ObjectRef, Any],
    *,
    revision: str | None = None,
    offline: bool = False,
) -> Plan:
    desired = desired_objects(state)
    changes: list[Change] = []
    unchanged = 0
    for ref in sorted(desired, key=apply_order):
        change = _compare(ref, live.get(ref), desired[ref])
        if change is None:
            unchanged += 1
        else:
            changes.append(change)
    # Deletions run last and in reverse order: StatefulSets shrink before their ConfigMaps go.
    gone = sorted((r for r in live if r not in desired), key=apply_order, reverse=True)
    changes += [Change(ref, Action.DELETE, live[ref], None) for ref in gone]
    return Plan(
        release=state.release,
        namespace=state.namespace,
        profile=state.profile,
        changes=tuple(changes),
        unchanged=unchanged,
        revision=revision,
        offline=offline,
        warnings=tuple(str(w) for w in state.warnings),
    )


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


def field_changes(before: Any, after: Any, path: str = "") -> list[FieldChange]:
    """Leaf-level differences; lists compare whole unless both are lists of named items."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[FieldChange] = []
        for key in [*before, *(k for k in after if k not in before)]:
            sub = (
                f"{path}{key}"
                if str(key).startswith("[")
                else (f"{path}.{key}" if path else str(key))
            )
            out += field_changes(before.get(key), after.get(key), sub)
        return out
    if isinstance(before, list) and isinstance(after, list) and _named(before) and _named(after):
        return field_changes(_by_name(before), _by_name(after), path)
    if before != after:
        return [FieldChange(path, before, after)]
    return []


def _named(items: list[Any]) -> bool:
    names = [i.get("name") for i in items if isinstance(i, dict)]
    return len(names) == len(items) and None not in names and len(set(names)) == len(names)


def _by_name(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {f"[name={item['name']}]": item for item in items}
