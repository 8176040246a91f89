"""`reconciler run` as users run it, in a process of its own: start, readiness, metrics, stop;
and the local stack of its own it runs against."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.daemon.common import DAEMON_READY_TIMEOUT, DAEMON_STOP_TIMEOUT, ROOT
from bench.harness.procs import cpu_seconds
from bench.harness.report import say
from bench.harness.stack import (
    STACK_STOP_TIMEOUT,
    STACK_UP_TIMEOUT,
    start_local_up,
    stop_local_up,
    tail,
)
from reconciler.adapters.kube import Kube
from reconciler.daemon.heap import GLIBC_TUNABLES
from reconciler.local.ports import free_port
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import new_temp_runtime_dir


@dataclass(frozen=True)
class OwnStack:
    runtime: Path  # a fresh temp dir: the stack's runtime dir; logs/ stays after the run
    repo: Path  # the config repo `local up` applied: <runtime>/config-repo
    kube: Kube  # the benchmark's client of the stack's API server


@contextlib.contextmanager
def own_stack(
    prefix: str, write_repo: Callable[[Path], object], field_manager: str
) -> Iterator[OwnStack]:
    """`reconciler local up <runtime>/config-repo --runtime-dir <runtime>` in the background, in
    a fresh temp dir named PREFIX...; WRITE_REPO(path) puts the config repo there first (a copy,
    so an edit of a fixture during the run changes nothing). Stopped by its PIDs in a finally."""
    runtime = new_temp_runtime_dir(prefix)
    repo = runtime / "config-repo"
    write_repo(repo)
    say(f"starting a local stack in {runtime}")
    process = start_local_up(
        repo,
        runtime,
        ["--runtime-dir", str(runtime)],
        runtime / "logs" / "bench-local-up.log",
        timeout=STACK_UP_TIMEOUT,
        stop_timeout=STACK_STOP_TIMEOUT,
    )
    kube: Kube | None = None
    try:
        kube = Kube.from_kubeconfig(
            LocalStack.open(runtime).kube_paths.kubeconfig, field_manager=field_manager
        )
        yield OwnStack(runtime, repo, kube)
    finally:
        if kube is not None:
            kube.close()
        say("stopping the local stack")
        stopped = stop_local_up(runtime, process, timeout=STACK_STOP_TIMEOUT)
        say(f"stopped {len(stopped)} components; logs stay in {runtime}/logs")


@dataclass
class Daemon:
    process: subprocess.Popen[bytes]
    port: int
    out: Path
    log: Path
    scheduler_name: str = ""
    seconds_to_ready: float = 0.0

    @property
    def pid(self) -> int:
        return self.process.pid

    def get(self, path: str) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as error:
            return 0, str(error)

    def metrics(self) -> dict[str, float]:
        """name{labels} -> value, from the Prometheus text of /metrics."""
        status, text = self.get("/metrics")
        if status != 200:
            raise SystemExit(f"the daemon's /metrics answered {status}: {text[:200]}")
        values: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values

    def refused(self) -> int:
        return int(self.metrics().get("reconciler_scheduler_refused_total", 0))

    def cpu_seconds(self) -> float:
        """utime + stime of the daemon so far."""
        return cpu_seconds(f"/proc/{self.pid}/stat")

    def alive(self) -> None:
        if self.process.poll() is not None:
            raise SystemExit(f"the daemon exited ({self.process.returncode}):\n{tail(self.log)}")


@contextlib.contextmanager
def running_daemon(
    repo: Path,
    runtime: Path,
    extra: Sequence[str] = (),
    *,
    ready_timeout: float = DAEMON_READY_TIMEOUT,
    scheduler: bool = True,
    source: Sequence[str] = (),
) -> Iterator[Daemon]:
    """`reconciler run --source-dir REPO --local --runtime-dir RUNTIME ... EXTRA`, once /readyz
    says its first revision converged (applied or unchanged) and, with SCHEDULER, it said which
    scheduler name it schedules Pods as; stopped by its PID in a finally. SOURCE replaces
    `--source-dir REPO` (e.g. `--git-url URL`)."""
    say("starting `reconciler run`")
    port = free_port()
    logs = runtime / "logs"
    out, log = logs / "bench-daemon.out", logs / "bench-daemon.log"
    started = time.monotonic()
    with out.open("wb") as stdout, log.open("wb") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reconciler",
                "run",
                *(source or ("--source-dir", str(repo))),
                "--local",
                "--runtime-dir",
                str(runtime),
                "--workdir",
                str(runtime / "daemon-work"),
                "--hooks-api-bind-address",
                "127.0.0.1:0",
                "--listen",
                f"127.0.0.1:{port}",
                *extra,
            ],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # Ctrl-C reaches the benchmark, which stops the daemon
            env={**os.environ, "GLIBC_TUNABLES": GLIBC_TUNABLES},  # as our image runs it
        )
    daemon = Daemon(process, port, out, log)
    try:
        _wait_ready(daemon, started + ready_timeout, scheduler=scheduler)
        daemon.seconds_to_ready = time.monotonic() - started
        say(
            f"daemon ready in {daemon.seconds_to_ready:.1f} s (pid {daemon.pid}, port {port}"
            + (f", scheduling as {daemon.scheduler_name})" if daemon.scheduler_name else ")")
        )
        yield daemon
    finally:
        say("stopping the daemon")
        say(f"the daemon exited {stop_daemon(daemon)}")


def _wait_ready(daemon: Daemon, deadline: float, *, scheduler: bool) -> None:
    while True:
        daemon.alive()
        said = daemon.out.read_text(errors="replace") + daemon.log.read_text(errors="replace")
        found = re.search(r"scheduling Pods as (?:scheduler )?([\w.-]+)", said)
        if (found or not scheduler) and daemon.get("/readyz")[0] == 200:
            daemon.scheduler_name = found.group(1) if found else ""
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"the daemon was not ready in time:\n{tail(daemon.log)}")
        time.sleep(0.2)
    converged = {
        k: v for k, v in daemon.metrics().items() if k.startswith("reconciler_reconciles_total")
    }
    if not any(('"applied"' in k or '"unchanged"' in k) and v for k, v in converged.items()):
        raise SystemExit(
            f"the daemon's first revision did not converge: {converged}\n" + tail(daemon.log)
        )


def stop_daemon(daemon: Daemon) -> int | None:
    """SIGTERM by its PID (it finishes what it does, then exits); SIGKILL after a while."""
    if daemon.process.poll() is None:
        daemon.process.terminate()
        try:
            daemon.process.wait(timeout=DAEMON_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            say(f"the daemon did not stop within {DAEMON_STOP_TIMEOUT:.0f} s of SIGTERM; killing")
            daemon.process.kill()
    return daemon.process.wait()
