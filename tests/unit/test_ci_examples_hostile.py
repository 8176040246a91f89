"""The CI examples of deploy/ci/ treat a pull request's files and other people's comments as
hostile. Each test runs the jobs' own steps as written (tests/unit/ci_jobs.py) against a forge
on loopback (tests/unit/ci_forge.py), GitHub's and GitLab's, with an attacker's input:

- a committed `comment/comment-1.md` that links to the job's kubeconfig, and a plan that fails:
  the kubeconfig must not be posted;
- a comment by someone else that starts with the plan's hidden marker: it must be left alone,
  and the bot's own comment updated;
- committed `verdict/` files: they must not change the label;
- a committed "No changes" comment, and a plan that fails: only "the plan failed" is posted,
  and the request gets no label."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.ci_forge import Forge, forge_on_loopback
from tests.unit.ci_jobs import PLAN_TEXT, SECRET_MARK, GitHubRun, GitLabPipeline

NO_CHANGES = "<!-- reconciler-plan:production verdict=no-changes part=1/1 -->\nNo changes.\n"
FAILED = "<!-- reconciler-plan:production verdict=error part=1/1 -->"
# The job's kubeconfig, from comment/ in the checkout. GitHub: the Plan step's, in
# /home/runner/work/_temp beside /home/runner/work/<repo>/<repo>; GitLab: the File variable
# KUBECONFIG, in $CI_PROJECT_DIR.tmp.
KUBECONFIG_FROM_CHECKOUT = {
    "github": "../../../_temp/kubeconfig",
    "gitlab": "../../config.tmp/KUBECONFIG",
}


@pytest.fixture(params=["github", "gitlab"])
def forge(request: pytest.FixtureRequest) -> Iterator[Forge]:
    with forge_on_loopback(request.param) as forge:
        yield forge


def _jobs(
    tmp_path: Path, forge: Forge, plans: dict[str, str], files: dict[str, str] | None = None,
    links: dict[str, str] | None = None,
) -> GitHubRun | GitLabPipeline:  # fmt: skip
    """The request's jobs, its tree holding `files` and symbolic links (name -> target)."""
    tree = tmp_path / "pull-request"
    (tree / ".git").mkdir(parents=True)  # a checkout
    (tree / "cluster.yaml").write_text("release: slurm\n")
    for name, text in (files or {}).items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    for name, target in (links or {}).items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).symlink_to(target)
    kind = GitHubRun if forge.kind == "github" else GitLabPipeline
    return kind(tmp_path, tree, forge.url, plans)


def _bodies(forge: Forge) -> list[str]:
    return [c["body"] for c in forge.comments.values()]


def test_a_committed_link_to_the_kubeconfig_is_not_posted(tmp_path: Path, forge: Forge) -> None:
    link = {"comment/comment-1.md": KUBECONFIG_FROM_CHECKOUT[forge.kind]}
    _jobs(tmp_path, forge, {"production": "error"}, links=link).plan("production")
    assert SECRET_MARK not in forge.everything_sent()
    [body] = _bodies(forge)
    assert body.startswith(FAILED) and "The plan failed" in body


def test_a_strangers_comment_with_the_marker_is_left_alone(tmp_path: Path, forge: Forge) -> None:
    theirs = forge.add_comment(NO_CHANGES, by_bot=False)
    ours = forge.add_comment(NO_CHANGES.replace("No changes", "An older plan"), by_bot=True)
    done = _jobs(tmp_path, forge, {"production": "disruptive"}).plan("production")
    assert done.ok, done.log
    assert forge.comments[theirs]["body"] == NO_CHANGES  # not edited, not deleted
    assert f"{PLAN_TEXT} of production: disruptive" in forge.comments[ours]["body"]
    assert len(forge.comments) == 2


def test_committed_verdicts_do_not_change_the_label(tmp_path: Path, forge: Forge) -> None:
    committed = {"verdict/production": "no-changes\n", "verdict/staging": "no-changes\n",
                 "reconciler-plan/verdict/production": "no-changes\n"}  # fmt: skip
    jobs = _jobs(tmp_path, forge, {"production": "disruptive", "staging": "changes"}, committed)
    jobs.plan("production")
    jobs.plan("staging")  # finishes last: its artifact is downloaded last
    done = jobs.label()
    assert done.ok, done.log
    assert forge.labels == {"disruptive"}


def test_a_failed_plan_posts_only_that_it_failed(tmp_path: Path, forge: Forge) -> None:
    committed = {"comment/comment-1.md": NO_CHANGES}
    jobs = _jobs(tmp_path, forge, {"production": "error", "staging": "no-changes"}, committed)
    jobs.plan("production")
    jobs.plan("staging")
    jobs.label()
    [production] = [b for b in _bodies(forge) if "reconciler-plan:production" in b]
    assert production.startswith(FAILED) and "The plan failed" in production
    assert "No changes." not in production
    assert forge.labels == set()  # a plan failed: no verdict for the request
