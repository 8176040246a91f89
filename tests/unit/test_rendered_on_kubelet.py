"""What the fixture cluster showed when its rendered Pods ran as containers on real kubelets
(issue 32, item 3; tests/integration/test_kubelet_e2e.py): each test reads `reconciler
render`'s YAML and fails on the manifest as it was before its fix."""

from __future__ import annotations

from tests.unit.test_rendered_pods import containers, render_fixture, workloads


def test_slurmrestd_passes_client_tokens_on_with_auth_jwt() -> None:
    """Without SLURM_JWT=daemon slurmrestd answered every request with 401 ("Rejecting
    thread config token for user root"): auth/munge takes no token."""
    rest = containers(workloads(render_fixture())["slurm-rest"])["slurmrestd"]
    assert {"name": "SLURM_JWT", "value": "daemon"} in rest.get("env", [])
