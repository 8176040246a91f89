"""Compile benchmark: time and peak memory of load -> compile -> render.

Not a test: run it by hand from the repo root and read the figures.

    python -m bench.compile_bench            # or: python bench/compile_bench.py
    python -m bench.compile_bench --repeat 3 --no-memory

A synthetic config repo is generated as YAML *text* in memory (so YAML parsing is part of the
measured load, as in real use) at 100, 1,000 and 10,000 Slurm nodes. Every node definition
lists 6 layers (node type, CUDA image, region, two generated repo layers, low-requests; `base`
is applied on top of these, as always) and runs 10 replicas; the 10,000-node row is the target's
workload (under 2 s): 1,000 node definitions x 6 layers, 10,000 Slurm nodes.

The machine this runs on is shared and noisy, so all sizes are timed side by side in the same
run, interleaved round-robin, and each figure is the best of --repeat runs; linearity is judged
from ratios between sizes rather than from absolute times. Peak memory is measured in a fresh
subprocess per size (separate from timing: tracemalloc slows Python down).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

if __package__ in (None, ""):  # `python bench/compile_bench.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.compile.memory import measure_memory, memory_worker
from bench.compile.pipeline import check, run_pipeline
from bench.compile.report import report
from bench.compile.workload import (
    FIXED,
    STAGES,
    WIDE,
    Workload,
    add_size_options,
    generate_repo,
    sized_workloads,
)
from bench.harness.timing import round_robin
from reconciler.config.files import read_library


def time_workloads(
    workloads: list[Workload], repeat: int, library: Mapping[str, str]
) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, list[float]]], dict[str, Any]]:
    repos = {w.label: generate_repo(w) for w in workloads}
    # Warm-up (imports, regex compiles, first-call costs) on the smallest non-empty size.
    warm = min((w for w in workloads if w.definitions), key=lambda w: w.nodes, default=workloads[0])
    run_pipeline(repos[warm.label], library)
    # Round-robin, rotating the start so no size always runs right after the largest.
    return round_robin(
        [(w.label, w) for w in workloads],
        repeat,
        STAGES,
        lambda w: run_pipeline(repos[w.label], library),
        check,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compile_bench",
        description="Time and peak memory of load -> compile -> render at several sizes.",
    )
    add_size_options(parser, "runs per size (best is reported)")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory subprocesses")
    parser.add_argument(
        "--no-extra",
        action="store_true",
        help="skip the supplementary rows (fixed cost; 1,000 definitions x 1 replica)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 if the 10,000-node target is missed"
    )
    parser.add_argument("--memory-worker", metavar="DEFSxREPLICAS", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_worker:
        memory_worker(args.memory_worker)
        return 0
    workloads = sized_workloads(parser, args)
    extra = [] if args.no_extra else [FIXED, WIDE]
    library = read_library()  # file I/O, outside the measured pipeline (like read_repo)
    wall, cpu, counts = time_workloads([*workloads, *extra], args.repeat, library)
    memory = None if args.no_memory else measure_memory([*workloads, *extra])
    met = report(workloads, extra, args.repeat, wall, cpu, counts, memory)
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
