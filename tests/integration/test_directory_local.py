"""directoryService on the local stack, with the real programs: `local up --directory` runs
Debian's slapd seeded with alice and bob; the repo's values point at it (as the stack prints);
the Pods' sssd sidecar runs the real sssd, and the login Pod's sshd, sudo and Slurm's daemons
resolve users through it, in their own view of /etc (the host's nsswitch.conf stays as it is).
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.adapters.kube import Kube
from reconciler.local.directory import SECRET_NAME
from tests.integration.local_up import RepoStack, local_up, reconciler_cli

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = ROOT / "fixtures" / "config-repo"
COMPUTE_PODS = ["slurm-cpu-0", "slurm-gpu-small-0", "slurm-gpu-small-1"]


@dataclass
class Env:
    stack: RepoStack
    said: str  # what plan and apply printed

    @property
    def keys(self) -> Path:
        return self.stack.runtime / "directory" / "keys"

    def ssh(
        self, user: str, command: str, *, key: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        port = self.stack.slurm.ports.ssh
        argv = ["ssh", "-i", str(self.keys / (key or user)), "-p", str(port),
                "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                "-o", f"UserKnownHostsFile={self.stack.work}/known_hosts",
                f"{user}@127.0.0.1", command]  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def _pods_with_sssd_ready(kube: Kube, names: list[str], timeout: float = 120) -> None:
    """A terminating Pod does not count (it reads Ready while it goes)."""
    deadline = time.monotonic() + timeout
    waiting = list(names)
    while waiting and time.monotonic() < deadline:
        pod = kube.get("v1", "Pod", waiting[0], "slurm") or {}
        containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
        status = pod.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        meta = pod.get("metadata") or {}
        new = not meta.get("deletionTimestamp")
        if new and "sssd" in containers and conditions.get("Ready") == "True":
            waiting.pop(0)
            continue
        time.sleep(0.5)
    if waiting:
        pytest.fail(f"{', '.join(waiting)} not Ready with the sssd sidecar after {timeout} s")


def _login_rolled_out(kube: Kube, timeout: float = 120) -> None:
    """Wait until slurm-login-0 is a Pod of the StatefulSet's update revision, Ready with sssd."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sts = kube.get("apps/v1", "StatefulSet", "slurm-login", "slurm") or {}
        status = sts.get("status") or {}
        # Until the controller has seen the new template, updateRevision is the old one.
        seen = status.get("observedGeneration", 0) >= sts["metadata"]["generation"]
        revision = status.get("updateRevision") if seen else None
        pod = kube.get("v1", "Pod", "slurm-login-0", "slurm") or {}
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if revision and labels.get("controller-revision-hash") == revision:
            _pods_with_sssd_ready(kube, ["slurm-login-0"], max(deadline - time.monotonic(), 1))
            return
        time.sleep(0.5)
    pytest.fail(f"slurm-login-0 not replaced by the StatefulSet's new revision after {timeout} s")


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    if shutil.which("slapd") is None and not Path("/usr/sbin/slapd").exists():
        pytest.fail("slapd is not installed: run tools/setup.sh")
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-dir-work-"))
    repo = work / "repo"
    shutil.copytree(FIXTURE_REPO, repo)
    try:
        with local_up(repo, work / "up.log", prefix="sunk-reconciler-dir-", timings=stack_timings,
                      label="directory tests", extra_args=["--directory"]) as running:  # fmt: skip
            stack = RepoStack(repo, work, running)
            # As `local up --directory` tells a user: its values into the repo, then apply.
            shutil.copy(running.runtime / "directory" / "directory-values.yaml",
                        repo / "values.d" / "50-directory.yaml")  # fmt: skip
            plan = stack.plan_text()
            applied = stack.apply()
            kube = Kube.from_kubeconfig(running.stack.kube_paths.kubeconfig)
            # Compute StatefulSets are OnDelete (never restarted under jobs): new Pods, as a
            # node roll makes them, so slurmd too resolves users through sssd.
            for node in COMPUTE_PODS:
                kube.delete("v1", "Pod", node, "slurm")
            _pods_with_sssd_ready(kube, ["slurm-login-0", *COMPUTE_PODS])
            yield Env(stack, plan.stdout + plan.stderr + applied.stdout + applied.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_alice_logs_in_with_her_ldap_key_and_has_her_ldap_groups(env: Env) -> None:
    done = env.ssh("alice", "id")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "uid=10001(alice) gid=10001(researchers) groups=10001(researchers),10010(slurm-admins)"
    )


def test_a_sudo_group_member_may_sudo_and_another_user_may_not(env: Env) -> None:
    listed = env.ssh("alice", "sudo -l")
    assert listed.returncode == 0, listed.stderr
    assert "(ALL : ALL) NOPASSWD: ALL" in listed.stdout
    assert env.ssh("alice", "sudo -n id -u").stdout.strip() == "0"
    refused = env.ssh("bob", "sudo -n true")
    assert refused.returncode != 0 and "password is required" in refused.stderr


def test_a_user_not_in_ldap_and_a_wrong_key_are_refused(env: Env) -> None:
    stranger = env.ssh("mallory", "true", key="alice")
    assert stranger.returncode == 255 and "Permission denied" in stranger.stderr
    wrong_key = env.ssh("alice", "true", key="bob")
    assert wrong_key.returncode == 255 and "Permission denied" in wrong_key.stderr


def test_sbatch_as_alice_runs_as_alice(env: Env) -> None:
    out = Path(tempfile.mkdtemp(prefix="sunk-dir-job-"))
    out.chmod(0o1777)
    try:
        bin_dir = env.stack.slurm.install.bin_dir
        done = env.ssh("alice", f"PATH={bin_dir}:$PATH sbatch --wait -o {out}/job.out "
                                "--wrap 'id -u; id -gn'")  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert (out / "job.out").read_text().split() == ["10001", "researchers"]
        job = done.stdout.split()[-1]
        # scontrol names the user as its own host resolves the uid: on the login node, alice.
        shown = env.ssh("alice", f"PATH={bin_dir}:$PATH scontrol show job {job}").stdout
        assert "UserId=alice(10001) GroupId=researchers(10001)" in shown, shown
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_the_host_resolves_no_ldap_user(env: Env) -> None:
    """The Pods' view has `sss`; the host's /etc/nsswitch.conf and sssd are untouched."""
    assert subprocess.run(["getent", "passwd", "alice"], capture_output=True,
                          check=False).returncode == 2  # fmt: skip
    assert "sss" not in Path("/etc/nsswitch.conf").read_text()


def test_no_secret_in_render_plan_apply_or_logs(env: Env) -> None:
    """The LDAP bind password and the munge key never appear in what users and logs see."""
    runtime = env.stack.runtime
    password = (runtime / "directory" / "bind-password").read_text().strip()
    kube = Kube.from_kubeconfig(env.stack.running.stack.kube_paths.kubeconfig)
    munge = (kube.get("v1", "Secret", "slurm-munge-key", "slurm") or {})["data"]["munge.key"]
    snippet = (kube.get("v1", "Secret", SECRET_NAME, "slurm") or {})["data"]
    assert password in base64.b64decode(next(iter(snippet.values()))).decode()  # it is used
    rendered = reconciler_cli("render", str(env.stack.repo))
    assert rendered.returncode == 0, rendered.stderr
    seen = [
        ("render", rendered.stdout + rendered.stderr),
        ("plan and apply", env.said),
        ("local up", env.stack.running.log.read_text(errors="replace")),
    ]
    seen += [(str(p), p.read_text(errors="replace")) for p in (runtime / "logs").glob("*.log")]
    raw_munge = base64.b64decode(munge)
    for where, text in seen:
        assert password not in text, f"the LDAP bind password is in {where}"
        assert munge not in text and munge[:40] not in text, f"the munge key is in {where}"
    for log in (runtime / "logs").glob("*.log"):
        assert raw_munge[:32] not in log.read_bytes(), f"the munge key is in {log}"


def test_rendered_files_pass_sssds_and_sudos_own_validators(env: Env, tmp_path: Path) -> None:
    """sssctl config-check and visudo -c on the ConfigMap the stack applied."""
    kube = Kube.from_kubeconfig(env.stack.running.stack.kube_paths.kubeconfig)
    data = (kube.get("v1", "ConfigMap", "slurm-directory", "slurm") or {})["data"]
    conf = tmp_path / "sssd" / "sssd.conf"
    (conf.parent / "conf.d").mkdir(parents=True)
    conf.write_text(data["sssd.conf"])
    conf.chmod(0o600)
    # With the password snippet, as the sidecar copies it into conf.d.
    secret = (kube.get("v1", "Secret", SECRET_NAME, "slurm") or {})["data"]
    for key, value in secret.items():
        (conf.parent / "conf.d" / key).write_bytes(base64.b64decode(value))
        (conf.parent / "conf.d" / key).chmod(0o600)
    checked = subprocess.run(["sssctl", "config-check", "-c", str(conf)], capture_output=True,
                             text=True, check=False)  # fmt: skip
    assert checked.returncode == 0 and "Used configuration snippet files: 1" in checked.stdout, (
        checked.stdout + checked.stderr
    )
    sudoers = tmp_path / "sudoers"
    sudoers.write_text(data["sudoers"])
    visudo = subprocess.run(["visudo", "-c", "-f", str(sudoers)], capture_output=True, text=True,
                            check=False)  # fmt: skip
    assert visudo.returncode == 0, visudo.stdout + visudo.stderr


def test_a_password_in_values_reaches_sssd_through_a_secret_and_is_never_shown(env: Env) -> None:
    """user.password instead of existingSecret: apply makes the Secret, sssd binds with it,
    and neither plan nor apply prints it; applied again, nothing changes."""
    runtime = env.stack.runtime
    password = (runtime / "directory" / "bind-password").read_text().strip()
    values = env.stack.repo / "values.d" / "50-directory.yaml"
    values.write_text(values.read_text().replace(
        f"existingSecret: {SECRET_NAME}", f"password: {password}"))  # fmt: skip
    plan = env.stack.plan_text()
    assert "slurm-directory-default-authtok" in plan.stdout, env.stack.cli_output(plan)
    applied = env.stack.apply()
    for text in (plan.stdout + plan.stderr, applied.stdout + applied.stderr):
        assert password not in text
    kube = Kube.from_kubeconfig(env.stack.running.stack.kube_paths.kubeconfig)
    secret = kube.get("v1", "Secret", "slurm-directory-default-authtok", "slurm") or {}
    snippet = base64.b64decode(secret["data"]["authtok.conf"]).decode()
    assert snippet == f"[domain/default]\nldap_default_authtok = {password}\n"
    # sssd reads it at start. The login StatefulSet's template now names the new Secret, so
    # its controller replaces slurm-login-0 (RollingUpdate; CI once read the Pod while it was
    # gone). The old Secret goes first, so the new Pod can only start from the new one.
    said = applied.stdout + applied.stderr
    assert "updated StatefulSet slurm/slurm-login" in said, env.stack.cli_output(applied)
    kube.delete("v1", "Secret", SECRET_NAME, "slurm")
    _login_rolled_out(kube)
    done = env.ssh("alice", "id -un")
    assert done.returncode == 0 and done.stdout.strip() == "alice", done.stderr
    again = env.stack.plan_json()
    assert not [c for c in again["changes"] if c["kind"] == "Secret"], again["changes"]
