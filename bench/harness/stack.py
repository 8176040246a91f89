"""A benchmark's own local stack: `reconciler local up` in the background, and its stop.

Shared by bench.scheduler_bench, bench.daemon_rss and bench.chaos. The `up` process is started
as a user runs it, in a session of its own (Ctrl-C reaches the benchmark, which stops the stack).
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import STATE_FILE, default_runtime_dir
from reconciler.local.target_parts import scheduler_endpoints

ROOT = Path(__file__).resolve().parents[2]  # the repo root: `local up` runs from there
READY_PREFIX = "# Ctrl-C"  # the line `local up` prints on stdout once the stack is ready
STACK_UP_TIMEOUT = 240.0
STACK_STOP_TIMEOUT = 90.0


def stop_on_sigterm() -> None:
    """SIGTERM raises SystemExit, so the benchmark's finally blocks stop what it started."""

    def terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # run the finally blocks: the stack must stop

    signal.signal(signal.SIGTERM, terminate)


def start_local_up(
    repo: Path,
    runtime: Path,
    runtime_args: list[str],
    log: Path,
    *,
    timeout: float,
    stop_timeout: float,
) -> subprocess.Popen[str]:
    """`reconciler local up REPO RUNTIME_ARGS...` in the background, until it says it is ready.

    RUNTIME_ARGS name the stack (`--name NAME` or `--runtime-dir DIR`) whose runtime directory
    is RUNTIME; its stderr goes to LOG. Not ready within TIMEOUT seconds, or exited before:
    SystemExit, after the stack is stopped (stop_local_up, with STOP_TIMEOUT).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "local", "up", str(repo), *runtime_args],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,  # Ctrl-C reaches the benchmark, which stops the stack
        )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, name="bench-up-stdout", daemon=True).start()
    deadline = started + timeout
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise SystemExit(
                    f"the local stack was not ready after {timeout:.0f} s; see {log}"
                ) from None
            if line is None:
                raise SystemExit(
                    f"`reconciler local up` exited ({process.wait()}) before it was ready:\n"
                    + tail(log)
                )
            if line.startswith(READY_PREFIX):
                return process
    except BaseException:
        stop_local_up(runtime, process, timeout=stop_timeout)
        raise


def stop_local_up(runtime: Path, process: subprocess.Popen[str], *, timeout: float) -> list[str]:
    """The stack's own stop: SIGTERM to the `up` process by its recorded PID (it stops its node
    agent and daemons and reaps them), then `down` for anything left. Our child is SIGTERMed by
    its PID if it never recorded itself (and killed after TIMEOUT). What was stopped."""
    stopped: list[str] = []
    if (runtime / STATE_FILE).exists():
        stopped += LocalStack.open(runtime).foreground.stop(timeout=timeout)
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()
    if (runtime / STATE_FILE).exists():
        stopped += LocalStack.open(runtime).down()
    return stopped


def tail(path: Path, lines: int = 15) -> str:
    """The last LINES lines of a log, indented for an error message."""
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return f"  (no {path})"
    return "\n".join(f"  | {line}" for line in text)


@dataclass
class Stack:
    """A `reconciler local up` process of our own, and how to reach what it runs."""

    name: str
    runtime: Path
    process: subprocess.Popen[str]
    log: Path
    seconds_to_ready: float
    kubeconfig: Path
    rest_url: str
    jwt_key: Path
    user: str


def refuse_running(name: str, runtime: Path) -> None:
    """SystemExit if a local stack of that name already runs in RUNTIME."""
    if (runtime / STATE_FILE).exists():
        old = LocalStack.open(runtime)
        running = [c.name for c in old.status() if c.running]
        if old.foreground.pid() is not None or running:
            raise SystemExit(
                f"a local stack named {name!r} is already running in {runtime} "
                f"({', '.join(running) or 'its up process'}); stop it with "
                f"`reconciler local down --name {name}`"
            )


def start_stack(name: str, repo: Path) -> Stack:
    """`reconciler local up REPO --name NAME` in the background, until it says it is ready.

    Its own process (as a user runs it): the node agent that plays kubelet and the daemons'
    reaper live there, not in the process whose scheduler is being measured.
    """
    runtime = default_runtime_dir(name)
    refuse_running(name, runtime)
    log = runtime / "logs" / "bench-local-up.log"
    started = time.monotonic()
    process = start_local_up(
        repo,
        runtime,
        ["--name", name],
        log,
        timeout=STACK_UP_TIMEOUT,
        stop_timeout=STACK_STOP_TIMEOUT,
    )
    stack = LocalStack.open(runtime)
    kubeconfig, url, key, user = scheduler_endpoints(stack)
    return Stack(
        name, runtime, process, log, time.monotonic() - started, kubeconfig, url, key, user
    )
