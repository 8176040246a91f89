"""bench.soak's churn beside the waves of Pods: config revisions pushed to the daemon's git
remote, and restarts of slurmctld and kube-apiserver."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.daemon.process import Daemon
from bench.faults.faults import restart_apiserver
from bench.harness.report import say
from bench.harness.timing import wait_until
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.errors import ReconcilerError
from reconciler.local.processes import descendants
from reconciler.local.stack import LocalStack

# The two states a revision alternates between: the partition line of the scheduler repo's
# values.yaml, so each revision changes slurm.conf (and nothing that would restart slurmd).
PARTITION_A = "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
PARTITION_B = "PartitionName=all Nodes=ALL Default=YES MaxTime=30-00:00:00 State=UP"
APPLIED_METRIC = 'reconciler_applied_revision_info{revision="'
GIT = ("git", "-c", "user.name=soak-bench", "-c", "user.email=soak-bench@localhost",
       "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false")  # fmt: skip
RESTART_TIMEOUT = 120.0


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        [*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def du(path: Path) -> int:
    """Bytes on disk under PATH, as `du` counts them (allocated blocks)."""
    total = 0
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                total += os.lstat(os.path.join(top, name)).st_blocks * 512
            except OSError:
                continue
    return total


@dataclass(frozen=True)
class GitRemote:
    work: Path  # a working copy the benchmark commits in
    origin: Path  # the bare repository it pushes to: the daemon's --git-url

    @property
    def url(self) -> str:
        return f"file://{self.origin}"


def make_remote(repo: Path, runtime: Path) -> GitRemote:
    """REPO's files committed in <runtime>/soak-work and pushed to <runtime>/soak-origin.git."""
    work, origin = runtime / "soak-work", runtime / "soak-origin.git"
    shutil.copytree(repo, work)
    if PARTITION_A not in (work / "values.yaml").read_text():
        raise SystemExit(f"{work / 'values.yaml'} has no line {PARTITION_A!r} to alternate")
    git(work, "init", "-q", ".")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "soak: the scheduler fixture repo")
    git(runtime, "clone", "-q", "--bare", str(work), str(origin))
    git(work, "remote", "add", "origin", str(origin))
    return GitRemote(work, origin)


def applied_revision(daemon: Daemon) -> str:
    """The revision the daemon says the cluster holds (its /metrics), or ''."""
    for name, value in daemon.metrics().items():
        if name.startswith(APPLIED_METRIC) and value:
            return name[len(APPLIED_METRIC) :].split('"', 1)[0]
    return ""


@dataclass
class Revisions:
    """Every INTERVAL seconds, the other partition line committed and pushed; then wait until
    the daemon's /metrics says that commit is applied. LOCK is held from the push to the apply
    (restarts take it too, so none lands in the middle of an apply)."""

    remote: GitRemote
    daemon: Daemon
    count: int
    interval: float
    lock: threading.Lock
    timeout: float = 300.0
    applied: list[float] = field(default_factory=list)  # seconds from push to applied
    missed: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="soak-revisions", daemon=True)
        self._thread.start()

    @property
    def done(self) -> int:
        return len(self.applied) + len(self.missed)

    def finished(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 10)

    def _run(self) -> None:
        values = self.remote.work / "values.yaml"
        started = time.monotonic()
        for n in range(1, self.count + 1):
            if self._stop.wait(max(0.0, started + n * self.interval - time.monotonic())):
                return
            text = values.read_text()
            flip = (PARTITION_A, PARTITION_B) if PARTITION_A in text else (PARTITION_B, PARTITION_A)
            values.write_text(text.replace(*flip))
            with self.lock:
                self._push(n)

    def _push(self, n: int) -> None:
        git(self.remote.work, "commit", "-q", "-am", f"soak: revision {n}")
        sha = git(self.remote.work, "rev-parse", "HEAD")
        git(self.remote.work, "push", "-q", "origin", "HEAD:main")
        pushed = time.monotonic()
        if wait_until(lambda: self._applied(sha), self.timeout, poll=0.5):
            self.applied.append(time.monotonic() - pushed)
        else:
            self.missed.append(sha[:12])
            say(f"revision {n} ({sha[:12]}) was not applied within {self.timeout:.0f} s")

    def _applied(self, sha: str) -> bool:
        try:
            return applied_revision(self.daemon) == sha
        except SystemExit:  # /metrics did not answer 200: try again
            return False


def slurmctld_pid(stack: LocalStack) -> int | None:
    """The slurmctld process below this stack's `up` process (other stacks run their own)."""
    up = stack.foreground.pid()
    if up is None:
        return None
    for pid, _ticks in descendants(up):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "slurmctld":
                return pid
        except OSError:
            continue
    return None


def restart_slurmctld(stack: LocalStack, api: SlurmRestApi) -> str:
    """SIGTERM to slurmctld by its PID; the node agent starts it again as kubelet restarts an
    exited container. Waits until a new slurmctld answers slurmrestd's ping."""
    old = slurmctld_pid(stack)
    if old is None:
        raise SystemExit("no slurmctld below the stack's `up` process")
    os.kill(old, signal.SIGTERM)

    def back() -> bool:
        new = slurmctld_pid(stack)
        if new is None or new == old:
            return False
        try:
            api.ping()
        except ReconcilerError:
            return False
        return True

    if not wait_until(back, RESTART_TIMEOUT, poll=0.5):
        raise SystemExit(f"slurmctld (pid {old}) did not come back in {RESTART_TIMEOUT:.0f} s")
    return f"slurmctld pid {old} -> {slurmctld_pid(stack)}"


def restart(kind: str, stack: LocalStack, api: SlurmRestApi, lock: threading.Lock) -> float:
    """Restart KIND (slurmctld or kube-apiserver), between revisions; seconds it took."""
    with lock:
        started = time.monotonic()
        if kind == "slurmctld":
            note = restart_slurmctld(stack, api)
        else:
            restart_apiserver(stack)
            note = "kube-apiserver stopped, started again after 5 s"
        seconds = time.monotonic() - started
    say(f"restarted {kind}: {note}, ready again in {seconds:.1f} s")
    return seconds
