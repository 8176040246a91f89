"""deploy/local (the overlay `local up --kubelet --in-cluster` applies) is made of real
`reconciler run` settings and points the daemon at slurmrestd's Service and the stack's git."""

from __future__ import annotations

from pathlib import Path

import yaml

from reconciler.local.kubelets.git_server import GitServer
from tests.unit import test_deploy_manifests as manifests

SETTINGS = "deploy/local/settings-local.yaml"


def test_the_local_settings_are_real_run_settings(tmp_path: Path) -> None:
    manifests.test_each_config_file_is_made_of_real_run_settings(SETTINGS, tmp_path)


def test_the_local_settings_name_the_rest_service_and_the_stacks_git(tmp_path: Path) -> None:
    text = (manifests.ROOT / SETTINGS).read_text()
    [config_map] = [doc for doc in yaml.safe_load_all(text) if doc]
    settings = yaml.safe_load(config_map["data"]["config.yaml"])
    assert settings["slurm-url"] == "http://slurm-rest.slurm.svc:6820"
    server = GitServer(tmp_path, None, None)  # type: ignore[arg-type]
    assert settings["git-url"] == server.pod_url and settings["git-branch"] == "main"
