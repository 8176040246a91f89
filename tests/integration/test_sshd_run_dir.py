"""The login Pod's sshd start, run on this host's real sshd (Debian's OpenSSH) in a mount
namespace whose /run/sshd is an emptyDir as kubelet makes one (0777): sshd refuses that
directory, and the rendered start makes it acceptable before it execs sshd.

sshd runs in test mode (`-t`: it reads its config and checks its directories, then exits), so
nothing listens; everything before it is the rendered container's command as written."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from reconciler.compile.desired import compile_desired_state
from reconciler.compile.sshd import SSHD_PRIVSEP_DIR
from tests.unit.conftest import config_from

SSHD = "/usr/sbin/sshd"
RUN = "exec /usr/sbin/sshd -D -e"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not Path(SSHD).exists(),
    reason="needs root, unshare and Debian's sshd",
)


def rendered_start() -> str:
    state = compile_desired_state(config_from(""))
    login = next(o for o in state.kube_objects
                 if (o["kind"], o["metadata"]["name"]) == ("StatefulSet", "slurm-login"))
    sshd = next(c for c in login["spec"]["template"]["spec"]["containers"]
                if c["name"] == "sshd")  # fmt: skip
    mounts = {m["mountPath"] for m in sshd["volumeMounts"]}
    assert SSHD_PRIVSEP_DIR in mounts
    assert sshd["args"][:2] == ["sh", "-c"] and sshd["args"][2].endswith(RUN)
    return str(sshd["args"][2])


def in_empty_dir(start: str) -> subprocess.CompletedProcess[str]:
    """`start` with an emptyDir (0777) bind-mounted at /run/sshd, in a mount namespace."""
    empty = Path(tempfile.mkdtemp(prefix="sshd-run-"))
    try:
        empty.chmod(0o777)
        script = f"mount --bind {empty} {SSHD_PRIVSEP_DIR} && {start}"
        return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                              text=True, timeout=30)  # fmt: skip
    finally:
        shutil.rmtree(empty)


def test_sshd_refuses_an_empty_dir_as_it_is_mounted() -> None:
    result = in_empty_dir(f"{SSHD} -t")
    assert result.returncode != 0
    assert "must be owned by root and not group or world-writable" in result.stderr


def test_the_rendered_start_makes_the_empty_dir_one_sshd_accepts() -> None:
    start = rendered_start().replace(RUN, f"exec {SSHD} -t")
    result = in_empty_dir(start)
    assert result.returncode == 0, result.stderr


# ---- compute.ssh.enabled: sshd beside slurmd (seed 001: SSH to compute nodes) --------------

SLURMD = "exec slurmd -D -N $(POD_NAME)"
# In place of slurmd: the container's program, which waits for sshd to hand out a host key.
KEYSCAN = ("exec sh -c 'for i in $(seq 100); do ssh-keyscan -T 1 -t ed25519 127.0.0.1 "
           "2>/dev/null | grep -q ssh-ed25519 && exit 0; sleep 0.1; done; exit 1'")


def rendered_compute_start() -> str:
    values = ("compute: {ssh: {enabled: true}, nodes: {cpu: {enabled: true, replicas: 1, "
              "resources: {limits: {cpu: 2, memory: 4Gi}}}}}")
    state = compile_desired_state(config_from(values))
    compute = next(o for o in state.kube_objects
                   if (o["kind"], o["metadata"]["name"]) == ("StatefulSet", "slurm-cpu"))
    slurmd = compute["spec"]["template"]["spec"]["containers"][0]
    assert SSHD_PRIVSEP_DIR in {m["mountPath"] for m in slurmd["volumeMounts"]}
    assert slurmd["args"][:2] == ["sh", "-c"] and slurmd["args"][2].endswith(SLURMD)
    return str(slurmd["args"][2])


def test_the_rendered_compute_start_serves_ssh_while_its_program_runs(tmp_path: Path) -> None:
    """In its own mount, network and PID namespaces (the Pod's view): an emptyDir over
    /run/sshd, a copy of /etc/ssh without host keys (the image ships none); sshd must be up
    on port 22 with a key made at the start while the program in slurmd's place runs. The
    program is the namespace's first process: its exit ends sshd too."""
    etc_ssh = tmp_path / "etc-ssh"
    shutil.copytree("/etc/ssh", etc_ssh, ignore=shutil.ignore_patterns("ssh_host_*"))
    empty = tmp_path / "run-sshd"
    empty.mkdir(mode=0o777)
    empty.chmod(0o777)
    start = rendered_compute_start().replace(SLURMD, KEYSCAN)
    script = (f"ip link set lo up && mount --bind {etc_ssh} /etc/ssh && "
              f"mount --bind {empty} {SSHD_PRIVSEP_DIR} && exec sh -c {_quoted(start)}")
    result = subprocess.run(["unshare", "-m", "-n", "-p", "-f", "sh", "-c", script],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (etc_ssh / "ssh_host_ed25519_key").exists()  # made at the start, not the image's


def _quoted(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"
