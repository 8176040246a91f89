"""`reconciler run` as users run it, in a process of its own: start, readiness, metrics, stop."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench.daemon.common import DAEMON_READY_TIMEOUT, DAEMON_STOP_TIMEOUT, ROOT
from bench.harness.report import say
from bench.harness.stack import (
    tail,
)
from reconciler.local.ports import free_port


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

    def alive(self) -> None:
        if self.process.poll() is not None:
            raise SystemExit(f"the daemon exited ({self.process.returncode}):\n{tail(self.log)}")


def start_daemon(repo: Path, runtime: Path) -> Daemon:
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
                "--source-dir",
                str(repo),
                "--local",
                "--runtime-dir",
                str(runtime),
                "--workdir",
                str(runtime / "daemon-work"),
                "--hooks-api-bind-address",
                "127.0.0.1:0",
                "--listen",
                f"127.0.0.1:{port}",
            ],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # Ctrl-C reaches the benchmark, which stops the daemon
        )
    daemon = Daemon(process, port, out, log)
    try:
        deadline = started + DAEMON_READY_TIMEOUT
        while True:
            daemon.alive()
            said = out.read_text(errors="replace") + log.read_text(errors="replace")
            found = re.search(r"scheduling Pods as ([\w.-]+)", said)
            if found and daemon.get("/readyz")[0] == 200:
                daemon.scheduler_name = found.group(1)
                break
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"the daemon was not ready after {DAEMON_READY_TIMEOUT:.0f} s:\n{tail(log)}"
                )
            time.sleep(0.2)
        daemon.seconds_to_ready = time.monotonic() - started
        converged = {
            k: v for k, v in daemon.metrics().items() if k.startswith("reconciler_reconciles_total")
        }
        if not any(('"applied"' in k or '"unchanged"' in k) and v for k, v in converged.items()):
            raise SystemExit(
                f"the daemon's first revision did not converge: {converged}\n" + tail(log)
            )
    except BaseException:
        stop_daemon(daemon)
        raise
    return daemon


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
