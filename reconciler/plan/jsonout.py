"""A plan as JSON for CI bots. The schema is versioned (`formatVersion`) and documented in the
README; fields are only ever added within a version.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from reconciler.plan.model import Change, Plan

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
        "summary": asdict(plan.summary()),
        "changes": [_change(c) for c in plan.changes],
        "warnings": list(plan.warnings),
    }


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
