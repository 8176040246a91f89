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


@pytest.fixture(autouse=True)
def _privsep_dir() -> None:
    """The mount point the tests bind an emptyDir over: Debian's sshd package makes it only
    when systemd runs it, and a fresh machine may not have it (the local stack makes it too)."""
    Path(SSHD_PRIVSEP_DIR).mkdir(mode=0o755, parents=True, exist_ok=True)


def rendered_start() -> str:
    state = compile_desired_state(config_from(""))
    login = next(
        o
        for o in state.kube_objects
        if (o["kind"], o["metadata"]["name"]) == ("StatefulSet", "slurm-login")
    )
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


# ---- compute.ssh.enabled: sshd beside slurmd (SUNK's "Slurm Workload Manager") -------------------

SLURMD = "exec slurmd -D -N $(POD_NAME)"
# In place of slurmd: the container's program, which waits for sshd to hand out a host key.
KEYSCAN = (
    "exec sh -c 'for i in $(seq 100); do ssh-keyscan -T 1 -t ed25519 127.0.0.1 "
    "2>/dev/null | grep -q ssh-ed25519 && exit 0; sleep 0.1; done; exit 1'"
)


def rendered_compute_start(ssh: str = "{enabled: true}") -> str:
    values = (
        f"compute: {{ssh: {ssh}, nodes: {{cpu: {{enabled: true, replicas: 1, "
        "resources: {limits: {cpu: 2, memory: 4Gi}}}}}"
    )
    state = compile_desired_state(config_from(values))
    compute = next(
        o
        for o in state.kube_objects
        if (o["kind"], o["metadata"]["name"]) == ("StatefulSet", "slurm-cpu")
    )
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
    script = (
        f"ip link set lo up && mount --bind {etc_ssh} /etc/ssh && "
        f"mount --bind {empty} {SSHD_PRIVSEP_DIR} && exec sh -c {_quoted(start)}"
    )
    result = subprocess.run(["unshare", "-m", "-n", "-p", "-f", "sh", "-c", script],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (etc_ssh / "ssh_host_ed25519_key").exists()  # made at the start, not the image's


def _quoted(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


# ---- who the compute node's sshd admits ------------------------------------------------------

# Users as a directory gives them: each has a key sshd takes (the directory's
# AuthorizedKeysCommand; here a key file per user). alice is in hpc, bob is not; root has the
# login's key. None has a job: no Slurm here.
USERS = {"alice": 4201, "bob": 4202}
# In place of slurmd: wait for sshd, then try each user and say who got in.
PROBE = """for i in $(seq 100); do
  ssh-keyscan -T 1 -t ed25519 127.0.0.1 2>/dev/null | grep -q ssh-ed25519 && break; sleep 0.1
done
for u in root alice bob; do
  if ssh -i {key} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes \\
      -o ConnectTimeout=5 "$u@127.0.0.1" true </dev/null 2>>{log}; then echo "in $u"; fi
done
"""


def logins(tmp_path: Path, ssh: str) -> tuple[set[str], str]:
    """Who logs in to the rendered compute start's sshd, for `compute.ssh` = `ssh`, in mount,
    network and PID namespaces over copies of /etc/ssh, /etc/pam.d and the user files (the
    start writes to /etc/pam.d/sshd, as it does in the container)."""
    etc = {name: tmp_path / name.replace("/", "-") for name in ("ssh", "pam.d")}
    shutil.copytree("/etc/ssh", etc["ssh"], ignore=shutil.ignore_patterns("ssh_host_*"))
    shutil.copytree("/etc/pam.d", etc["pam.d"])
    (etc["ssh"] / "sshd_config.d" / "00-test-keys.conf").write_text(
        "AuthorizedKeysFile /etc/ssh/test-keys/%u\n"
    )
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (etc["ssh"] / "test-keys").mkdir(mode=0o755)
    for user in ("root", *USERS):
        (etc["ssh"] / "test-keys" / user).write_text(key.with_suffix(".pub").read_text())
    files = {"passwd": [f"{u}:x:{i}:{i}::/nonexistent:/bin/sh" for u, i in USERS.items()],
             "group": [*(f"{u}:x:{i}:" for u, i in USERS.items()), "hpc:x:4200:alice"],
             "shadow": [f"{u}:*:19000:0:99999:7:::" for u in USERS]}  # fmt: skip
    binds = [f"mount --bind {etc[name]} /etc/{name}" for name in etc]
    for name, lines in files.items():
        copy = tmp_path / name
        copy.write_text(Path(f"/etc/{name}").read_text() + "\n".join(lines) + "\n")
        copy.chmod(Path(f"/etc/{name}").stat().st_mode & 0o777)
        binds.append(f"mount --bind {copy} /etc/{name}")
    empty = tmp_path / "run-sshd"
    empty.mkdir(mode=0o777)
    empty.chmod(0o777)
    log = tmp_path / "ssh.log"
    (tmp_path / "probe.sh").write_text(PROBE.format(key=key, log=log))
    start = rendered_compute_start(ssh).replace(SLURMD, f"exec sh {tmp_path / 'probe.sh'}")
    script = " && ".join(["ip link set lo up", *binds, f"mount --bind {empty} {SSHD_PRIVSEP_DIR}",
                          f"exec sh -c {_quoted(start)}"])  # fmt: skip
    result = subprocess.run(["unshare", "-m", "-n", "-p", "-f", "sh", "-c", script],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    admitted = {line.split()[1] for line in result.stdout.splitlines() if line.startswith("in ")}
    return admitted, (etc["pam.d"] / "sshd").read_text()


def test_ssh_enabled_alone_admits_no_directory_user_and_not_root(tmp_path: Path) -> None:
    """Every directory user has a key sshd takes: with compute.ssh.enabled alone, each logged
    in to every compute node, outside Slurm, and root with the login's key too."""
    admitted, _ = logins(tmp_path, "{enabled: true}")
    assert admitted == set()


def test_allow_groups_admit_their_members_only(tmp_path: Path) -> None:
    admitted, _ = logins(tmp_path, "{enabled: true, allowGroups: [hpc]}")
    assert admitted == {"alice"}


def test_pam_slurm_adopt_is_asked_before_any_module_that_could_skip_it(tmp_path: Path) -> None:
    """alice is in /etc/passwd, so Debian's `account sufficient pam_localuser.so` (libpam-sss
    adds it) ends the account stack before a line appended at its end. pam_slurm_adopt is
    missing here: a `required` module PAM cannot load refuses the login, where Slurm's
    `-account` would skip it and admit everyone."""
    admitted, pam = logins(tmp_path, "{enabled: true, pamSlurmAdopt: true, allowGroups: [hpc]}")
    assert admitted == set()
    assert pam.splitlines()[0] == "account required pam_slurm_adopt.so"
