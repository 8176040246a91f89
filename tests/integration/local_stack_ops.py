"""What the integration tests do to a local stack that `reconciler local` itself never does:
note its daemons' PIDs, ports and mounts to check that `down` left nothing, wait in a script
as the foreground `up` waits, and hide a FUTURE node again."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from reconciler.cli.local_parts import wait_for_stop
from reconciler.local.orphans import reap_orphans
from reconciler.local.processes import is_running, processes_referencing
from reconciler.local.slurm.cluster import SlurmCluster
from reconciler.local.stack import LocalStack


def recorded_pids(stack: LocalStack) -> list[int]:
    """PIDs of every daemon with a pidfile (take them before `down`, which removes those)."""
    records = (stack.supervisor.read(name) for name in stack.supervisor.names())
    return [record.pid for record in records if record is not None]


def recorded_ports(stack: LocalStack) -> set[int]:
    """Every port the stack was given (for checking that `down` freed them)."""
    return stack.record.taken_ports()


def leftover_processes(stack: LocalStack, pids: Sequence[int] = ()) -> list[str]:
    """What still exists after `down`: any of `pids` (even as a zombie), or any process
    whose command line or environment names the stack's runtime dir. Empty means clean."""
    left = [
        f"pid {pid} ({'running' if is_running(pid) else 'zombie'})"
        for pid in pids
        if Path(f"/proc/{pid}").exists()
    ]
    left += [f"pid {pid}: {cmd}" for pid, cmd in processes_referencing(stack.runtime_dir)]
    return left


def listening_ports() -> set[int]:
    """Every TCP port in LISTEN state on this machine (IPv4 and IPv6), read from /proc/net."""
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A":  # 0A is TCP_LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below `path` in this process's mount namespace."""
    prefix = os.path.realpath(path)
    with open("/proc/self/mountinfo") as mounts:
        points = [line.split()[4] for line in mounts]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


def wait_until_down(stack: LocalStack) -> None:
    """In a script that brought `stack` up, wait as the foreground `reconciler local up` does:
    while any daemon it started runs, reaping each as it exits (another process's `down` stops
    them by PID; only their parent can reap them). Ctrl-C here brings the stack down."""
    try:
        wait_for_stop(stack)
    except KeyboardInterrupt:
        stack.down()
        raise
    finally:
        reap_orphans()  # the job steps this process adopted and its reaper thread has not reaped


def retire_node(cluster: SlurmCluster, node: str) -> None:
    """Hide a node again (State=FUTURE). Drain it and wait for its jobs first."""
    cluster.run("scontrol", "update", f"nodename={node}", "state=FUTURE")
