"""The Kubernetes side of a plan: objects applied server-side, generated Secrets created once,
pruned objects deleted."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from reconciler.adapters.kube import Kube
from reconciler.apply.controller import roll_deployment
from reconciler.apply.secrets import generate
from reconciler.apply.target import ApplyError, Say, Target
from reconciler.compile.desired import DesiredState
from reconciler.compile.secrets import secret_from_manifest
from reconciler.plan.model import Change, Plan
from reconciler.wellknown import ANNOTATION_FROM_VALUES, LABEL_MANAGED_BY, MANAGED_BY_VALUE

OWNED = f"{LABEL_MANAGED_BY}={MANAGED_BY_VALUE}"
APPS_KINDS = frozenset({"StatefulSet", "Deployment"})


def apply_kube(changes: list[Change], target: Target, say: Say) -> None:
    for change in changes:
        if _from_values(change):
            _apply_value_secret(change, target, say)
            continue
        if change.ref.kind == "Secret":
            _create_secret(change, target, say)
            continue
        target.kube.apply(change.desired, force=True)
        say(f"{change.action.value}d {change.ref}")


def with_value_secret_data(plan: Plan, state: DesiredState) -> Plan:
    """A saved plan holds no Secret data: its Secrets from values take their data from the
    repo's values at apply time."""
    data = {s.name: s.with_data() for s in state.value_secrets}
    changes = tuple(
        replace(c, payload=data.get(c.ref.name)) if _from_values(c) else c for c in plan.changes
    )
    return replace(plan, changes=changes)


def _from_values(change: Change) -> bool:
    annotations = ((change.desired or {}).get("metadata") or {}).get("annotations") or {}
    return change.ref.kind == "Secret" and ANNOTATION_FROM_VALUES in annotations


def _apply_value_secret(change: Change, target: Target, say: Say) -> None:
    if change.payload is None:
        raise ApplyError(
            f"{change.ref} takes its data from values that the repo no longer has",
            hint="run plan again and review it",
        )
    target.kube.apply(change.payload, force=True)
    say(f"{change.action.value}d {change.ref} (data from values)")


def _create_secret(change: Change, target: Target, say: Say) -> None:
    """Made once with fresh random data; one that appeared meanwhile is kept as it is. One
    made while workloads that mount it run was lost: they hold the old data (see
    GeneratedSecret.rolls_on_loss)."""
    spec = secret_from_manifest(change.desired)
    made = target.kube.create(generate(spec))
    if not made:
        say(f"kept {change.ref} (it exists)")
        return
    say(f"created {change.ref} (generated)")
    users = _mounting(target.kube, change.ref.namespace, spec.name)
    if not users:
        return  # a new cluster: nothing ran with an older one
    names = ", ".join(f"{kind} {name}" for kind, name in users)
    if spec.rolls_on_loss:
        for kind, name in users:
            if kind == "Deployment":
                roll_deployment(target.kube, change.ref.namespace, name, datetime.now(UTC))
    say(f"warning: {change.ref} was missing and is new; {names} mount it: {spec.loss_hint()}")


def _mounting(kube: Kube, namespace: str, secret: str) -> list[tuple[str, str]]:
    """(kind, name) of our Deployments and StatefulSets whose Pods mount Secret `secret`."""
    found = []
    for kind in ("Deployment", "StatefulSet"):
        for obj in kube.list("apps/v1", kind, namespace, label_selector=OWNED).items:
            volumes = obj["spec"]["template"]["spec"].get("volumes") or []
            if any((v.get("secret") or {}).get("secretName") == secret for v in volumes):
                found.append((kind, obj["metadata"]["name"]))
    return found


def delete_kube(changes: list[Change], target: Target, say: Say) -> None:
    for change in changes:
        api_version = "apps/v1" if change.ref.kind in APPS_KINDS else "v1"
        target.kube.delete(api_version, change.ref.kind, change.ref.name, change.ref.namespace)
        say(f"deleted {change.ref}")
