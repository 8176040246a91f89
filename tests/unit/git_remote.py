"""Real git repositories on disk for the source tests: a bare remote and a clone to push from."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git(cwd: Path, *args: str, home: Path | None = None) -> str:
    """Run git; `home` is the GNUPGHOME its signing and verifying use."""
    env = {**os.environ, "GNUPGHOME": str(home)} if home else None
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def new_remote(tmp_path: Path) -> tuple[Path, Path]:
    """A bare repo, and a clone on branch main whose pushes go to it."""
    bare, work = tmp_path / "remote.git", tmp_path / "author"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(tmp_path, "clone", "-q", str(bare), str(work))
    git(work, "config", "user.email", "ops@example.com")
    git(work, "config", "user.name", "Ops")
    git(work, "checkout", "-q", "-b", "main")
    return bare, work
