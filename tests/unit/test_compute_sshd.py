"""SUNK's "Slurm Workload Manager" page, "Features": "SSH to compute nodes as well as login node".
With `compute.ssh.enabled` the slurmd container starts sshd from the image, as the login Pod does,
and slurmd stays its program. It admits only whom Slurm would: users with a job
on the node (pam_slurm_adopt), or those the values name, never root."""

from __future__ import annotations

import shlex

import pytest
import yaml

from reconciler.compile.desired import compile_desired_state
from reconciler.errors import ConfigTypeError
from tests.unit.conftest import config_from
from tests.unit.test_rendered_pods import (
    DIRECTORY,
    NODES,
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
    assert "/usr/sbin/sshd -D -e -o PermitRootLogin=no " in start
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
    """SUNK's "Slurm Workload Manager" page signs directory users in by the key in their account
    (sshPublicKey)."""
    _, slurmd, _, login_sshd = compute_and_login(DIRECTORY, SSH)
    snippet = "/etc/ssh/sshd_config.d/sunk-directory.conf"
    assert mounts(slurmd)[snippet] == mounts(login_sshd)[snippet]
    _, alone, _, _ = compute_and_login(DIRECTORY)
    assert snippet not in mounts(alone)


def test_root_keys_of_the_login_do_not_open_compute_nodes() -> None:
    """Root logs in to the login node; on a compute node it would be past Slurm."""
    keys = "login: {authorizedKeysSecret: admin-keys}\n"
    compute, slurmd, _, login_sshd = compute_and_login(keys, SSH)
    assert "/root/.ssh/authorized_keys" in mounts(login_sshd)
    assert "/root/.ssh/authorized_keys" not in mounts(slurmd)
    assert "authorized-keys" not in volumes(compute)
    assert not admits(slurmd, "root", set())


# ---- who sshd on a compute node admits -----------------------------------------------------


def sshd_options(slurmd: Obj) -> dict[str, str]:
    """The `-o Key=Value` options of the sshd the slurmd container starts."""
    words = shlex.split(slurmd["args"][2].partition("/usr/sbin/sshd -D -e")[2].partition("&")[0])
    pairs = [w.partition("=") for flag, w in zip(words[::2], words[1::2], strict=True)
             if flag == "-o"]  # fmt: skip
    return {key.lower(): value for key, _, value in pairs}


def admits(slurmd: Obj, user: str, groups: set[str], *, has_job: bool = False) -> bool:
    """sshd's own checks (sshd_config(5): DenyUsers, AllowUsers, DenyGroups, AllowGroups,
    PermitRootLogin), then the PAM account stack the start leaves: pam_slurm_adopt admits a
    user with a job on the node (and ignores root)."""
    options = sshd_options(slurmd)
    if user == "root" and options.get("permitrootlogin", "prohibit-password") == "no":
        return False
    if "denyusers" in options and ("*" in options["denyusers"].split()
                                   or user in options["denyusers"].split()):  # fmt: skip
        return False
    if "allowusers" in options and user not in options["allowusers"].split():
        return False
    if "allowgroups" in options and not groups & set(options["allowgroups"].split()):
        return False
    adopt = PAM_STEP in slurmd["args"][2]
    if adopt:
        assert options.get("usepam") == "yes"  # otherwise sshd never asks PAM
    return not adopt or has_job or user == "root"


PAM_STEP = "sed -i '1i account required pam_slurm_adopt.so' /etc/pam.d/sshd"
ADOPT = "compute: {ssh: {pamSlurmAdopt: true}}\n"


def test_a_directory_user_without_a_job_cannot_log_in_to_a_compute_node() -> None:
    """Any user of the directory has a key sshd takes (AuthorizedKeysCommand); with only
    compute.ssh.enabled, sshd admitted them all on every node, outside Slurm."""
    state = compile_desired_state(config_from(DIRECTORY + NODES, {"values.d/10.yaml": SSH}))
    slurmd = containers(workloads(list(state.kube_objects))["slurm-cpu"])["slurmd"]
    assert not admits(slurmd, "alice", {"users"})
    assert not admits(slurmd, "root", set())
    [warning] = [w for w in state.warnings if w.where == "compute.ssh.enabled"]
    assert "admits nobody" in warning.message and "compute.ssh.pamSlurmAdopt" in warning.message


def test_pam_slurm_adopt_admits_a_user_with_a_job_on_the_node_only() -> None:
    state = compile_desired_state(
        config_from(DIRECTORY + NODES, {"values.d/10.yaml": SSH, "values.d/20.yaml": ADOPT})
    )
    slurmd = containers(workloads(list(state.kube_objects))["slurm-cpu"])["slurmd"]
    start = slurmd["args"][2]
    # First in sshd's PAM file before sshd starts, and its failure ends the start.
    assert start.index(PAM_STEP) < start.index("/usr/sbin/sshd -D -e")
    assert start.index(PAM_STEP) < start.index("|| exit 1")
    assert not admits(slurmd, "alice", {"users"})
    assert admits(slurmd, "alice", {"users"}, has_job=True)
    assert not admits(slurmd, "root", set())
    # The job's extern step, which the session joins.
    assert "PrologFlags=Contain" in state.slurm_conf.splitlines()
    assert not [w for w in state.warnings if "compute.ssh" in f"{w.where} {w.message}"]


def test_allow_lists_admit_the_users_and_groups_they_name() -> None:
    layered = (
        "compute: {ssh: {enabled: true, allowGroups: [hpc-admins, ops@corp], "
        "allowUsers: [alice]}}\n"
    )
    _, slurmd, _, _ = compute_and_login(DIRECTORY, layered)
    assert sshd_options(slurmd)["allowgroups"] == "hpc-admins ops@corp"
    # sshd admits only a user every list names.
    assert admits(slurmd, "alice", {"hpc-admins"})
    assert not admits(slurmd, "alice", {"users"})
    assert not admits(slurmd, "bob", {"hpc-admins"})
    assert "PrologFlags" not in render_conf(DIRECTORY, layered)


def render_conf(values: str, layered: str) -> str:
    files = {"values.d/10.yaml": layered}
    return compile_desired_state(config_from(values + NODES, files)).slurm_conf


@pytest.mark.parametrize("name", ["alice bob", "*", "!alice", "alice\nAllowUsers *",
                                  "alice@10.0.0.1", "-alice", "a'b", "x" * 257])  # fmt: skip
def test_a_user_name_sshd_would_read_as_more_is_refused_where_written(name: str) -> None:
    layered = yaml.safe_dump({"compute": {"ssh": {"enabled": True, "allowUsers": ["ok", name]}}})
    with pytest.raises(ConfigTypeError, match=r"compute\.ssh\.allowUsers\[1\]") as raised:
        config_from(NODES, {"values.d/10.yaml": layered})
    assert "values.d/10.yaml" in str(raised.value)


def test_access_keys_without_ssh_are_reported() -> None:
    layered = "compute: {ssh: {allowUsers: [alice]}}\n"
    state = compile_desired_state(config_from(NODES, {"values.d/10.yaml": layered}))
    assert [w.message for w in state.warnings if "compute.ssh" in w.message] == [
        "compute.ssh.allowUsers is not used: compute.ssh.enabled is not true"
    ]


def test_prolog_flags_without_contain_are_reported_with_pam_slurm_adopt() -> None:
    extra = "slurmConfig: {extraConfig: 'PrologFlags=X11'}\n"
    state = compile_desired_state(
        config_from(extra + NODES, {"values.d/10.yaml": SSH, "values.d/20.yaml": ADOPT})
    )
    assert "PrologFlags=X11" in state.slurm_conf.splitlines()
    assert any("leaves out Contain" in w.message for w in state.warnings), state.warnings
