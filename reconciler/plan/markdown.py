"""A plan as a pull-request comment (GitHub / GitLab markdown), pure.

In the order a reviewer needs it: the verdict with counts per kind; a warning when the plan
is stale; in red, every action that touches running work with the Slurm jobs it touches;
policy findings and warnings; the full diff folded in `<details>`; where it was planned from.
The diff is text.diff_lines, the one rendering of a change every output shares: it never
reads what must not be shown. Long comments are split into numbered parts (comment_parts).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.plan.comment_parts import GITHUB_COMMENT_LIMIT, Block, split_comment
from reconciler.plan.disruption import Disruption, verdict
from reconciler.plan.live import LiveJob
from reconciler.plan.model import (
    KUBERNETES,
    SLURM_ACCOUNT,
    SLURM_CONFIG,
    SLURM_NODE,
    SLURM_PARTITION,
    SLURM_QOS,
    SLURM_RESERVATION,
    SLURM_USER,
    Action,
    Change,
    Plan,
)
from reconciler.plan.text import diff_lines

# The hidden marker CI finds its comment by (one per environment): `<!-- reconciler-plan:ENV`.
MARKER = "reconciler-plan"
_VERDICT = {
    "no-changes": "🟢 No changes",
    "changes": "🟡 Changes",
    "disruptive": "🔴 Disruptive: touches running work",
}
# Counts per kind, in the verdict line.
_KINDS = (
    ("Kubernetes objects", lambda c: c.ref.scope == KUBERNETES),
    ("Slurm config files", lambda c: c.ref.kind == SLURM_CONFIG),
    ("Slurm nodes", lambda c: c.ref.kind == SLURM_NODE),
    ("partitions", lambda c: c.ref.kind == SLURM_PARTITION),
    ("reservations", lambda c: c.ref.kind == SLURM_RESERVATION),
    ("QOS/accounts/users", lambda c: c.ref.kind in (SLURM_QOS, SLURM_ACCOUNT, SLURM_USER)),
)
_WORDS = ((Action.CREATE, "to add"), (Action.UPDATE, "to change"), (Action.DELETE, "to destroy"))
_SIGN = {Action.CREATE: "+", Action.UPDATE: "~", Action.DELETE: "-"}
_JOB_HEADER = ("> | job | user | partition | state | nodes |", "> |---:|---|---|---|---|")


@dataclass(frozen=True)
class CommentContext:
    """What the plan itself does not know: which environment, which revisions."""

    environment: str = ""  # default: the release
    revision: str | None = None  # the pull request's head the plan was made from
    base: str | None = None  # the branch it merges into, at the revision CI saw
    cluster_revision: str | None = None  # what the cluster holds (the daemon's status)
    limit: int = GITHUB_COMMENT_LIMIT
    jobs_read: bool = True  # False: Slurm's jobs were not read (offline, Slurm silent)


def render_markdown(
    plan: Plan, found: Sequence[Disruption], context: CommentContext = CommentContext()
) -> list[str]:
    """The comment, in parts of at most `context.limit` characters (one when it fits)."""
    env = context.environment or plan.release
    label = verdict(plan, found)

    def header(part: int, parts: int) -> str:
        numbered = f" (part {part} of {parts})" if parts > 1 else ""
        return (f"<!-- {MARKER}:{_attr(env)} verdict={label} part={part}/{parts} -->\n"
                f"### Plan for {_inline(env)}{numbered}\n\n")  # fmt: skip

    blocks = [
        _verdict_block(plan, label),
        *_stale_blocks(context),
        *_disruption_blocks(found, context.jobs_read),
        *_upgrade_blocks(plan),
        *_finding_blocks(plan),
        *_diff_blocks(plan),
        _source_block(plan, context),
    ]
    return split_comment(blocks, header, context.limit)


def _verdict_block(plan: Plan, label: str) -> Block:
    counts = [f"{kind}: {text}" for kind, pick in _KINDS
              if (text := _counts([c for c in plan.changes if pick(c)]))]  # fmt: skip
    line = f"**{_VERDICT[label]}**"
    line += " · " + " · ".join(counts) if counts else ". The cluster matches the config repo."
    lines = [line, ""]
    if plan.offline:
        lines += ["Offline plan: compared with an empty cluster, so every object is created.", ""]
    if plan.bootstrap:
        lines += ["Bootstrap plan: Slurm does not answer, so only what brings the control "
                  "plane up is planned; the rest is planned once Slurm answers.", ""]  # fmt: skip
    return Block(tuple(lines))


def _counts(changes: list[Change]) -> str:
    numbers = [(sum(1 for c in changes if c.action is a), words) for a, words in _WORDS]
    return ", ".join(f"{n} {words}" for n, words in numbers if n)


def _stale_blocks(context: CommentContext) -> list[Block]:
    held, base = context.cluster_revision, context.base
    if not (held and base) or _same(held, base):
        return []
    return [Block((
        "> [!WARNING]",
        f"> **Stale plan**: the cluster holds revision `{_attr(held)}`, not this pull "
        f"request's base `{_attr(base)}`. The diff also holds what the base changed (or what "
        "was changed by hand) since; plan again once the base is applied.",
        "",
    ))]  # fmt: skip


def _same(one: str, other: str) -> bool:
    """Revisions equal, either possibly abbreviated."""
    return one.startswith(other) or other.startswith(one)


def _disruption_blocks(found: Sequence[Disruption], jobs_read: bool) -> list[Block]:
    if not found:
        return []
    jobs = {j.job_id for d in found for j in d.jobs}
    count = _plural(len(jobs), "job", "jobs") if jobs_read else "jobs not read"
    blocks = [Block((
        "> [!CAUTION]",
        f"> **{_plural(len(found), 'action touches', 'actions touch')} running work** "
        f"({count})",
        ">",
    ))]  # fmt: skip
    for item in found:
        blocks += _disruption_item(item, jobs_read)
    blocks.append(Block(("",)))
    return blocks


def _disruption_item(item: Disruption, jobs_read: bool) -> list[Block]:
    if not jobs_read:
        return [Block((f"> - {_inline(item.action)}: jobs not read (offline plan)", ">"))]
    if not item.jobs:
        return [Block((f"> - {_inline(item.action)}: no job now", ">"))]
    scope = "every running job" if item.cluster_wide else "jobs"
    title = f"> - **{_inline(item.action)}**: {scope}: {len(item.jobs)}"
    rows = tuple(_job_row(job) for job in item.jobs)
    return [Block((title, ">")), Block(rows, head=_JOB_HEADER, tail=(">",))]


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _job_row(job: LiveJob) -> str:
    cells = (str(job.job_id), job.user, job.partition, job.state, job.node_list or "-")
    return "> | " + " | ".join(_cell(c) for c in cells) + " |"


def _upgrade_blocks(plan: Plan) -> list[Block]:
    """A Slurm upgrade: its stages, in the order apply and the daemon carry them out."""
    if not plan.upgrade:
        return []
    head = ("#### Slurm upgrade, in stages", "",
            "Applied one stage at a time, each after the check of the one before passes "
            "(StateSaveLocation and the database are backed up first).", "",
            "| stage | component | from | to | objects | before the next |",
            "|---|---|---|---|---|---|")  # fmt: skip
    rows = tuple(
        "| " + " | ".join(_cell(c) for c in (
            f"{s.number}/{s.of}", s.component, ", ".join(s.before), ", ".join(s.after),
            ", ".join(s.objects), s.check)) + " |"
        for s in plan.upgrade
    )  # fmt: skip
    return [Block(rows, head=head, tail=("",))]


def _finding_blocks(plan: Plan) -> list[Block]:
    if not (plan.denials or plan.warnings):
        return []
    lines = ["#### Policy findings and warnings", ""]
    lines += [f"- ⛔ **Deny** (apply refuses this plan): {_inline(d)}" for d in plan.denials]
    lines += [f"- ⚠️ {_inline(w.removeprefix('warning: '))}" for w in plan.warnings]
    return [Block((*lines, ""))]


def _diff_blocks(plan: Plan) -> list[Block]:
    if not plan.changes:
        return []
    lines: list[str] = []
    for change in plan.changes:
        lines.append(f"# {_SIGN[change.action]} {change.ref} ({change.action.value})")
        lines += [f"#   note: {note}" for note in change.notes]
        lines += diff_lines(change)
    fence = "`" * max(3, _longest_backtick_run(lines) + 1)
    summary = f"<summary>Full diff: {len(plan.changes)} changes</summary>"
    head = ("<details>", summary, "", f"{fence}diff")
    return [Block(tuple(lines), head=head, tail=(fence, "", "</details>", ""))]


def _longest_backtick_run(lines: Sequence[str]) -> int:
    return max((len(run) for line in lines for run in re.findall("`+", line)), default=0)


def _source_block(plan: Plan, context: CommentContext) -> Block:
    where = [f"release `{_attr(plan.release)}` in namespace `{_attr(plan.namespace)}`"]
    if context.revision:
        where.append(f"revision `{_attr(context.revision)}`")
    if context.base:
        where.append(f"base `{_attr(context.base)}`")
    if context.cluster_revision:
        where.append(f"the cluster holds `{_attr(context.cluster_revision)}`")
    summary = f"`{plan.summary().line()}`"
    return Block((f"<sub>Planned for {', '.join(where)}. {summary}</sub>",))


_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]|~#!])")


def _inline(text: str) -> str:
    """Text as itself in markdown: no HTML, no emphasis, no links, on one line."""
    flat = " ".join(text.split())
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", html.escape(flat, quote=False))


def _cell(text: str) -> str:
    return _inline(text) or " "


def _attr(text: str) -> str:
    """A name inside a code span or an HTML comment: only characters that cannot end one."""
    return re.sub(r"[^A-Za-z0-9._:/@+-]", "_", text)
