"""A plan as text: a unified diff per object, grouped Kubernetes / Slurm, and a summary line."""

from __future__ import annotations

import difflib
from typing import Any

from reconciler.compile.yamlout import dump
from reconciler.plan.model import KUBERNETES, SLURM, Action, Change, Plan

_SIGN = {Action.CREATE: "+", Action.UPDATE: "~", Action.DELETE: "-"}
_COLOR = {"+": "\033[32m", "-": "\033[31m", "~": "\033[33m", "@": "\033[36m", "bold": "\033[1m"}
_RESET = "\033[0m"
_GROUPS = ((KUBERNETES, "Kubernetes"), (SLURM, "Slurm"))
UPGRADE_TITLE = ("Slurm upgrade, in the order Slurm requires (apply backs up, then applies each "
                 "stage and waits for its check before the next):")  # fmt: skip


def render_text(plan: Plan, *, color: bool = False) -> str:
    paint = _painter(color)
    lines: list[str] = []
    if plan.offline:
        lines.append("Offline plan: compared with an empty cluster, so every object is created.")
    for scope, title in _GROUPS:
        changes = [c for c in plan.changes if c.ref.scope == scope]
        if changes:
            lines += ["", paint("bold", f"{title}:")]
            for change in changes:
                lines += _change_lines(change, paint)
    if plan.upgrade:
        lines += ["", paint("bold", UPGRADE_TITLE), *(s.line() for s in plan.upgrade)]
    if not plan.has_changes:
        lines += ["", "No changes. The cluster matches the config repo."]
    if plan.warnings:
        lines += ["", *(paint("~", w if "warning:" in w else f"warning: {w}")
                        for w in plan.warnings)]  # fmt: skip
    if plan.denials:
        lines += ["", paint("-", "Denied by policy; apply refuses this plan:"),
                  *(paint("-", f"  - {d}") for d in plan.denials)]  # fmt: skip
    if plan.controller_restart:
        lines += ["", "note: NodeName lines change; Slurm reads them only when slurmctld "
                  "starts, so apply restarts it (jobs survive a restart)."]  # fmt: skip
    lines += ["", paint("bold", plan.summary().line())]
    return "\n".join(lines).lstrip("\n") + "\n"


def _change_lines(change: Change, paint: Any) -> list[str]:
    sign = _SIGN[change.action]
    lines = ["", paint(sign, f"  {sign} {change.ref} ({change.action.value})")]
    lines += [f"      note: {note}" for note in change.notes]
    for line in diff_lines(change):
        lines.append("      " + paint(line[:1] if line[:1] in "+-@" else "", line))
    return lines


def diff_lines(change: Change) -> list[str]:
    """The unified diff (live -> desired) of one change: the one rendering of a change's
    content that every output shows (text, markdown). It reads `before` and `after` only,
    never the payload, so what must not be shown (Secret data) never is."""
    before = _text(change.before).splitlines(keepends=False)
    after = _text(change.after).splitlines(keepends=False)
    old = "/dev/null" if change.before is None else f"live {change.ref}"
    new = "/dev/null" if change.after is None else f"desired {change.ref}"
    return list(difflib.unified_diff(before, after, old, new, n=3, lineterm=""))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return dump(value)


def _painter(color: bool) -> Any:
    def paint(kind: str, text: str) -> str:
        if not color or kind not in _COLOR:
            return text
        return f"{_COLOR[kind]}{text}{_RESET}"

    return paint
