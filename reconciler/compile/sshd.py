"""sshd in a Pod: the login Pod's program, and beside slurmd when `compute.ssh.enabled` (SUNK's
"Slurm Workload Manager" page: "SSH to compute nodes as well as login node"). One way to start it,
for both:

- `/run/sshd`, sshd's privilege separation directory, is an emptyDir; sshd refuses one that
  others may write (an emptyDir is 0777), so the start makes it 0755 first.
- Our image ships no host keys (an image's keys would be every cluster's): `ssh-keygen -A`
  makes the missing ones when the container starts, so they change with the Pod.
- `-D -e`: sshd stays in the foreground and logs to the container's stderr.

On compute nodes sshd admits only whom Slurm would (`compute_sshd_options`), given on its
command line, where no sshd_config file of the image or the directory can override them:
- `PermitRootLogin no`: root logs in to the login node, not past Slurm onto a compute node.
- `compute.ssh.pamSlurmAdopt`: the image ships Slurm's pam_slurm_adopt; the start puts
  `account required pam_slurm_adopt.so` first in /etc/pam.d/sshd (`_ADOPT` says why first,
  where Slurm's pam_slurm_adopt page says last), so a user with a job on the node is admitted
  and the session joins the job's cgroup, and anyone else is refused; slurm.conf gets
  `PrologFlags=Contain` (the job's extern step, which the session joins). `required`, not
  `-account`: an image without the module refuses every login rather than admitting all.
- `compute.ssh.allowGroups`, `allowUsers`: sshd's `AllowGroups`, `AllowUsers` (sshd admits a
  user only if every list given names them; pam_slurm_adopt then asks for a job as well).
- None of them: `DenyUsers *`, and the plan says which keys open it. Otherwise every user of
  the directory could log in to every node, outside Slurm.
"""

from __future__ import annotations

import shlex

from reconciler.errors import Warning_
from reconciler.objects import Obj

SSHD_PRIVSEP_DIR = "/run/sshd"
SSHD_PORT = 22  # the image's sshd_config leaves sshd on its default port
SSHD_VOLUME = "sshd-run"
_PREPARE = f"chmod 0755 {SSHD_PRIVSEP_DIR} && ssh-keygen -A"
_SSHD = "/usr/sbin/sshd -D -e"
# The login container's whole command: sshd is its program.
SSHD_START = f"{_PREPARE} && exec {_SSHD}"
PAM_SSHD = "/etc/pam.d/sshd"
PAM_SLURM_ADOPT = "account required pam_slurm_adopt.so"
# The first line of the file, so first in the account stack: a `sufficient` module before it
# would skip it when it succeeds (Debian's pam_localuser, which libpam-sss adds, does for any
# user in /etc/passwd), and a `required` failure is not undone by a later success. Once per
# container (a restarted container starts from the image again); the exact line, so that a
# commented or `-account` line of the image does not stand in for ours.
_ADOPT = (f"{{ grep -qxF {shlex.quote(PAM_SLURM_ADOPT)} {PAM_SSHD} || "
          f"sed -i {shlex.quote('1i ' + PAM_SLURM_ADOPT)} {PAM_SSHD}; }}")  # fmt: skip
_ACCESS_KEYS = ("pamSlurmAdopt", "allowGroups", "allowUsers")


def _ssh(values: Obj) -> Obj:
    return ((values.get("compute") or {}).get("ssh")) or {}


def compute_ssh_enabled(values: Obj) -> bool:
    return bool(_ssh(values).get("enabled"))


def pam_slurm_adopt(values: Obj) -> bool:
    """sshd on compute nodes asks pam_slurm_adopt (the compute image has it)."""
    return compute_ssh_enabled(values) and bool(_ssh(values).get("pamSlurmAdopt"))


def compute_sshd_options(values: Obj) -> list[str]:
    """sshd's `-o` options on compute nodes: who it admits (the module's docstring)."""
    ssh = _ssh(values)
    options = ["PermitRootLogin=no"]
    if pam_slurm_adopt(values):
        options.append("UsePAM=yes")  # without PAM, sshd would never ask pam_slurm_adopt
    for key, option in (("allowUsers", "AllowUsers"), ("allowGroups", "AllowGroups")):
        if names := ssh.get(key):
            options.append(f"{option}={' '.join(names)}")
    if len(options) == 1:
        options.append("DenyUsers=*")
    return options


def sshd_beside(program: list[str], values: Obj) -> str:
    """A shell command that starts sshd in the background, then execs `program` (slurmd), which
    stays the container's main process: its exit ends the container, as without sshd. A
    failed key, directory or PAM step ends the start, so a Pod that cannot serve SSH says so."""
    steps = f"{_PREPARE} && {_ADOPT}" if pam_slurm_adopt(values) else _PREPARE
    options = " ".join(f"-o {shlex.quote(option)}" for option in compute_sshd_options(values))
    return f"{steps} || exit 1; {_SSHD} {options} & exec {' '.join(program)}"


def slurm_conf_settings(values: Obj) -> dict[str, str]:
    """pam_slurm_adopt joins a session to the job's extern step, which Contain makes."""
    return {"PrologFlags": "Contain"} if pam_slurm_adopt(values) else {}


def compute_ssh_warnings(values: Obj, slurm_conf: str) -> list[Warning_]:
    """What `compute.ssh` says that the render cannot do as written."""
    ssh = _ssh(values)
    written = [f"compute.ssh.{key}" for key in _ACCESS_KEYS if ssh.get(key)]
    if not compute_ssh_enabled(values):
        return [Warning_("values", f"{key} is not used: compute.ssh.enabled is not true")
                for key in written]  # fmt: skip
    if not written:
        return [Warning_("compute.ssh.enabled", "sshd on compute nodes admits nobody (DenyUsers "
                         "*): set compute.ssh.pamSlurmAdopt (an image with Slurm's "
                         "pam_slurm_adopt: users with a job on the node) or "
                         "compute.ssh.allowGroups / compute.ssh.allowUsers")]  # fmt: skip
    flags = [line.partition("=")[2] for line in slurm_conf.splitlines()
             if line.partition("=")[0].strip().lower() == "prologflags"]  # fmt: skip
    if pam_slurm_adopt(values) and "contain" not in (flags[-1:] or [""])[0].lower():
        return [Warning_("slurmConfig.extraConfig", "slurm.conf's PrologFlags leaves out "
                         "Contain, which compute.ssh.pamSlurmAdopt needs: a session on a "
                         "compute node is not held in its job's cgroup; add Contain to "
                         "PrologFlags")]  # fmt: skip
    return []


def sshd_volume() -> Obj:
    return {"name": SSHD_VOLUME, "emptyDir": {"medium": "Memory"}}


def sshd_mount() -> Obj:
    return {"name": SSHD_VOLUME, "mountPath": SSHD_PRIVSEP_DIR}


def authorized_keys(values: Obj) -> tuple[list[Obj], list[Obj]]:
    """(mounts, volumes) of `login.authorizedKeysSecret` as root's authorized_keys in the
    login Pod (compute nodes refuse root: `compute_sshd_options`)."""
    secret = (values.get("login") or {}).get("authorizedKeysSecret")
    if not secret:
        return [], []
    mount = {"name": "authorized-keys", "mountPath": "/root/.ssh/authorized_keys",
             "subPath": "authorized_keys", "readOnly": True}  # fmt: skip
    # optional: the Pod starts before the Secret exists (nobody can log in until then); a
    # subPath mount never updates, so a Secret made later needs a Pod restart.
    volume = {"name": "authorized-keys",
              "secret": {"secretName": secret, "defaultMode": 0o600, "optional": True}}  # fmt: skip
    return [mount], [volume]
