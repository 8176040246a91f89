"""What a local Slurm cluster's jobs leave behind: slurmstepd and job processes, found in
/proc by their environment, killed and reaped when the cluster stops.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from reconciler.local.orphans import reap_orphans
from reconciler.local.processes import is_running


def kill_job_processes(slurm_conf: Path) -> list[int]:
    """SIGKILL the slurmstepd and job processes of the cluster configured by `slurm_conf`;
    the PIDs killed (see SlurmCluster.kill_leftover_job_processes for how they are found)."""
    marker = f"SLURM_CONF={slurm_conf}".encode()
    killed = []
    for pid in _job_pids_with_environ(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    for pid in killed:
        _reap_if_child(pid)
    reap_orphans()
    return killed


def _job_pids_with_environ(marker: bytes) -> list[int]:
    """slurmstepd and job processes (SLURM_JOB_ID set) whose environment holds `marker`;
    never this process or its ancestors."""
    spared = _ancestors(os.getpid())
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in spared or not is_running(int(entry.name)):
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            stepd = (entry / "cmdline").read_bytes().startswith(b"slurmstepd")
        except OSError:
            continue
        if marker in environ and (stepd or any(v.startswith(b"SLURM_JOB_ID=") for v in environ)):
            pids.append(int(entry.name))
    return pids


def _ancestors(pid: int) -> set[int]:
    found = set()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            break
        pid = int(fields[1])  # ppid
    return found


def _reap_if_child(pid: int, timeout: float = 2.0) -> None:
    """Reap `pid` if it is our child (we are the subreaper of orphaned job processes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return  # not ours: whoever is its parent reaps it
        if done:
            return
        time.sleep(0.02)
