"""A plan as JSON for CI bots. The schema is versioned (`formatVersion`) and documented in
docs/plan-apply.md (Plan output); fields are only ever added within a version.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from reconciler.errors import ReconcilerError
from reconciler.plan.model import Action, Change, FieldChange, ObjectRef, Plan
from reconciler.plan.upgrade import UpgradeStage

FORMAT_VERSION = 1


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    return {
        "formatVersion": FORMAT_VERSION,
        "release": plan.release,
        "namespace": plan.namespace,
        "profile": plan.profile,
        "revision": plan.revision,
        "offline": plan.offline,
        "fingerprint": plan.fingerprint,
        "controllerRestart": plan.controller_restart,
        "bootstrap": plan.bootstrap,
        "summary": asdict(plan.summary()),
        "changes": [_change(c) for c in plan.changes],
        "warnings": list(plan.warnings),
        "denials": list(plan.denials),
        "upgrade": [_stage(s) for s in plan.upgrade],
    }


def _stage(stage: UpgradeStage) -> dict[str, Any]:
    return {
        "stage": stage.number,
        "of": stage.of,
        "component": stage.component,
        "from": list(stage.before),
        "to": list(stage.after),
        "objects": list(stage.objects),
        "check": stage.check,
    }


def _stage_from(data: dict[str, Any]) -> UpgradeStage:
    return UpgradeStage(
        data["stage"], data["of"], data["component"], tuple(data["from"]), tuple(data["to"]),
        tuple(data["objects"]), data["check"],
    )  # fmt: skip


def _change(change: Change) -> dict[str, Any]:
    return {
        "scope": change.ref.scope,
        "kind": change.ref.kind,
        "namespace": change.ref.namespace or None,
        "name": change.ref.name,
        "action": change.action.value,
        "before": change.before,
        "after": change.after,
        "fields": [asdict(f) for f in change.fields],
        "notes": list(change.notes),
        "desired": change.desired,
        "steps": list(change.steps),
    }


def render_json(plan: Plan) -> str:
    return json.dumps(plan_to_dict(plan), indent=2, sort_keys=False) + "\n"


def render_gitlab_report(plan: Plan) -> str:
    """The counts GitLab's merge request widget shows from an `artifacts:reports:terraform`
    file, as `gitlab-terraform plan-json` writes them; the JSON plan stays the full record."""
    summary = plan.summary()
    report = {"create": summary.add, "update": summary.change, "delete": summary.destroy}
    return json.dumps(report) + "\n"


def plan_from_dict(data: dict[str, Any]) -> Plan:
    """A saved plan (`plan --out`), for `apply --plan-file`."""
    if data.get("formatVersion") != FORMAT_VERSION:
        raise ReconcilerError(
            f"plan file has formatVersion {data.get('formatVersion')!r}; this build reads "
            f"{FORMAT_VERSION}",
            hint="make the plan again with this version of reconciler",
        )
    return Plan(
        release=data["release"],
        namespace=data["namespace"],
        profile=data["profile"],
        changes=tuple(_change_from(c) for c in data["changes"]),
        revision=data.get("revision"),
        offline=bool(data.get("offline")),
        warnings=tuple(data.get("warnings") or ()),
        denials=tuple(data.get("denials") or ()),
        fingerprint=data.get("fingerprint"),
        controller_restart=bool(data.get("controllerRestart")),
        bootstrap=bool(data.get("bootstrap")),
        upgrade=tuple(_stage_from(s) for s in data.get("upgrade") or ()),
    )


def _change_from(data: dict[str, Any]) -> Change:
    return Change(
        ref=ObjectRef(data["scope"], data["kind"], data.get("namespace") or "", data["name"]),
        action=Action(data["action"]),
        before=data.get("before"),
        after=data.get("after"),
        fields=tuple(FieldChange(**f) for f in data.get("fields") or ()),
        notes=tuple(data.get("notes") or ()),
        desired=data.get("desired"),
        steps=tuple(data.get("steps") or ()),
    )
