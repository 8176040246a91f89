"""A small supervisor for the local stack's daemons.

Daemons run in the foreground as children of the process that started them, so that process can
wait() on them: on this kind of machine PID 1 does not reap, and a daemon that forks itself into
the background becomes an unreapable zombie when it exits. Each daemon gets a pidfile (so a later
`down` in another process can find it) and a log file (so a failed start can show why).

Pidfile format: line 1 the PID, line 2 argv[0] as started, line 3 the process start time in clock
ticks since boot. `down` checks lines 2 and 3 against /proc before signalling, so a PID recycled by
an unrelated process is never killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import LocalStackError

LOG_TAIL_LINES = 20
DEFAULT_GRACE_SECONDS = 10.0

Probe = Callable[[], bool]


@dataclass(frozen=True)
class PidRecord:
    """What a pidfile says about a daemon."""

    name: str
    pid: int
    argv0: str
    start_ticks: int


def process_start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat; None when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm (field 2) may contain spaces and parentheses: split after its closing parenthesis.
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])


def process_state(pid: int) -> str | None:
    """One-letter state from /proc/PID/stat (R, S, Z, ...); None when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def process_argv(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def is_running(pid: int) -> bool:
    """True while any thread of the process is alive (a zombie waiting to be reaped is not).

    A multi-threaded daemon whose main thread has exited (slurmrestd does this on SIGTERM) shows
    state Z while its other threads still run, and cannot be reaped yet: look at every thread.
    """
    state = process_state(pid)
    if state is None:
        return False
    if state not in ("Z", "X"):
        return True
    try:
        tasks = [t.name for t in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return False
    return any(_task_state(pid, tid) not in (None, "Z", "X") for tid in tasks)


def descendants(pid: int) -> list[tuple[int, int]]:
    """(pid, start ticks) of every process below `pid`, read from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], list(parents.get(pid, []))
    while todo:
        child = todo.pop()
        ticks = process_start_ticks(child)
        if ticks is not None:
            found.append((child, ticks))
        todo.extend(parents.get(child, []))
    return found


def _task_state(pid: int, tid: str) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def belongs_to(record: PidRecord) -> bool:
    """True when record.pid is still the very process the pidfile was written for."""
    if not is_running(record.pid):
        return False
    if process_start_ticks(record.pid) != record.start_ticks:
        return False
    argv = process_argv(record.pid)
    if argv and argv[0] == record.argv0:
        return True
    # Some daemons rewrite their argv (sshd: "sshd: /usr/sbin/sshd -D ... [listener]"); then
    # the program it runs must be the one started.
    return _executable(record.pid) == os.path.realpath(record.argv0)


def _executable(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"(no log at {path})"
    tail = text.splitlines()[-lines:]
    return "\n".join(f"  | {line}" for line in tail) if tail else f"(empty log {path})"


def processes_referencing(path: Path) -> list[tuple[int, str]]:
    """Live processes whose command line or environment mentions `path` (PID, command line).

    The environment catches processes that don't name the runtime dir on their command line,
    such as slurmstepd (it inherits SLURM_CONF from its slurmd).
    """
    needle = str(path).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in cmdline or needle in environ:
            found.append((int(entry.name), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


class Supervisor:
    """Starts, probes and stops named daemons; pidfiles in `pid_dir`, logs in `log_dir`."""

    def __init__(self, pid_dir: Path, log_dir: Path) -> None:
        self.pid_dir = pid_dir
        self.log_dir = log_dir
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        # Daemon name -> argv put before its own (a Pod's view of the files: pod_namespace.py).
        # The pidfile still names the daemon's own program: the prefix execs it.
        self.wrappers: dict[str, list[str]] = {}
        self._placement = threading.local()  # see placed()

    def pidfile(self, name: str) -> Path:
        return self.pid_dir / f"{name}.pid"

    def logfile(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        program: str | None = None,
    ) -> PidRecord:
        """Start `argv` in the foreground with output appended to its log; write its pidfile.
        `program`: the daemon a starting script execs, when argv[0] is that script's shell."""
        existing = self.read(name)
        if existing is not None and belongs_to(existing):
            raise LocalStackError(
                f"{name} is already running (pid {existing.pid})",
                hint=f"stop it first, or remove {self.pidfile(name)} if that is stale",
            )
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.logfile(name)
        with log.open("ab") as out:
            try:
                child = subprocess.Popen(
                    [*self.placement(), *self.wrappers.get(name, ()), *argv],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=dict(env) if env is not None else None,
                    cwd=cwd,
                    # Own session: a Ctrl-C meant for the caller must not hit the daemons in
                    # random order; they are stopped explicitly, in dependency order.
                    start_new_session=True,
                )
            except OSError as exc:
                raise LocalStackError(f"cannot start {name} ({argv[0]}): {exc}") from exc
        self._children[name] = child
        record = PidRecord(name, child.pid, program or argv[0],
                           process_start_ticks(child.pid) or 0)  # fmt: skip
        self._write(record)
        return record

    @contextlib.contextmanager
    def placed(self, prefix: Sequence[str]) -> Iterator[None]:
        """Daemons this thread starts meanwhile run behind `prefix` (a Pod's cgroup:
        pod_cgroups.py), before any wrapper of theirs; the prefix execs them."""
        previous = self.placement()
        self._placement.prefix = tuple(prefix)
        try:
            yield
        finally:
            self._placement.prefix = previous

    def placement(self) -> tuple[str, ...]:
        """The prefix of placed() in this thread (empty outside it)."""
        return tuple(getattr(self._placement, "prefix", ()))

    def wait_ready(
        self,
        name: str,
        probe: Probe,
        *,
        timeout: float,
        interval: float = 0.05,
        extra_logs: Sequence[Path] = (),
    ) -> float:
        """Poll `probe` until it returns True; return the seconds it took.

        Fails early when the daemon exits, and always names the daemon and shows its log tail
        (or, when that is empty, the tails of `extra_logs`: the daemon's own log files).
        """
        started = time.monotonic()
        deadline = started + timeout
        while True:
            if _probe_quietly(probe):
                return time.monotonic() - started
            record = self.read(name)
            if record is None or not is_running(record.pid):
                self._reap(name)
                raise self._failure(name, "exited before it was ready", extra_logs)
            if time.monotonic() >= deadline:
                raise self._failure(name, f"not ready after {timeout:.0f} s", extra_logs)
            time.sleep(interval)

    def stop(self, name: str, *, grace: float = DEFAULT_GRACE_SECONDS,
             whole_tree: bool = False) -> bool:  # fmt: skip
        """SIGTERM, wait `grace` seconds, then SIGKILL. Returns True if a process was stopped.
        `whole_tree`: as when a container's PID 1 ends, what it started ends too (a supervisor
        killed before it stopped its services leaves them to init otherwise)."""
        record = self.read(name)
        stopped = False
        if record is not None and belongs_to(record):
            stopped = True
            below = descendants(record.pid) if whole_tree else []
            deadline = time.monotonic() + grace
            self._signal(record.pid, signal.SIGTERM)
            if not self._wait_gone(name, record.pid, grace):
                self._signal(record.pid, signal.SIGKILL)
                self._wait_gone(name, record.pid, 5.0)
            _end_leftovers(below, deadline)
        self._reap(name)
        with contextlib.suppress(FileNotFoundError):
            self.pidfile(name).unlink()
        return stopped

    def reap_exited(self) -> list[str]:
        """Reap children of this process that have exited (e.g. stopped by another process)."""
        # The node agent starts and stops slurmd from its own threads while `up` reaps here.
        exited = [name for name, child in list(self._children.items()) if child.poll() is not None]
        for name in exited:
            self._children.pop(name, None)
        return exited

    def children(self) -> list[str]:
        """Names of daemons this process started and has not reaped yet."""
        return sorted(list(self._children))

    def read(self, name: str) -> PidRecord | None:
        try:
            lines = self.pidfile(name).read_text().splitlines()
        except FileNotFoundError:
            return None
        try:
            return PidRecord(name, int(lines[0]), lines[1], int(lines[2]))
        except (IndexError, ValueError):
            return None

    def running(self, name: str) -> PidRecord | None:
        """The daemon's record when it is alive and still the process we started."""
        record = self.read(name)
        return record if record is not None and belongs_to(record) else None

    def names(self) -> list[str]:
        """Every daemon with a pidfile, started by this process or an earlier one."""
        if not self.pid_dir.is_dir():
            return []
        return sorted(p.stem for p in self.pid_dir.glob("*.pid"))

    def _write(self, record: PidRecord) -> None:
        tmp = self.pidfile(record.name).with_suffix(".tmp")
        tmp.write_text(f"{record.pid}\n{record.argv0}\n{record.start_ticks}\n")
        tmp.replace(self.pidfile(record.name))

    def _failure(self, name: str, what: str, extra_logs: Sequence[Path] = ()) -> LocalStackError:
        logs = [self.logfile(name)]
        if _is_empty(logs[0]):
            # Some daemons write only to their own log file (slurmd, munged); Slurm daemons in
            # the foreground write to both, and one copy is enough.
            logs += [p for p in extra_logs if p.exists()]
        tails = "".join(f"\nlast lines of {log}:\n{log_tail(log)}" for log in logs)
        return LocalStackError(f"{name} {what}{tails}", hint="see " + ", ".join(map(str, logs)))

    def _wait_gone(self, name: str, pid: int, timeout: float) -> bool:
        child = self._children.get(name)
        if child is not None and child.pid == pid:
            # Our own child: wait() both waits for every thread to end and reaps it.
            try:
                child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
            self._children.pop(name, None)
            return True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._reap(name)
            if not is_running(pid):
                return True
            time.sleep(0.05)
        return not is_running(pid)

    def _reap(self, name: str) -> None:
        child = self._children.get(name)
        if child is not None and child.poll() is not None:
            self._children.pop(name, None)

    @staticmethod
    def _signal(pid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _end_leftovers(processes: Sequence[tuple[int, int]], deadline: float) -> None:
    """SIGKILL each (pid, start ticks) still alive at `deadline`; a reused pid is left alone."""

    def alive() -> list[int]:
        return [pid for pid, ticks in processes
                if is_running(pid) and process_start_ticks(pid) == ticks]  # fmt: skip

    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _is_empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except FileNotFoundError:
        return True


def _probe_quietly(probe: Probe) -> bool:
    """A probe that raises counts as 'not ready yet': daemons refuse connections while starting."""
    try:
        return bool(probe())
    except Exception:
        return False
