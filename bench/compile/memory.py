"""Peak memory of one run, in a fresh subprocess per size (tracemalloc and peak RSS)."""

from __future__ import annotations

import gc
import json
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

from bench.compile.pipeline import check, run_pipeline
from bench.compile.workload import Workload, generate_repo
from bench.harness.procs import own_rss, reset_peak_rss
from reconciler.config.files import read_library

SCRIPT = Path(__file__).resolve().parent.parent / "compile_bench.py"  # runs memory_worker


def memory_worker(spec: str) -> None:
    """Run in a fresh interpreter: peak memory of one pipeline run at one size, as JSON."""
    definitions, replicas = (int(x) for x in spec.split("x"))
    workload = Workload(spec, definitions, replicas)
    library = read_library()
    # Warm up on a tiny repo so import-time and first-call allocations are not charged.
    run_pipeline(generate_repo(Workload("warm", 2, 1)), library)
    files = generate_repo(workload)
    gc.collect()
    # Pass 1, no tracing: growth of the peak RSS over the RSS just before the run (includes
    # libyaml's C allocations and allocator overhead, which tracemalloc does not see). Uses
    # /proc VmHWM after resetting it: ru_maxrss cannot be reset and, after fork+exec, starts
    # at the parent's RSS, which would hide the growth.
    status = own_rss()
    if status is not None and reset_peak_rss():
        method, rss_before = "VmHWM", status["VmRSS"]
        _, _, result = run_pipeline(files, library)
        rss_peak = own_rss()["VmHWM"]  # type: ignore[index]
    else:
        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, else KiB
        method = "ru_maxrss"
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
        _, _, result = run_pipeline(files, library)
        rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    check(workload, result)
    del result
    gc.collect()
    # Pass 2, traced: peak of Python allocations made by load + compile + render, with the
    # input text already allocated (not counted) and the outputs alive at the end (counted).
    tracemalloc.start()
    _, _, _result = run_pipeline(files, library)
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    json.dump(
        {
            "traced_peak": peak,
            "traced_retained": retained,
            "rss_growth": max(rss_peak - rss_before, 0),
            "rss_peak": rss_peak,
            "rss_method": method,
            "input_bytes": sum(len(t) for t in files.values()),
        },
        sys.stdout,
    )


def measure_memory(workloads: list[Workload]) -> dict[str, dict[str, int]]:
    out = {}
    for w in workloads:
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), "--memory-worker", w.spec],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"memory worker for {w.label} failed:\n{proc.stderr}")
        out[w.label] = json.loads(proc.stdout)
    return out
