"""Orphans of the local stack's daemons: slurmd double-forks slurmstepd, which is reparented to
the nearest subreaper, and on this kind of machine PID 1 does not reap. The process that starts
slurmd becomes that subreaper and reaps them here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Sequence
from pathlib import Path


def become_subreaper() -> bool:
    """Adopt orphaned grandchildren (slurmd's slurmstepd) so they can be reaped here.

    slurmd double-forks slurmstepd, which is then reparented to the nearest subreaper or PID 1.
    Where PID 1 does not reap, every finished job step would otherwise stay a zombie.
    """
    pr_set_child_subreaper = 36
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans(names: Sequence[str] = ("slurmstepd",)) -> list[int]:
    """Reap adopted orphans: zombie children of this process that it did not start itself.

    Those are zombies whose comm is in `names`, or whose session is not ours and which do not
    lead their session. That leaves alone the children that subprocess.run() is about to wait
    for (our session) and the Supervisor's daemons (each leads its own session): a blanket
    waitpid(-1) would steal their exit status. Orphans must be reaped for proctrack/pgid: a
    zombie still counts as a member of its job's process group, and the kill "fails".
    """
    reaped = []
    me, my_session = os.getpid(), os.getsid(0)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        comm = stat[stat.find("(") + 1 : stat.rfind(")")]
        state, ppid, _pgrp, session = stat.rsplit(")", 1)[1].split()[:4]
        if state != "Z" or int(ppid) != me:
            continue
        adopted = int(session) not in (my_session, pid)
        if adopted or comm.startswith(tuple(names)):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
                reaped.append(pid)
    return reaped


class OrphanReaper:
    """A background thread that reaps adopted orphans (see become_subreaper) a few times a
    second: slurmstepd waits for a cancelled job's process group to empty before it gives up."""

    def __init__(self, interval: float = 0.25, names: Sequence[str] = ("slurmstepd",)) -> None:
        self.interval = interval
        self.names = tuple(names)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="orphan-reaper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        reap_orphans(self.names)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            reap_orphans(self.names)


def start_orphan_reaper() -> OrphanReaper | None:
    """Make this process the subreaper of its daemons' orphans and reap them in the background.

    Call it in any process that starts slurmd (LocalStack.up_slurm does; a node agent in its own
    process must too). None when the kernel refuses (then orphans go to PID 1 as usual).
    """
    if not become_subreaper():
        return None
    reaper = OrphanReaper()
    reaper.start()
    return reaper
