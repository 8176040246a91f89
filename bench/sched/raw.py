"""Phase 1 (and 7): raw slurmrestd, the baseline: batch jobs submitted, run and cancelled."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

from bench.harness.procs import JobMemory, job_memory, mem_available
from bench.harness.report import say
from bench.harness.serve import serving
from bench.harness.stack import Stack
from bench.harness.timing import wait_until
from bench.sched.common import HOLDING, RAW_CPUS, RAW_MEMORY_MB, RAW_SCRIPT, SETTLE_TIMEOUT
from reconciler import wellknown as wk
from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.adapters.slurm.model import JobSpec, SlurmRestApi
from reconciler.scheduler.decide.placeholder import JOB_PATH, PLACEHOLDER_SCRIPT
from reconciler.scheduler.starts import READERS


@dataclass
class RawResult:
    count: int
    nodes: int
    like_placeholders: bool  # the jobs ran the placeholder script against a stub hooks API
    submit_seconds: float
    per_submit: list[float]
    all_running_after: float | None
    processes_after: float | None  # every job's slurmstepd, sh and sleep exist
    memory: JobMemory | None
    mem_drop: int
    cancel_seconds: float
    settled_after: float | None
    # `GET /job/<id>` of every job, READERS at a time, once all run: what one job's read costs
    # while slurmctld starts nothing (the start watch reads each started job so: starts.py)
    reads_per_second: float | None = None

    @property
    def rate(self) -> float:
        return self.count / self.submit_seconds

    @property
    def running_rate(self) -> float | None:
        """Jobs RUNNING per second: count / (first submit -> all RUNNING). A bound Pod needs
        its job started, so this is the raw figure for a whole Pod."""
        return self.count / self.all_running_after if self.all_running_after else None


def raw_spec(index: int, nodes: int = 1, hooks_url: str | None = None) -> JobSpec:
    """A plain `sleep` job; with `hooks_url`, one that runs the placeholder script against
    it instead, so that its processes cost what a placeholder's do (like for like)."""
    environment = {"PATH": JOB_PATH}
    if hooks_url is not None:
        environment |= {
            wk.ENV_HOOKS_URL: hooks_url, wk.ENV_POD_UID: f"raw-{index}",
            wk.ENV_POD: f"bench/raw-{index}", wk.ENV_HOOK_TOKEN: "raw",
        }  # fmt: skip
    return JobSpec(
        script=RAW_SCRIPT if hooks_url is None else PLACEHOLDER_SCRIPT,
        environment=environment,
        name=f"bench-raw-{index:04d}" if nodes == 1 else f"bench-raw{nodes}n-{index:04d}",
        nodes=nodes,
        tasks=nodes,
        cpus_per_task=RAW_CPUS,
        memory_per_node=RAW_MEMORY_MB,
        standard_output="/dev/null",
        current_working_directory="/",
    )


class _StubHooks(BaseHTTPRequestHandler):
    """Answers a placeholder script as the scheduler would on the happy path: `started` ok,
    `signalled` gone (its Pod is gone)."""

    def do_POST(self) -> None:
        answer = b"gone" if "/signalled" in self.path else b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        pass


def stub_hooks() -> contextlib.AbstractContextManager[str]:
    """A hooks API on 127.0.0.1 that answers every call at once; yields its URL."""
    return serving(_StubHooks, "bench-stub-hooks")


def run_raw(
    stack: Stack, count: int, submitters: int, nodes: int = 1, *, like_placeholders: bool = False
) -> RawResult:
    """COUNT jobs of NODES nodes (one task, 1 CPU, per node; the script runs on the first);
    `like_placeholders`: running the placeholder script against a stub hooks API."""
    if not like_placeholders:
        return _run_raw(stack, count, submitters, nodes, None)
    with stub_hooks() as url:
        return _run_raw(stack, count, submitters, nodes, url)


def _run_raw(
    stack: Stack, count: int, submitters: int, nodes: int, hooks_url: str | None
) -> RawResult:
    api = connect(stack.rest_url, MintedTokens(stack.jwt_key, stack.user))
    specs = [raw_spec(i, nodes, hooks_url) for i in range(count)]
    before = mem_available()
    try:
        api.ping()
        per_submit: list[float] = []

        def submit(spec: JobSpec) -> int:
            t0 = time.perf_counter()
            job_id = api.submit(spec).job_id
            per_submit.append(time.perf_counter() - t0)
            return job_id

        what = "placeholder-script" if hooks_url else "sleep"
        say(f"raw: submitting {count} {what} jobs of {nodes} nodes with {submitters} submitters")
        started = time.perf_counter()
        with ThreadPoolExecutor(submitters, thread_name_prefix="bench-raw") as pool:
            ids = list(pool.map(submit, specs))
        submit_seconds = time.perf_counter() - started
        wanted = set(ids)

        def states() -> Counter[str]:
            return Counter(j.state for j in api.jobs().items if j.job_id in wanted)

        running = wait_until(lambda: states()["RUNNING"] == count, timeout=SETTLE_TIMEOUT)
        all_running = time.perf_counter() - started if running else None
        if not running:
            say(f"raw: not all running after {SETTLE_TIMEOUT:.0f} s: {dict(states())}")
        # RUNNING is slurmctld's word; the processes (slurmstepd, sh, sleep) come after it.
        reaper = stack.process.pid
        up = wait_until(
            lambda: job_memory(reaper, pss=False).processes >= 3 * count, SETTLE_TIMEOUT, 0.5
        )
        processes_after = time.perf_counter() - started if up else None
        memory = job_memory(reaper)
        mem_drop = before - mem_available()
        reads_per_second = _read_each(api, ids) if running else None

        say(f"raw: cancelling {count} jobs")
        started = time.perf_counter()
        with ThreadPoolExecutor(submitters, thread_name_prefix="bench-raw") as pool:
            list(pool.map(api.cancel, ids))
        cancel_seconds = time.perf_counter() - started

        def settled() -> bool:
            holding = sum(n for s, n in states().items() if s in HOLDING)
            return holding == 0 and all(n.alloc_cpus == 0 for n in api.nodes().items)

        done = wait_until(settled, timeout=SETTLE_TIMEOUT)
        settled_after = time.perf_counter() - started if done else None
        if not done:
            raise SystemExit(f"raw jobs still hold resources {SETTLE_TIMEOUT:.0f} s after cancel")
    finally:
        api.close()
    return RawResult(count, nodes, hooks_url is not None, submit_seconds, per_submit,
                     all_running, processes_after, memory, mem_drop, cancel_seconds,
                     settled_after, reads_per_second)  # fmt: skip


def _read_each(api: SlurmRestApi, ids: list[int]) -> float:
    """Jobs read per second, one `GET /job/<id>` each, READERS in flight, as the start watch
    reads the jobs it finds started."""
    say(f"raw: reading {len(ids)} jobs one GET each, {READERS} at a time")
    began = time.perf_counter()
    with ThreadPoolExecutor(READERS, thread_name_prefix="bench-raw-read") as pool:
        list(pool.map(api.job, ids))
    return len(ids) / (time.perf_counter() - began)
