"""The munge key step of every rendered Slurm Pod, run on this host's real munged (Debian's
0.5.15): the rendered init container's script, with only the capabilities the render gives
it, turns a Secret volume's key (a symlink) into one munged accepts, and munged started with
the rendered arguments, as the rendered user, serves credentials to SlurmUser.

The Pod's three paths are moved into a temp directory (this host's /run/munge may be another
munged's); everything else is the rendered container as written."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.compile.desired import compile_desired_state
from reconciler.compile.munge import (
    MUNGE_CONTAINER,
    MUNGE_INIT_CONTAINER,
    MUNGE_KEY_DIR,
    MUNGE_RUN_KEY_DIR,
    MUNGE_SOCKET_DIR,
)
from tests.integration.helpers import wait_for
from tests.unit.conftest import config_from

MUNGED = "/usr/sbin/munged"
SLURM_UID = 64030

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv") or not Path(MUNGED).exists(),
    reason="needs root, setpriv and Debian's munged",
)


def controller_containers() -> tuple[dict[str, Any], dict[str, Any]]:
    state = compile_desired_state(config_from("login: {enabled: false}\n"))
    deployment = next(
        o
        for o in state.kube_objects
        if (o["kind"], o["metadata"]["name"]) == ("Deployment", "slurm-controller")
    )
    pod = deployment["spec"]["template"]["spec"]
    init = next(c for c in pod["initContainers"] if c["name"] == MUNGE_INIT_CONTAINER)
    munged = next(c for c in pod["containers"] if c["name"] == MUNGE_CONTAINER)
    return init, munged


class PodPaths:
    """The Pod's volumes as kubelet lays them out: a Secret volume whose file is a symlink
    into `..data`, and two emptyDirs (0777, setgid for the Pod's fsGroup)."""

    def __init__(self, root: Path) -> None:
        self.secret, self.key_copy, self.socket = root / "secret", root / "key", root / "sock"
        data = self.secret / "..2026_11_27" / "munge.key"
        data.parent.mkdir(parents=True)
        data.write_bytes(os.urandom(1024))
        data.chmod(0o440)
        (self.secret / "..data").symlink_to(data.parent.name)
        (self.secret / "munge.key").symlink_to("..data/munge.key")
        for empty in (self.key_copy, self.socket):
            empty.mkdir()
            empty.chmod(0o2777)
        root.chmod(0o755)

    def moved(self, text: str) -> str:
        for pod_path, here in ((MUNGE_RUN_KEY_DIR, self.key_copy), (MUNGE_KEY_DIR, self.secret),
                               (MUNGE_SOCKET_DIR, self.socket)):  # fmt: skip
            text = text.replace(pod_path, str(here))
        return text


@pytest.fixture
def paths() -> Iterator[PodPaths]:
    # Not pytest's tmp_path: munged (as munge) walks every parent, and that one is 0700 root's.
    root = Path(tempfile.mkdtemp(prefix="munge-key-"))
    try:
        root.chmod(0o755)
        yield PodPaths(root / "pod")
    finally:
        shutil.rmtree(root)


def as_user(uid: int, argv: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]


def with_capabilities(security: dict[str, Any], argv: list[str]) -> list[str]:
    """argv as root with the container's capabilities only (its drop ALL, add ...)."""
    added = ",".join(f"+{c.lower()}" for c in security["capabilities"]["add"])
    assert security["capabilities"]["drop"] == ["ALL"] and security["runAsUser"] == 0
    return ["setpriv", "--inh-caps=-all", f"--bounding-set=-all,{added}", *argv]


def run_munged(argv: list[str], uid: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(as_user(uid, argv), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)  # fmt: skip


def stop(process: subprocess.Popen[bytes]) -> str:
    if process.poll() is None:
        process.terminate()
    output, _ = process.communicate(timeout=10)
    return output.decode(errors="replace")


def test_munged_refuses_the_secret_volumes_key_as_mounted(paths: PodPaths) -> None:
    """The bug the init step fixes: munged on the Secret volume's file (its socket directory
    made right, so the key is what it refuses)."""
    _, munged = controller_containers()
    os.chown(paths.socket, 64031, 64031)
    paths.socket.chmod(0o755)
    argv = [paths.moved(a) for a in munged["args"]]
    argv = [f"--key-file={paths.secret}/munge.key" if a.startswith("--key-file=") else a
            for a in argv]  # fmt: skip
    process = run_munged([MUNGED, *argv[1:]], munged["securityContext"]["runAsUser"])
    assert process.wait(timeout=10) != 0
    assert "Keyfile" in stop(process)


def test_the_rendered_key_step_makes_a_key_munged_serves(paths: PodPaths) -> None:
    init, munged = controller_containers()
    script = paths.moved(init["command"][-1])
    step = subprocess.run(with_capabilities(init["securityContext"], ["sh", "-c", script]),
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert step.returncode == 0, step.stderr
    key = paths.key_copy / "munge.key"
    assert not key.is_symlink() and (key.stat().st_mode & 0o777) == 0o400
    assert (key.stat().st_uid, paths.key_copy.stat().st_uid) == (64031, 64031)
    argv = [paths.moved(a) for a in munged["args"]]
    process = run_munged([MUNGED, *argv[1:]], munged["securityContext"]["runAsUser"])
    try:
        socket = paths.socket / "munge.socket.2"
        wait_for(lambda: socket.is_socket() or process.poll() is not None, 10, "munged's socket")
        assert process.poll() is None, stop(process)
        # slurmctld's user (the controller Pod's) gets a credential, as the probe does.
        probe = [paths.moved(a) for a in munged["livenessProbe"]["exec"]["command"]]
        answer = subprocess.run(as_user(SLURM_UID, probe), capture_output=True, timeout=15)
        assert answer.returncode == 0, answer.stderr
    finally:
        stop(process)
