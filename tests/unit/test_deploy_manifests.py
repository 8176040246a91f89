"""deploy/ agrees with the code it runs: every setting in its config files is a real
`reconciler run` option with a valid value, and the Deployment runs the image the
Containerfile builds, as the user that image declares. (No container engine runs here, so the
image itself is not built in tests; tests/integration/test_deploy.py checks the rest against
the API server.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli import _subcommand, build_parser
from reconciler.settings import layered_defaults

ROOT = Path(__file__).resolve().parents[2]


def _docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _deployment() -> dict[str, Any]:
    [deployment] = _docs(ROOT / "deploy/base/deployment.yaml")
    return deployment


@pytest.mark.parametrize(
    "settings", ["deploy/base/settings.yaml", "deploy/flux/settings-flux.yaml"]
)
def test_each_config_file_is_made_of_real_run_settings(settings: str, tmp_path: Path) -> None:
    [config_map] = _docs(ROOT / settings)
    config = tmp_path / "config.yaml"
    config.write_text(config_map["data"]["config.yaml"])
    args = list(_deployment()["spec"]["template"]["spec"]["containers"][0]["args"])
    args[args.index("--config") + 1] = str(config)
    parser = build_parser()
    run = _subcommand(parser, "run")
    run.set_defaults(**layered_defaults(run, args, environ={}))
    parsed = parser.parse_args(args)
    assert parsed.leader_elect and parsed.log_format == "json"
    assert parsed.hooks_url.startswith("http://reconciler.slurm.svc:")
    assert bool(parsed.git_url) != bool(parsed.flux_git_repository)


def test_the_deployment_runs_the_containerfile_image_as_its_user() -> None:
    containerfile = (ROOT / "Containerfile").read_text()
    uid = re.search(r"^USER (\d+):(\d+)$", containerfile, re.M)
    assert uid and '["reconciler"]' in containerfile
    pod = _deployment()["spec"]["template"]["spec"]
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (
        int(uid[1]), int(uid[2]),
    )  # fmt: skip
    # git clones and gpg homes need a writable HOME on a read-only root filesystem.
    assert "ENV HOME=/tmp" in containerfile
    mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert {"/tmp", "/var/lib/reconciler"} <= mounts
    for package in ("slurm-client", "git", "gnupg"):
        assert re.search(rf"\b{package}\b", containerfile), package
