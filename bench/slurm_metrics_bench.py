"""What the Slurm series of /metrics cost: one read of every node, every job and sdiag through
the REST client, the figures made of it, and a scrape of what is kept.

    python -m bench.slurm_metrics_bench                  # synthetic answers (about 1 minute)
    python -m bench.slurm_metrics_bench --stack DIR      # the real read on a running local stack

Each read is made both ways (--reads), interleaved, so the two compare within one run:
  summary   what the daemon reads: jobs as JobSummary, decoded as the answer arrives and
            reduced one by one (job_summaries())
  full      every job decoded whole into a SlurmJob (jobs(): the daemon's read before)

Synthetic (the default): slurmrestd v0.0.42 answers of 1,000 nodes and 5,000 jobs, then of
10,000 nodes and 50,000 jobs (bench/slurm_metrics/synthetic.py), served over a real socket on
127.0.0.1, read by the daemon's client, codec and figures, --repeat times each, interleaved;
best and median. Stages:
  requests  the client's GETs of ping, nodes, jobs and diag: the answer over loopback, its
            JSON decoded and checked (the client's observer times these); for `summary`,
            the jobs reduced to summaries as they are decoded
  codec     wire objects -> SlurmNode / SlurmJob / SlurmDiag (`summary`: no SlurmJob)
  figures   slurm_families(): the pure aggregation
  read      all three: what the daemon's reader pays every --slurm-metrics-interval
  scrape    generate_latest() of a registry serving the kept families: what a scrape pays
            (the median of 20 scrapes after the read)
and the peak RSS growth of one read (VmHWM reset just before). Ratios: the 10x row over the
1x row per stage (10.0 is linear), full over summary, and the read against the default 30 s
interval.

--stack DIR: a local stack of `reconciler local up --runtime-dir DIR` (24.11 or 22.05). Submits
--jobs held jobs (nothing runs), reads --rounds times each way, prints the medians per request
with the per-job cost of the job list, and cancels its jobs. slurmctld and slurmrestd run on the
same 2 cores as the benchmark, so their time is in these figures.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
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
from reconciler.slurm_metrics.figures import JobFields, SlurmReading, slurm_families
from reconciler.slurm_metrics.reader import SlurmView

STAGES = ("requests", "codec", "figures", "read", "scrape")
# How a read gets its jobs: the daemon's summaries, or every job whole (the read before them).
READS: dict[str, Callable[[SlurmRestApi], Sequence[JobFields]]] = {
    "summary": lambda api: api.job_summaries(),
    "full": lambda api: api.jobs().items,
}
INTERVAL = 30.0  # the default --slurm-metrics-interval and a usual scrape interval
SCRAPES = 20


class Timings:
    """The client's observer: seconds per request operation."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def __call__(self, operation: str, seconds: float, ok: bool) -> None:
        assert ok, f"{operation} failed"
        self.seconds[operation] += seconds


def read_once(
    api: SlurmRestApi, timings: Timings, read: str = "summary"
) -> tuple[dict[str, float], int, int]:
    """One read as the daemon's reader does it (jobs as READS[read] gets them), split into
    stages, then scrapes of what it kept (the median of SCRAPES, after a gc.collect(): the
    read's garbage is not a scrape's); and the series kept and the exposition's bytes."""
    timings.seconds.clear()
    started = time.perf_counter()
    api.ping()
    reading = SlurmReading(api.nodes().items, READS[read](api), api.diag())
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


Row = tuple[int, int, str]  # nodes, jobs, and how the jobs are read (READS)


def synthetic(args: argparse.Namespace) -> None:
    sizes = [(args.nodes // 10, args.jobs // 10), (args.nodes, args.jobs)]
    say(f"building the answers ({', '.join(f'{n:,} nodes / {j:,} jobs' for n, j in sizes)})")
    apis, urls = {}, {}
    servers = contextlib.ExitStack()
    for nodes, jobs in sizes:
        base = "/slurm/v0.0.42"
        bodies = {f"{base}/ping": PING, f"{base}/nodes": nodes_body(nodes),
                  f"{base}/jobs": jobs_body(jobs), f"{base}/diag": diag_body()}  # fmt: skip
        say(f"{nodes:,} nodes: {len(bodies[f'{base}/nodes']) / MIB:.1f} MiB of JSON; {jobs:,} "
            f"jobs: {len(bodies[f'{base}/jobs']) / MIB:.1f} MiB")  # fmt: skip
        urls[nodes, jobs] = url = servers.enter_context(serving(bodies))
        apis[nodes, jobs] = _client(url)
    rows = [(nodes, jobs, read) for nodes, jobs in sizes for read in args.reads]
    with servers:
        peaks = {row: _peak(urls[row[:2]], row[2]) for row in rows}
        times, split = _interleaved(rows, apis, args.repeat)
    print(f"Slurm series of /metrics, synthetic v0.0.42 answers; {machine_line()}")
    print(
        f"best of {args.repeat} (median), milliseconds; peak RSS growth of a process's first read"
    )
    head = f"{'nodes / jobs':<18}{'read':<8}" + "".join(f"{s:>19}" for s in STAGES)
    print_head(head + f"{'series':>8}{'peak RSS +':>12}")
    for row in rows:
        cells = "".join(
            f"{min(times[row][s]) * 1000:>9.1f} ({statistics.median(times[row][s]) * 1000:>7.1f})"
            for s in STAGES
        )
        series, _, grown = peaks[row]
        print(f"{row[0]:>6,} / {row[1]:>7,}  {row[2]:<8}{cells}{series:>8}{grown / MIB:>8.0f} MiB")
    print("\nratios")
    small, big = sizes
    for read in args.reads:
        ratios = ", ".join(
            f"{stage} {min(times[(*big, read)][stage]) / min(times[(*small, read)][stage]):.1f}"
            for stage in STAGES
        )
        print(f"  {read}: 10x row / 1x row: {ratios} (10.0: linear)")
    if len(args.reads) == 2:
        after, before = ((*big, read) for read in args.reads)
        ratios = ", ".join(
            f"{stage} {min(times[before][stage]) / min(times[after][stage]):.2f}"
            for stage in ("requests", "read")
        )
        print(f"  {big[0]:,} / {big[1]:,}: {before[2]} / {after[2]}: {ratios}, peak RSS growth "
              f"{peaks[before][2] / max(peaks[after][2], 1):.1f}")  # fmt: skip
    for read in args.reads:
        row = (*big, read)
        said = ", ".join(f"{op} {sec * 1000:.0f} ms" for op, sec in split[row].items())
        seconds = min(times[row]["read"])
        print(f"  {read}: requests of the last {big[0]:,} / {big[1]:,} read: {said}; the read "
              f"{seconds:.2f} s = {seconds / INTERVAL:.1%} of the {INTERVAL:g} s interval, "
              f"{seconds / big[1] * 1e6:.0f} us per job")  # fmt: skip
    row = (*big, args.reads[0])
    scrape = min(times[row]["scrape"])
    print(f"  scrape: {scrape * 1000:.1f} ms; exposition {peaks[row][1] / 1024:.1f} KiB")


def _client(url: str) -> tuple[SlurmRestClient, Timings]:
    timings = Timings()
    transport = Transport(url, _NoToken(), timeout=300)
    return SlurmRestClient(transport, codec_for("v0.0.42"), observe=timings), timings


def _interleaved(
    rows: list[Row], apis: dict[tuple[int, int], tuple[SlurmRestClient, Timings]], repeat: int
) -> tuple[dict[Row, dict[str, list[float]]], dict[Row, dict[str, float]]]:
    """Seconds per stage of each row's reads, and the requests of each row's last read."""
    times: dict[Row, dict[str, list[float]]] = {row: defaultdict(list) for row in rows}
    split: dict[Row, dict[str, float]] = {}
    for nodes, jobs, read in rows:  # warm-up
        read_once(*apis[nodes, jobs], read)
    for round_ in range(repeat):
        turn = round_ % len(rows)
        for row in rows[turn:] + rows[:turn]:
            gc.collect()
            api, timings = apis[row[:2]]
            stages, _, _ = read_once(api, timings, row[2])
            split[row] = dict(timings.seconds)
            for stage, seconds in stages.items():
                times[row][stage].append(seconds)
        say(f"round {round_ + 1}/{repeat} done")
    return times, split


def _peak(url: str, read: str) -> tuple[int, int, int]:
    """(series, exposition bytes, peak RSS growth) of one read, in a process of its own (the
    bench's own answers and earlier reads leave freed memory that would hide a read's peak)."""
    command = [sys.executable, "-m", "bench.slurm_metrics_bench", "--peak-of", url, "--reads", read]
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=True)
    series, size, grown = json.loads(done.stdout.splitlines()[-1])
    return series, size, grown


def peak_here(url: str, read: str) -> None:
    """--peak-of: a process's first read of URL's answers (after a ping: the connection and
    the imports are not the read's), its peak RSS growth as a JSON line."""
    api, timings = _client(url)
    api.ping()
    gc.collect()
    before = own_rss()
    reset_peak_rss()
    _, series, size = read_once(api, timings, read)
    after = own_rss()
    grown = (after["VmHWM"] - before["VmRSS"]) if before and after else 0
    print(json.dumps([series, size, grown]))


class _NoToken:
    user = "bench"

    def token(self) -> str:
        return "not-checked"


def on_stack(args: argparse.Namespace) -> None:
    from reconciler.local.slurm.cluster import current_user
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
        reads: dict[str, list[float]] = defaultdict(list)
        figures: list[float] = []
        for read in args.reads:  # warm-up
            read_once(api, timings, read)
        for round_ in range(args.rounds):
            turn = round_ % len(args.reads)
            for read in args.reads[turn:] + args.reads[:turn]:
                stages, _, _ = read_once(api, timings, read)
                reads[read].append(stages["read"])
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
    print(f"medians of {args.rounds} reads each way ({', '.join(args.reads)}), milliseconds")
    for operation, seconds in per_op.items():
        print(f"  GET {operation:<13} {statistics.median(seconds) * 1000:9.1f}")
    print(f"  figures           {statistics.median(figures) * 1000:9.1f}")
    for read, seconds in reads.items():
        median = statistics.median(seconds)
        share = f"{median / INTERVAL:.2%} of {INTERVAL:g} s"
        print(f"  read ({read:<7})    {median * 1000:9.1f}  ({share})")
    for operation in ("job_summaries", "jobs"):
        if operation in per_op:
            per_job = statistics.median(per_op[operation]) * 1000 / jobs
            print(f"  GET {operation} per job: {per_job:.3f} ms; at that rate 50,000 jobs take "
                  f"{per_job * 50:.1f} s (an extrapolation, not a measurement)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000, help="the big row's nodes")
    parser.add_argument("--jobs", type=int, default=50_000,
                        help="the big row's jobs (--stack: held jobs to submit, 1000)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, help="reads per row (3)")
    parser.add_argument("--stack", type=Path, help="a running local stack's runtime dir")
    parser.add_argument("--rounds", type=int, default=10, help="with --stack: reads (10)")
    parser.add_argument("--reads", type=lambda v: v.split(","), default=list(READS),
                        help="how jobs are read, comma-separated: summary (the daemon's), full "
                        "(every job whole, as read before summaries); both by default")  # fmt: skip
    parser.add_argument("--peak-of", help=argparse.SUPPRESS)  # a URL: one read's peak (_peak)
    args = parser.parse_args()
    if unknown := set(args.reads) - set(READS):
        parser.error(f"--reads: {', '.join(sorted(unknown))}? (summary, full)")
    if args.peak_of:
        peak_here(args.peak_of, args.reads[0])
    elif args.stack:
        if "--jobs" not in sys.argv:
            args.jobs = 1000
        on_stack(args)
    else:
        synthetic(args)


if __name__ == "__main__":
    main()
