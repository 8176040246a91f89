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

from reconciler.compile.control_plane import SSHD_PRIVSEP_DIR
from reconciler.compile.desired import compile_desired_state
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
