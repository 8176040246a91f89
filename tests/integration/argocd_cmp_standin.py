"""Stands in for Argo CD's argocd-cmp-server in the sidecar container of
deploy/argocd/repo-server-patch.yaml (Argo CD does not build here). It does what cmp-server
does for one app, and nothing more: Argo CD's repo-server fetches the repo and streams it to
the sidecar, which unpacks it under $TMPDIR/_cmp_server/<id>/; cmp-server checks the plugin's
`discover` rule there, then runs its `generate` command in the app's path with the app's
ARGOCD_* variables, and what the command prints is the app's manifests.

Here the fetch is a `git clone` of ARGOCD_APP_SOURCE_REPO_URL in the same place; the plugin is
read from where the patch mounts it. Run by the in-cluster test as the container's command;
its stdout is the render.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

PLUGIN = Path("/home/argocd/cmp-server/config/plugin.yaml")


def main() -> int:
    spec = yaml.safe_load(PLUGIN.read_text())["spec"]
    work = Path(tempfile.mkdtemp(prefix="", dir=Path(tempfile.gettempdir()) / "_cmp_server"))
    repo = os.environ["ARGOCD_APP_SOURCE_REPO_URL"]
    subprocess.run(["git", "clone", "-q", repo, str(work)], check=True)
    app = work / os.environ.get("ARGOCD_APP_SOURCE_PATH", ".")
    found = spec["discover"]["fileName"]
    if not (app / found).is_file():
        print(f"discover: {found} not in the app's path", file=sys.stderr)
        return 2
    revision = subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, check=True,
                              capture_output=True, text=True).stdout.strip()  # fmt: skip
    env = {**os.environ, "ARGOCD_APP_REVISION": revision,
           "ARGOCD_APP_REVISION_SHORT": revision[:7]}  # fmt: skip
    # cmp-server returns the command's stdout as the manifests and keeps its stderr for its
    # log; a Pod's log is both streams in one, so stderr is shown only for a failure.
    done = subprocess.run(spec["generate"]["command"], cwd=app, env=env, check=False,
                          stderr=subprocess.PIPE, text=True)  # fmt: skip
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    Path(tempfile.gettempdir(), "_cmp_server").mkdir(exist_ok=True)
    sys.exit(main())
