"""The in-cluster stack's git server: the repo's files are the first commit of branch main of
a bare repository the host clones and pushes to by its file:// URL."""

from __future__ import annotations

import subprocess
from pathlib import Path

from reconciler.local.kubelets.git_server import GitServer
from reconciler.local.kubelets.netns import ClusterNetwork
from reconciler.local.processes import Supervisor


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def test_the_repos_files_are_the_first_commit_of_main_and_a_push_lands(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "values.d").mkdir(parents=True)
    (repo / "values.yaml").write_text("compute: {}\n")
    (repo / "values.d" / "zz-local-machine.yaml").write_text("slurmConfig: {}\n")
    server = GitServer(tmp_path / "git", Supervisor(tmp_path / "pids", tmp_path / "logs"),
                       ClusterNetwork("sr-test", "10.213.0.1", 24))  # fmt: skip
    commit = server.publish(repo)

    clone = tmp_path / "clone"
    _git("clone", "-q", server.host_url, str(clone))
    assert _git("rev-parse", "HEAD", cwd=clone).strip() == commit
    assert _git("rev-list", "--count", "HEAD", cwd=clone).strip() == "1"
    assert _git("branch", "--show-current", cwd=clone).strip() == "main"
    assert sorted(_git("ls-files", cwd=clone).split()) == [
        "values.d/zz-local-machine.yaml", "values.yaml"]  # fmt: skip
    assert server.pod_url == "git://10.213.0.1:9418/config.git"

    (clone / "values.yaml").write_text("compute: {nodes: {}}\n")
    identity = ["-c", "user.name=t", "-c", "user.email=t@localhost"]
    _git(*identity, "commit", "-qam", "replicas", cwd=clone)
    _git("push", "-q", "origin", "main", cwd=clone)
    assert _git("--git-dir", str(server.bare), "rev-list", "--count", "main").strip() == "2"
