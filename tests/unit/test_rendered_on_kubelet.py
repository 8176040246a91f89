"""What the fixture cluster showed when its rendered Pods ran as containers on real kubelets
(tests/integration/test_in_cluster.py): each test reads `reconciler
render`'s YAML and fails on the manifest as it was before its fix."""

from __future__ import annotations

from pathlib import PurePosixPath

from tests.unit.test_rendered_pods import containers, mounts, render_fixture, volumes, workloads


def test_slurmrestd_passes_client_tokens_on_with_auth_jwt() -> None:
    """Without SLURM_JWT=daemon slurmrestd answered every request with 401 ("Rejecting
    thread config token for user root"): auth/munge takes no token."""
    rest = containers(workloads(render_fixture())["slurm-rest"])["slurmrestd"]
    assert {"name": "SLURM_JWT", "value": "daemon"} in rest.get("env", [])


def test_slurmctld_writes_its_pid_file_into_a_run_directory_of_its_own() -> None:
    """slurmctld, as SlurmUser, logged "Unable to open pidfile `/run/slurmctld.pid':
    Permission denied": /run is root's."""
    objects = render_fixture()
    conf = next(o for o in objects if o["metadata"]["name"] == "slurm-slurm-conf")
    pid_file = next(line.split("=", 1)[1] for line in conf["data"]["slurm.conf"].splitlines()
                    if line.startswith("SlurmctldPidFile="))  # fmt: skip
    controller = workloads(objects)["slurm-controller"]
    run_dir = mounts(containers(controller)["slurmctld"])[str(PurePosixPath(pid_file).parent)]
    assert "emptyDir" in volumes(controller)[run_dir["name"]]


def test_no_probe_of_slurmd_is_a_bare_tcp_connect() -> None:
    """slurmd logs every connection that sends nothing as an error ("service_connection:
    slurm_receive_msg: Zero Bytes were transmitted or received"): with a tcpSocket readiness
    probe, a kubelet put one in each slurmd's log every 10 s."""
    for name in ("slurm-cpu", "slurm-gpu-small"):
        slurmd = containers(workloads(render_fixture())[name])["slurmd"]
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert slurmd[kind]["exec"]["command"] == ["scontrol", "show", "slurmd"], kind
