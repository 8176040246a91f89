"""A cgroup per Pod on the local stack, as kubelet gives each Pod one: what a Pod's daemons fork
stays in it (slurmd's slurmstepd, which daemonizes away from slurmd's process tree, and every
job process under it, even one that left its process group and its environment), and stopping
the Pod ends all of it, then removes the cgroup.

cgroup v1's freezer hierarchy: one directory per local stack (`sunk-reconciler/<run>`), one
`pod<uid>` cgroup per Pod below it, as kubelet's `kubepods/pod<uid>`. A daemon joins its Pod's
cgroup before it execs (`join_prefix`), so nothing it starts can be missed. Ending a Pod's
cgroup is what a container runtime does: SIGTERM to everything, a grace period, then the
cgroup frozen (no fork can race the kill), SIGKILL to everything, thawed, emptied, removed.

Without write access to the hierarchy (not root, or no cgroup v1 freezer) nothing is placed,
the stack stops Pods as it did before (their daemons' process trees), and says so once.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

FREEZER = Path("/sys/fs/cgroup/freezer")
PARENT = "sunk-reconciler"
KILL_WAIT_SECONDS = 5.0
_POLL_SECONDS = 0.05


class PodCgroups:
    """The Pod cgroups of one local stack, under `<hierarchy>/sunk-reconciler/<run>`."""

    _warned = False  # the fallback is logged once per process
    _warn_lock = threading.Lock()

    def __init__(self, run: str, hierarchy: Path = FREEZER) -> None:
        self.directory = hierarchy / PARENT / run
        self._usable: bool | None = None
        self._lock = threading.Lock()

    @classmethod
    def of_run(cls, slurm_root: Path, hierarchy: Path = FREEZER) -> PodCgroups:
        """The cgroups of the stack whose Slurm files are under `slurm_root`: the same
        directory for `up` and for a later `down` in another process."""
        digest = hashlib.sha256(str(slurm_root.resolve()).encode()).hexdigest()[:10]
        return cls(f"{slurm_root.resolve().parent.name}-{digest}", hierarchy)

    # ---- placing daemons ----------------------------------------------------------------

    def join_prefix(self, pod: str) -> list[str]:
        """argv to put before a daemon's own so that it runs in the Pod's cgroup (empty when
        cgroups are not usable here). The shell writes its own PID, then execs the daemon:
        the PID, and so the Supervisor's pidfile, stays the daemon's."""
        procs = self._make(pod)
        if procs is None:
            return []
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs)]

    def pids(self, pod: str) -> list[int]:
        """Processes in the Pod's cgroup now (none when it has none)."""
        return _read_pids(self.directory / _name(pod))

    def _make(self, pod: str) -> Path | None:
        with self._lock:
            if self._usable is False:
                return None
            cgroup = self.directory / _name(pod)
            try:
                cgroup.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                self._usable = False
                _warn_once(self.directory, exc)
                return None
            self._usable = True
            return cgroup / "cgroup.procs"

    # ---- ending them --------------------------------------------------------------------

    def end(self, pod: str, grace: float) -> int:
        """SIGTERM every process in the Pod's cgroup, SIGKILL what is left after `grace`
        seconds, then remove the cgroup; how many processes it found."""
        cgroup = self.directory / _name(pod)
        if not cgroup.is_dir():
            return 0
        found = set(_read_pids(cgroup))
        _signal_all(cgroup, signal.SIGTERM, found)
        deadline = time.monotonic() + grace
        while _read_pids(cgroup) and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS)
        _kill_frozen(cgroup, found)
        _remove(cgroup)
        return len(found)

    def remove_run(self) -> int:
        """SIGKILL what is left in every Pod cgroup of this stack and remove them, the run's
        directory with them (`local down`: the daemons were stopped, the jobs cancelled);
        how many processes were still there."""
        if not self.directory.is_dir():
            return 0
        found: set[int] = set()
        for cgroup in [p for p in self.directory.iterdir() if p.is_dir()]:
            _kill_frozen(cgroup, found)
            _remove(cgroup)
        # Not `sunk-reconciler/` itself: another stack may be making its run directory in it.
        _remove(self.directory)
        return len(found)


def _name(pod: str) -> str:
    """The cgroup of a Pod (its uid, as kubelet's pod<uid>); any '/' would nest it."""
    return "pod" + pod.replace("/", "_")


def _read_pids(cgroup: Path) -> list[int]:
    try:
        text = (cgroup / "cgroup.procs").read_text()
    except OSError:
        return []
    return [int(line) for line in text.split()]


def _signal_all(cgroup: Path, sig: signal.Signals, seen: set[int]) -> None:
    """Signal every process in `cgroup` until none is left unsignalled: a process forked
    meanwhile is in the cgroup too, and is signalled on the next pass."""
    signalled: set[int] = set()
    while True:
        todo = [pid for pid in _read_pids(cgroup) if pid not in signalled]
        if not todo:
            return
        for pid in todo:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            signalled.add(pid)
            seen.add(pid)


def _kill_frozen(cgroup: Path, seen: set[int]) -> None:
    """SIGKILL everything in `cgroup` while it is frozen, so nothing forks past the kill;
    wait until it is empty. A frozen process takes its SIGKILL once thawed."""
    if not _read_pids(cgroup):
        return
    state = cgroup / "freezer.state"
    with contextlib.suppress(OSError):
        state.write_text("FROZEN")
    try:
        _signal_all(cgroup, signal.SIGKILL, seen)
    finally:
        with contextlib.suppress(OSError):
            state.write_text("THAWED")
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while _read_pids(cgroup) and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
    left = _read_pids(cgroup)
    if left:
        log.warning("cgroup %s: processes %s outlived SIGKILL", cgroup, left)


def _remove(cgroup: Path) -> None:
    try:
        cgroup.rmdir()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot remove cgroup %s: %s", cgroup, exc)


def _warn_once(directory: Path, exc: OSError) -> None:
    with PodCgroups._warn_lock:
        if PodCgroups._warned:
            return
        PodCgroups._warned = True
    log.warning(
        "no cgroup for the local stack's Pods (%s: %s): a stopped Pod's job processes "
        "(slurmstepd and what it runs) are not ended with it; run `local up` as root on a "
        "host with cgroup v1's freezer mounted at %s for that", directory, exc.strerror,
        directory.parent.parent,
    )  # fmt: skip
