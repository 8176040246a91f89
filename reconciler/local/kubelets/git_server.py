"""The config repo's git server of `local up --kubelet --in-cluster`: a bare repository in the
runtime directory, served read-only by Debian's `git daemon` inside the stack's network
namespace, on every address there (the Pods reach it at the control plane's address), and
on nothing outside it.

The host clones and pushes through the repository's directory (a `file://` URL): only who can
write the runtime directory can change what the cluster converges; Pods can only fetch.
`git daemon` runs under the stack's supervisor, so `local down` stops it by its PID.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from reconciler.errors import LocalStackError
from reconciler.local.kubelets.netns import ClusterNetwork, wrapper
from reconciler.local.kubelets.nodes import CONTROL_PLANE_ADDRESS
from reconciler.local.processes import Supervisor

GIT_PORT = 9418
REPOSITORY = "config.git"
BRANCH = "main"
NAME = "git-daemon"
READY_SECONDS = 15.0
# Who the first commit is by (the repo's files as `local up` applied them).
AUTHOR = ["-c", "user.name=reconciler local up", "-c", "user.email=local-up@localhost"]


class GitServer:
    def __init__(self, base: Path, supervisor: Supervisor, network: ClusterNetwork) -> None:
        self.base = base
        self.supervisor = supervisor
        self.network = network

    @property
    def bare(self) -> Path:
        return self.base / REPOSITORY

    @property
    def host_url(self) -> str:
        """What the host clones and pushes to."""
        return f"file://{self.bare}"

    @property
    def pod_url(self) -> str:
        """What the Pods fetch from (deploy/local names it)."""
        return f"git://{CONTROL_PLANE_ADDRESS}:{GIT_PORT}/{REPOSITORY}"

    def publish(self, worktree: Path) -> str:
        """`worktree`'s files as the first commit of branch main of a new bare repository;
        the commit's id."""
        # A stack brought up again in the same runtime directory is a new cluster: new history.
        shutil.rmtree(self.bare, ignore_errors=True)
        shutil.rmtree(worktree / ".git", ignore_errors=True)
        self.base.mkdir(mode=0o700, parents=True, exist_ok=True)
        _git("init", "-q", "--bare", "-b", BRANCH, str(self.bare))
        _git("init", "-q", "-b", BRANCH, cwd=worktree)
        _git("add", "-A", cwd=worktree)
        _git(*AUTHOR, "commit", "-q", "-m", "The config repo, as `reconciler local up` found it",
             cwd=worktree)  # fmt: skip
        _git("push", "-q", str(self.bare), f"{BRANCH}:{BRANCH}", cwd=worktree)
        return _git("rev-parse", "HEAD", cwd=worktree).strip()

    def start(self) -> None:
        self.supervisor.wrappers[NAME] = wrapper(self.network)
        self.supervisor.start(NAME, [
            "git", "daemon", "--reuseaddr", "--export-all", f"--base-path={self.base}",
            f"--port={GIT_PORT}", "--informative-errors", str(self.base),
        ])  # fmt: skip
        self.supervisor.wait_ready(NAME, self._answers, timeout=READY_SECONDS)

    def _answers(self) -> bool:
        done = subprocess.run(
            [*wrapper(self.network), "git", "ls-remote", self.pod_url, BRANCH],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        return done.returncode == 0 and done.stdout.strip() != ""


def _git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise LocalStackError(f"`git {' '.join(args[:3])}` failed: {done.stderr.strip()[-400:]}")
    return done.stdout
