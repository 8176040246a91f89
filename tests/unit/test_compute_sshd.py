"""Seed 001, Features: "SSH to compute nodes as well as login node". With `compute.ssh.enabled`
the slurmd container starts sshd from the image, as the login Pod does, and slurmd stays its
program (issue 37, item 1)."""

from __future__ import annotations

from tests.unit.test_rendered_pods import (
    DIRECTORY,
    Obj,
    containers,
    mounts,
    render,
    volumes,
    workloads,
)

SSH = "compute: {ssh: {enabled: true}}\n"
POWER = "slurmConfig: {slurmd: {suspendTime: 600}}\n"


def compute_and_login(values: str = "", layered: str = "") -> tuple[Obj, Obj, Obj, Obj]:
    """(slurmd StatefulSet, its slurmd container, login StatefulSet, its sshd container)."""
    found = workloads(render(values, layered))
    compute, login = found["slurm-cpu"], found["slurm-login"]
    return compute, containers(compute)["slurmd"], login, containers(login)["sshd"]


def test_ssh_enabled_starts_sshd_beside_slurmd_as_the_login_starts_it() -> None:
    compute, slurmd, _, login_sshd = compute_and_login(layered=SSH)
    assert slurmd["args"][:2] == ["sh", "-c"]
    start = slurmd["args"][2]
    # The login's own steps: /run/sshd made 0755 and the Pod's own host keys, then sshd.
    prepare = login_sshd["args"][2].removesuffix("exec /usr/sbin/sshd -D -e")
    assert start.startswith(prepare.removesuffix(" && "))
    assert "/usr/sbin/sshd -D -e &" in start
    # slurmd is still the container's program, named after the Pod.
    assert start.endswith("exec slurmd -D -N $(POD_NAME)")
    assert {"name": "sshd", "containerPort": 22, "protocol": "TCP"} in slurmd["ports"]
    assert "emptyDir" in volumes(compute)[mounts(slurmd)["/run/sshd"]["name"]]


def test_without_ssh_slurmd_runs_alone() -> None:
    compute, slurmd, _, _ = compute_and_login()
    assert slurmd["args"] == ["slurmd", "-D", "-N", "$(POD_NAME)"]
    assert [p["containerPort"] for p in slurmd["ports"]] == [6818]
    assert "/run/sshd" not in mounts(slurmd)
    assert "sshd-run" not in volumes(compute)


def test_power_saving_keeps_slurmd_boot_flag_with_sshd() -> None:
    _, slurmd, _, _ = compute_and_login(POWER, SSH)
    assert slurmd["args"][2].endswith("exec slurmd -D -b -N $(POD_NAME)")


def test_directory_keys_open_compute_nodes_as_they_open_the_login() -> None:
    """Seed 001 signs directory users in by the key in their account (sshPublicKey)."""
    _, slurmd, _, login_sshd = compute_and_login(DIRECTORY, SSH)
    snippet = "/etc/ssh/sshd_config.d/sunk-directory.conf"
    assert mounts(slurmd)[snippet] == mounts(login_sshd)[snippet]
    _, alone, _, _ = compute_and_login(DIRECTORY)
    assert snippet not in mounts(alone)


def test_the_login_authorized_keys_secret_opens_compute_nodes_too() -> None:
    keys = "login: {authorizedKeysSecret: admin-keys}\n"
    compute, slurmd, login, login_sshd = compute_and_login(keys, SSH)
    path = "/root/.ssh/authorized_keys"
    assert mounts(slurmd)[path] == mounts(login_sshd)[path]
    volume = mounts(slurmd)[path]["name"]
    assert volumes(compute)[volume] == volumes(login)[volume]
    assert volumes(compute)[volume]["secret"]["secretName"] == "admin-keys"
