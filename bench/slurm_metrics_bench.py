"""What the Slurm series of /metrics cost: one read of every node, every job and sdiag through
the REST client, the figures made of it, and a scrape of what is kept.

    python -m bench.slurm_metrics_bench                  # synthetic answers (about 1 minute)
    python -m bench.slurm_metrics_bench --stack DIR      # the real read on a running local stack

Synthetic (the default): slurmrestd v0.0.42 answers of 1,000 nodes and 5,000 jobs, then of
10,000 nodes and 50,000 jobs (bench/slurm_metrics/synthetic.py), served over a real socket on
127.0.0.1, read by the daemon's client, codec and figures, --repeat times each, interleaved;
best and median. Stages:
  requests  the client's GETs of ping, nodes, jobs and diag: the answer over loopback, its
            JSON decoded and checked (the client's observer times these)
  codec     wire objects -> SlurmNode / SlurmJob / SlurmDiag
  figures   slurm_families(): the pure aggregation
  read      all three: what the daemon's reader pays every --slurm-metrics-interval
  scrape    generate_latest() of a registry serving the kept families: what a scrape pays
            (the median of 20 scrapes after the read)
and the peak RSS growth of one read (VmHWM reset just before). Ratios: the 10x row over the
1x row per stage (10.0 is linear), and the read against the default 30 s interval.

--stack DIR: a local stack of `reconciler local up --runtime-dir DIR` (24.11 or 22.05). Submits
--jobs held jobs (nothing runs), reads --rounds times, prints the medians per request with
the per-job cost of the job list, and cancels its jobs. slurmctld and slurmrestd run on the
same 2 cores as the benchmark, so their time is in these figures.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # `python bench/slurm_metrics_bench.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from prometheus_client import CollectorRegistry, generate_latest

from bench.harness.procs import MIB, own_rss, reset_peak_rss
from bench.harness.report import machine_line, print_head, say
from bench.slurm_metrics.synthetic import PING, diag_body, jobs_body, nodes_body, serving
from reconciler.adapters.slurm.client import SlurmRestClient, connect
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.adapters.slurm.model import JobSpec, SlurmRestApi
from reconciler.adapters.slurm.transport import Transport
from reconciler.adapters.slurm.versions import codec_for
from reconciler.slurm_metrics.collector import SlurmCollector
from reconciler.slurm_metrics.figures import SlurmReading, slurm_families
from reconciler.slurm_metrics.reader import SlurmView

STAGES = ("requests", "codec", "figures", "read", "scrape")
INTERVAL = 30.0  # the default --slurm-metrics-interval and a usual scrape interval
SCRAPES = 20


class Timings:
    """The client's observer: seconds per request operation."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def __call__(self, operation: str, seconds: float, ok: bool) -> None:
        assert ok, f"{operation} failed"
        self.seconds[operation] += seconds


def read_once(api: SlurmRestApi, timings: Timings) -> tuple[dict[str, float], int, int]:
    """One read as the daemon's reader does it, split into stages, then scrapes of what it
    kept (the median of SCRAPES, after a gc.collect(): the read's garbage is not a scrape's);
    and the series kept and the exposition's bytes."""
    timings.seconds.clear()
    started = time.perf_counter()
    api.ping()
    reading = SlurmReading(api.nodes().items, api.jobs().items, api.diag())
    decoded = time.perf_counter()
    families = slurm_families(reading)
    done = time.perf_counter()
    del reading
    gc.collect()
    registry = CollectorRegistry()
    view = SlurmView(families, time.time(), done - started, True, 0, started)
    registry.register(SlurmCollector(lambda: view))
    scrapes = []
    for _ in range(SCRAPES):
        begin = time.perf_counter()
        text = generate_latest(registry)
        scrapes.append(time.perf_counter() - begin)
    requests = sum(timings.seconds.values())
    stages = {
        "requests": requests, "codec": decoded - started - requests,
        "figures": done - decoded, "read": done - started, "scrape": statistics.median(scrapes),
    }  # fmt: skip
    return stages, sum(len(f.samples) for f in families), len(text)


def synthetic(args: argparse.Namespace) -> None:
    rows = [(args.nodes // 10, args.jobs // 10), (args.nodes, args.jobs)]
    say(f"building the answers ({', '.join(f'{n:,} nodes / {j:,} jobs' for n, j in rows)})")
    apis = {}
    servers = contextlib.ExitStack()
    for nodes, jobs in rows:
        base = "/slurm/v0.0.42"
        bodies = {f"{base}/ping": PING, f"{base}/nodes": nodes_body(nodes),
                  f"{base}/jobs": jobs_body(jobs), f"{base}/diag": diag_body()}  # fmt: skip
        say(f"{nodes:,} nodes: {len(bodies[f'{base}/nodes']) / MIB:.1f} MiB of JSON; {jobs:,} "
            f"jobs: {len(bodies[f'{base}/jobs']) / MIB:.1f} MiB")  # fmt: skip
        url = servers.enter_context(serving(bodies))
        timings = Timings()
        transport = Transport(url, _NoToken(), timeout=300)
        api = SlurmRestClient(transport, codec_for("v0.0.42"), observe=timings)
        apis[nodes, jobs] = (api, timings)
    with servers:
        times = _interleaved(rows, apis, args.repeat)
        peaks = {row: _peak(lambda a=apis[row]: read_once(*a)) for row in rows}
    print(f"Slurm series of /metrics, synthetic v0.0.42 answers; {machine_line()}")
    print(f"best of {args.repeat} (median), milliseconds")
    head = f"{'nodes / jobs':<18}" + "".join(f"{s:>19}" for s in STAGES)
    print_head(head + f"{'series':>8}{'peak RSS +':>12}")
    for row in rows:
        cells = "".join(
            f"{min(times[row][s]) * 1000:>9.1f} ({statistics.median(times[row][s]) * 1000:>7.1f})"
            for s in STAGES
        )
        series, _, grown = peaks[row]
        print(f"{row[0]:>6,} / {row[1]:>7,}  {cells}{series:>8}{grown / MIB:>8.0f} MiB")
    small, big = rows
    print("\nratios")
    for stage in STAGES:
        ratio = min(times[big][stage]) / min(times[small][stage])
        print(f"  {stage:<8} 10x row / 1x row = {ratio:5.1f}  (10.0: linear)")
    split = ", ".join(f"{op} {sec * 1000:.0f} ms" for op, sec in apis[big][1].seconds.items())
    print(f"  requests of the last {big[0]:,} / {big[1]:,} read: {split}")
    read = min(times[big]["read"])
    print(f"  read of {big[0]:,} nodes / {big[1]:,} jobs: {read:.2f} s = {read / INTERVAL:.1%} "
          f"of the {INTERVAL:g} s interval; per job {read / big[1] * 1e6:.0f} us")  # fmt: skip
    scrape = min(times[big]["scrape"])
    print(f"  scrape: {scrape * 1000:.1f} ms, {read / scrape:.0f}x less than the read it serves; "
          f"exposition {peaks[big][1] / 1024:.1f} KiB")  # fmt: skip


def _interleaved(
    rows: list[tuple[int, int]], apis: dict, repeat: int
) -> dict[tuple[int, int], dict[str, list[float]]]:
    times: dict[tuple[int, int], dict[str, list[float]]] = {r: defaultdict(list) for r in rows}
    for row in rows:  # warm-up
        read_once(*apis[row])
    for round_ in range(repeat):
        for row in rows[round_ % 2 :] + rows[: round_ % 2]:
            gc.collect()
            stages, _, _ = read_once(*apis[row])
            for stage, seconds in stages.items():
                times[row][stage].append(seconds)
        say(f"round {round_ + 1}/{repeat} done")
    return times


def _peak(read: Callable[[], tuple[dict[str, float], int, int]]) -> tuple[int, int, int]:
    """(series, exposition bytes, peak RSS growth) of one read."""
    gc.collect()
    before = own_rss()
    reset_peak_rss()
    _, series, size = read()
    after = own_rss()
    grown = (after["VmHWM"] - before["VmRSS"]) if before and after else 0
    return series, size, grown


class _NoToken:
    user = "bench"

    def token(self) -> str:
        return "not-checked"


def on_stack(args: argparse.Namespace) -> None:
    from reconciler.local.slurm import current_user
    from reconciler.local.stack import LocalStack

    slurm = LocalStack.open(args.stack).slurm
    assert slurm is not None, f"no Slurm in the stack of {args.stack}"
    timings = Timings()
    api = connect(slurm.rest_url(), MintedTokens(slurm.paths.jwt_key, current_user()),
                  timeout=300, observe=timings)  # fmt: skip
    spec = JobSpec(script="#!/bin/sh\ntrue\n", environment={"PATH": "/bin"}, hold=True,
                   standard_output="/dev/null", current_working_directory="/tmp")  # fmt: skip
    say(f"submitting {args.jobs} held jobs")
    ids = [api.submit(spec).job_id for _ in range(args.jobs)]
    try:
        per_op: dict[str, list[float]] = defaultdict(list)
        reads: list[float] = []
        figures: list[float] = []
        read_once(api, timings)  # warm-up
        for _ in range(args.rounds):
            stages, _, _ = read_once(api, timings)
            reads.append(stages["read"])
            figures.append(stages["figures"])
            for operation, seconds in timings.seconds.items():
                per_op[operation].append(seconds)
        jobs = len(api.jobs().items)
        nodes = len(api.nodes().items)
    finally:
        for job_id in ids:
            api.cancel(job_id)
    print(f"Slurm series of /metrics, the real read: Slurm {api.slurm_version}, slurmrestd "
          f"{api.api_version}, {nodes} nodes, {jobs} jobs; {machine_line()}")  # fmt: skip
    print(f"medians of {args.rounds} reads, milliseconds")
    for operation, seconds in per_op.items():
        print(f"  GET {operation:<6} {statistics.median(seconds) * 1000:9.1f}")
    read, jobs_ms = statistics.median(reads), statistics.median(per_op["jobs"]) * 1000
    print(f"  figures    {statistics.median(figures) * 1000:9.1f}")
    print(f"  read       {read * 1000:9.1f}  ({read / INTERVAL:.2%} of {INTERVAL:g} s)")
    print(f"  GET jobs per job: {jobs_ms / jobs:.3f} ms; at that rate 50,000 jobs take "
          f"{jobs_ms / jobs * 50:.1f} s (an extrapolation, not a measurement)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000, help="the big row's nodes")
    parser.add_argument("--jobs", type=int, default=50_000,
                        help="the big row's jobs (--stack: held jobs to submit, 1000)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, help="reads per row (3)")
    parser.add_argument("--stack", type=Path, help="a running local stack's runtime dir")
    parser.add_argument("--rounds", type=int, default=10, help="with --stack: reads (10)")
    args = parser.parse_args()
    if args.stack:
        if "--jobs" not in sys.argv:
            args.jobs = 1000
        on_stack(args)
    else:
        synthetic(args)


if __name__ == "__main__":
    main()
