"""How `reconciler plan` shows a plan: text, JSON, a PR comment (markdown, in parts) or a
GitLab terraform report; and its exit code (terraform's or flux/argocd's convention)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from reconciler.apply.live_reader import read_jobs
from reconciler.apply.target import Target
from reconciler.daemon.status import read_status
from reconciler.errors import SlurmUnavailableError
from reconciler.plan.comment_parts import GITHUB_COMMENT_LIMIT
from reconciler.plan.disruption import disruptions
from reconciler.plan.jsonout import render_gitlab_report, render_json
from reconciler.plan.live import LiveJob
from reconciler.plan.markdown import CommentContext, render_markdown
from reconciler.plan.model import Plan
from reconciler.plan.text import render_text

OUTPUTS = ("text", "json", "markdown", "gitlab-report")
COMMENT_FILE = "comment-{}.md"


def output_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text")
    parser.add_argument("--color", action="store_true", help="color even when not on a TTY")
    codes = parser.add_mutually_exclusive_group()
    codes.add_argument(
        "--detailed-exitcode", action="store_true",
        help="exit 2 when there are changes, 0 when none (as terraform)",
    )  # fmt: skip
    codes.add_argument(
        "--diff-exitcode", action="store_true",
        help="exit 1 when there are changes, 0 when none, 2 on error (as argocd app diff)",
    )  # fmt: skip
    comment = parser.add_argument_group("pull-request comment (-o markdown, --comment-dir)")
    comment.add_argument("--comment-dir", type=Path, metavar="DIR",
                         help="also write the comment's parts as DIR/comment-N.md")  # fmt: skip
    comment.add_argument("--environment", default="", help="its title (default: the release)")
    comment.add_argument("--revision", help="the revision planned (the PR's head)")
    comment.add_argument("--base", help="the PR's base revision (a stale plan is flagged)")
    comment.add_argument("--comment-limit", type=int, default=GITHUB_COMMENT_LIMIT,
                         metavar="CHARS", help="split above this (default: GitHub's)")  # fmt: skip


def wants_comment(args: argparse.Namespace) -> bool:
    """apply shows plans too, without the comment's flags."""
    return getattr(args, "output", "text") == "markdown" or bool(getattr(args, "comment_dir", None))


def show(plan: Plan, args: argparse.Namespace, target: Target | None = None) -> None:
    output = getattr(args, "output", "text")
    if wants_comment(args):
        parts = comment(plan, args, target)
        if args.comment_dir is not None:
            write_parts(parts, args.comment_dir)
        if output == "markdown":
            sys.stdout.write("\n".join(parts))
            return
    if output == "json":
        sys.stdout.write(render_json(plan))
    elif output == "gitlab-report":
        sys.stdout.write(render_gitlab_report(plan))
    elif output == "text":
        color = getattr(args, "color", False) or (
            sys.stdout.isatty() and "NO_COLOR" not in os.environ
        )
        sys.stdout.write(render_text(plan, color=color))


def comment(plan: Plan, args: argparse.Namespace, target: Target | None) -> list[str]:
    jobs = _jobs(plan, target)
    held = None
    if target is not None and args.base:
        status = read_status(target.kube, plan.namespace, plan.release)
        held = status.applied_revision or None if status else None
    context = CommentContext(
        environment=args.environment,
        revision=args.revision,
        base=args.base,
        cluster_revision=held,
        limit=args.comment_limit,
        jobs_read=jobs is not None,
    )
    return render_markdown(plan, disruptions(plan, jobs), context)


def _jobs(plan: Plan, target: Target | None) -> tuple[LiveJob, ...] | None:
    """Slurm's jobs, read at plan time; None when they cannot be (offline, Slurm silent)."""
    if target is None or plan.offline or plan.bootstrap:
        return None
    try:
        return read_jobs(target.slurm)
    except SlurmUnavailableError:
        return None


def write_parts(parts: list[str], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob(COMMENT_FILE.format("*")):
        old.unlink()
    for number, text in enumerate(parts, 1):
        (directory / COMMENT_FILE.format(number)).write_text(text)
    print(f"comment in {len(parts)} part(s) in {directory}", file=sys.stderr)


def exit_code(plan: Plan, args: argparse.Namespace) -> int:
    """terraform: 0 success (--detailed-exitcode: 2 with changes), 1 error or Deny.
    flux/argocd (--diff-exitcode): 0 no changes, 1 changes, 2 error or Deny."""
    if args.diff_exitcode:
        return 2 if plan.denials else int(plan.has_changes)
    if plan.denials:
        return 1
    return 2 if args.detailed_exitcode and plan.has_changes else 0
