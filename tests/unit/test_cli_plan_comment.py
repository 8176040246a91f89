"""`reconciler plan` for CI: the PR comment (-o markdown, --comment-dir), the GitLab report,
and both exit-code conventions, run as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.test_cli import FIXTURE, run


def test_markdown_comment_on_stdout() -> None:
    done = run("plan", str(FIXTURE), "--offline", "-o", "markdown", "--environment", "prod",
               "--revision", "abc1234")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("<!-- reconciler-plan:prod verdict=changes part=1/1 -->\n")
    assert "### Plan for prod" in done.stdout and "revision `abc1234`" in done.stdout


def test_comment_parts_written_beside_the_gitlab_report(tmp_path: Path) -> None:
    done = run("plan", str(FIXTURE), "--offline", "--comment-dir", str(tmp_path),
               "--comment-limit", "6000", "-o", "gitlab-report")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"create": 28, "update": 0, "delete": 0}
    parts = sorted(tmp_path.glob("comment-*.md"))
    assert len(parts) > 1
    assert all(len(p.read_text()) <= 6000 for p in parts)
    assert f"part=1/{len(parts)}" in parts[0].read_text()


def test_exit_codes_terraform_and_argocd_conventions(tmp_path: Path) -> None:
    assert run("plan", str(FIXTURE), "--offline", "--detailed-exitcode").returncode == 2
    assert run("plan", str(FIXTURE), "--offline", "--diff-exitcode").returncode == 1
    (tmp_path / "values.yaml").write_text("compute: [\n")
    broken = run("plan", str(tmp_path), "--offline", "--diff-exitcode")
    assert broken.returncode == 2 and "invalid YAML" in broken.stderr
    assert run("plan", str(tmp_path), "--offline", "--detailed-exitcode").returncode == 1
    both = run("plan", str(FIXTURE), "--offline", "--diff-exitcode", "--detailed-exitcode")
    assert both.returncode == 2 and "not allowed with" in both.stderr
