"""Compile benchmark (issue 2): time and peak memory of load -> compile -> render.

Not a test: run it by hand from the repo root and read the figures.

    python -m bench.compile_bench            # or: python bench/compile_bench.py
    python -m bench.compile_bench --repeat 3 --no-memory

A synthetic config repo is generated as YAML *text* in memory (so YAML parsing is part of the
measured load, as in real use) at 100, 1,000 and 10,000 Slurm nodes. Every node definition
lists 6 layers (node type, CUDA image, region, two generated repo layers, low-requests; `base`
is applied on top of these, as always) and runs 10 replicas; the 10,000-node row is the issue's
workload: 1,000 node definitions x 6 layers, 10,000 Slurm nodes.

The machine this runs on is shared and noisy, so all sizes are timed side by side in the same
run, interleaved round-robin, and each figure is the best of --repeat runs; linearity is judged
from ratios between sizes rather than from absolute times. Peak memory is measured in a fresh
subprocess per size (separate from timing: tracemalloc slows Python down).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tracemalloc
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

if __package__ in (None, ""):  # `python bench/compile_bench.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness.procs import own_rss, reset_peak_rss
from bench.harness.report import machine_line, mib, ms, print_head
from bench.harness.timing import round_robin, stage_times, stamp
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.yamlout import dump_stream
from reconciler.config.files import read_library
from reconciler.config.repo import load_config

TARGET_NODES = 10_000
TARGET_SECONDS = 2.0
REPLICAS = 10
STAGES = ("load", "compile", "render", "total")

# Shipped library layers the generated definitions cycle through.
NODE_TYPES = (
    "h100", "a100", "a40", "a6000", "a5000", "a4000", "rtx5000", "rtx4000", "cpu-epyc", "cpu-xeon",
)  # fmt: skip
CUDA = ("cu117", "cu118", "cu120", "cu121", "cu122", "cu124")
REGIONS = ("las1", "lga1", "ord1")
# Generated repo layers (compute-defs/generated.yaml): the same file at every size.
TEAM_LAYERS = 50
TUNE_LAYERS = 50

PARTITIONS = "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP"

VALUES_HEADER = f"""\
slurmConfig:
  killWait: 30
  waitTime: 0
  defMemPerCPU: 1024
  selectTypeParameters: CR_Core_Memory
  slurmd:
    prolog: |
      #!/usr/bin/env bash
      exit 0
  extraConfig: |
    SchedulerParameters=sched_interval=2,bf_interval=2
compute:
  mounts:
    - name: /mnt/data
      pvc: data-nvme
  s6:
    motd:
      type: oneshot
      script: |
        #!/usr/bin/env bash
        echo "managed by reconciler" > /etc/motd
  partitions: "{PARTITIONS}"
"""


# --------------------------------------------------------------------------- workload


@dataclass(frozen=True)
class Workload:
    label: str
    definitions: int
    replicas: int
    note: str = ""

    @property
    def nodes(self) -> int:
        return self.definitions * self.replicas

    @property
    def spec(self) -> str:
        return f"{self.definitions}x{self.replicas}"


def main_workloads(sizes: list[int]) -> list[Workload]:
    out = []
    for nodes in sizes:
        if nodes % REPLICAS:
            raise SystemExit(f"size {nodes} is not a multiple of {REPLICAS} replicas")
        out.append(Workload(f"{nodes:,}", nodes // REPLICAS, REPLICAS))
    return out


FIXED = Workload("fixed", 0, REPLICAS, "no node definitions: library + compute-defs + values")
WIDE = Workload("1,000 x1", 1000, 1, "1,000 definitions x 1 replica (cost per definition)")


def generated_layers() -> str:
    parts = []
    for i in range(TEAM_LAYERS):
        parts.append(
            f"""\
team-{i:02d}:
  features: [team{i:02d}]
  labels:
    example.com/team: team-{i:02d}
  env:
    - name: TEAM
      value: team-{i:02d}
    - name: COST_CENTER
      value: "cc-{i * 7:04d}"
"""
        )
    for i in range(TUNE_LAYERS):
        parts.append(
            f"""\
tune-{i:02d}:
  features: [tune{i:02d}]
  annotations:
    example.com/tuning: profile-{i:02d}
  env:
    - name: NCCL_DEBUG
      value: WARN
    - name: TUNE_PROFILE
      value: "{i}"
  resources:
    requests:
      cpu: "{4 + i % 8}"
      memory: {16 + i}Gi
"""
        )
    return "".join(parts)


def definition_layers(i: int) -> list[str]:
    return [
        NODE_TYPES[i % len(NODE_TYPES)],
        CUDA[i % len(CUDA)],
        REGIONS[i % len(REGIONS)],
        f"team-{i % TEAM_LAYERS:02d}",
        f"tune-{(i // 3) % TUNE_LAYERS:02d}",
        "low-requests",
    ]


def values_yaml(workload: Workload) -> str:
    if workload.definitions == 0:
        return VALUES_HEADER + "  nodes: {}\n"
    parts = [VALUES_HEADER, "  nodes:\n"]
    for i in range(workload.definitions):
        parts.append(
            f"""\
    ns-{i:04d}:
      enabled: true
      replicas: {workload.replicas}
      definitions: [{", ".join(definition_layers(i))}]
      labels:
        example.com/nodeset: ns-{i:04d}
      env:
        - name: NODESET
          value: ns-{i:04d}
"""
        )
    return "".join(parts)


def generate_repo(workload: Workload) -> dict[str, str]:
    """Repo-relative path -> YAML text, as `reconciler.config.files.read_repo` would return."""
    return {
        "values.yaml": values_yaml(workload),
        "compute-defs/generated.yaml": generated_layers(),
    }


# --------------------------------------------------------------------------- one run


@dataclass
class Result:
    state: DesiredState
    stream: str
    slurm_conf: str


def run_pipeline(
    files: Mapping[str, str], library: Mapping[str, str]
) -> tuple[dict[str, float], dict[str, float], Result]:
    """load_config -> compile_desired_state -> render; stage times (wall, process CPU)."""
    t0 = stamp()
    config = load_config(files, library)
    t1 = stamp()
    state = compile_desired_state(config)
    t2 = stamp()
    # What `reconciler render` prints, plus slurm.conf (already rendered during compile, and
    # also embedded in the ConfigMap that dump_stream serialises).
    stream = dump_stream(state.kube_objects)
    slurm_conf = state.slurm_conf
    t3 = stamp()
    wall, cpu = stage_times(STAGES, (t0, t1, t2, t3))
    return wall, cpu, Result(state, stream, slurm_conf)


def check(workload: Workload, result: Result) -> dict[str, int]:
    """Refuse to report figures for output that is not what the workload asked for."""
    state = result.state
    statefulsets = [  # the node sets' (not the login StatefulSet every config renders)
        o
        for o in state.kube_objects
        if o["kind"] == "StatefulSet"
        and o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "compute"
    ]
    replicas = sum(o["spec"]["replicas"] for o in statefulsets)
    node_lines = [ln for ln in result.slurm_conf.splitlines() if ln.startswith("NodeName=")]
    counts = {
        "statefulsets": len(statefulsets),
        "replicas": replicas,
        "slurm_nodes": len(state.slurm_nodes),
        "nodename_lines": len(node_lines),
        "documents": ("\n" + result.stream).count("\n---\n"),
        "stream_kib": len(result.stream) // 1024,
        "warnings": len(state.warnings),
    }
    want = {
        "statefulsets": workload.definitions,
        "replicas": workload.nodes,
        "slurm_nodes": workload.nodes,
        "nodename_lines": workload.definitions,
        "documents": len(state.kube_objects),
        "warnings": 0,
    }
    problems = [f"{k}={counts[k]}, want {v}" for k, v in want.items() if counts[k] != v]
    if workload.definitions:
        # Every one of the 6 layers (and the definition's own keys) reached both outputs.
        sample = next(o for o in statefulsets if o["metadata"]["name"].endswith("-ns-0000"))
        text = yaml.safe_dump(sample)
        markers = ("H100_NVLINK_80GB", "cu117-extras", "LAS1", "team-00", "profile-00")
        for marker in (*markers, "cpu: '10'", "NODESET"):
            if marker not in text:
                problems.append(f"{marker!r} missing from StatefulSet slurm-ns-0000")
        line = next((ln for ln in node_lines if ln.startswith("NodeName=slurm-ns-0000-")), "")
        if "Feature=ns-0000,gpu,infiniband,sharp,cu117,las1,team00,tune00" not in line:
            problems.append(f"slurm.conf line for ns-0000 is {line!r}")
    if problems:
        raise SystemExit(
            f"benchmark output check failed for {workload.label}: " + "; ".join(problems)
        )
    return counts


# --------------------------------------------------------------------------- timing


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


# --------------------------------------------------------------------------- memory


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
            [sys.executable, str(Path(__file__).resolve()), "--memory-worker", w.spec],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"memory worker for {w.label} failed:\n{proc.stderr}")
        out[w.label] = json.loads(proc.stdout)
    return out


# --------------------------------------------------------------------------- report


def report(
    workloads: list[Workload],
    extra: list[Workload],
    repeat: int,
    wall: dict[str, dict[str, list[float]]],
    cpu: dict[str, dict[str, list[float]]],
    counts: dict[str, Any],
    memory: dict[str, dict[str, int]] | None,
) -> bool:
    libyaml = bool(getattr(yaml, "__with_libyaml__", False))
    print("reconciler compile benchmark")
    libyaml_text = "yes" if libyaml else "NO - pure Python, much slower"
    print(f"  {machine_line(after_python=f', PyYAML {yaml.__version__} (libyaml {libyaml_text})')}")
    print(
        f"  each node definition: {REPLICAS} replicas (except where noted), 6 layers "
        "[node type, cuda, region, team-NN, tune-NN, low-requests] + base, own labels/env"
    )
    print(
        f"  compute-defs/generated.yaml: {TEAM_LAYERS + TUNE_LAYERS} repo layers, same at every "
        "size; partitions: one line, Nodes=ALL"
    )
    print(
        f"  times: best of {repeat} runs (sizes interleaved round-robin), wall clock "
        "(perf_counter); 'cpu' = process CPU time (process_time) of the same runs, best of them"
    )
    print(
        "  load = load_config (YAML parse + checks + merge); compile = compile_desired_state "
        "(incl. slurm.conf); render = dump_stream (YAML stream of all objects)"
    )
    print()
    rows = [*workloads, *extra]
    head = (
        f"{'row':<10} {'defs':>5} {'repl':>4} {'nodes':>6} {'objs':>5}"
        f" |{'load':>8} {'compile':>8} {'render':>8} {'total':>8}"
        f" | {'median':>8} {'cpu':>8}   (ms)"
    )
    print_head(head)
    for w in rows:
        best = {s: min(wall[w.label][s]) for s in STAGES}
        print(
            f"{w.label:<10} {w.definitions:>5} {w.replicas if w.definitions else '-':>4} "
            f"{w.nodes:>6} "
            f"{counts[w.label]['statefulsets']:>5}"
            f" |{ms(best['load'])} {ms(best['compile'])} {ms(best['render'])} {ms(best['total'])}"
            f" | {ms(statistics.median(wall[w.label]['total']))} "
            f"{ms(min(cpu[w.label]['total']))}" + (f"   {w.note}" if w.note else "")
        )
    print(
        "  (objs = StatefulSets; checked: StatefulSets, replicas, state.slurm_nodes, NodeName= "
        "lines and YAML documents all match the workload)"
    )
    print()

    # Linearity from ratios.
    sized = [w for w in workloads if w.nodes]
    fixed = min(wall[FIXED.label]["total"]) if FIXED.label in wall else 0.0
    base = sized[0]
    base_total = min(wall[base.label]["total"])
    print(
        "linearity (wall, best total; 'marginal' = (total - fixed row) / nodes, fixed row = "
        + (f"{ms(fixed).strip()} ms)" if FIXED.label in wall else "not run: --no-extra)")
    )
    print(
        f"{'nodes':>7} {'us/node':>9} {'vs ' + base.label:>9} {'marginal':>10} "
        f"{'vs ' + base.label:>9} {'cpu us/node':>12} {'vs ' + base.label:>9}"
    )
    base_cpu = min(cpu[base.label]["total"])
    for w in sized:
        total = min(wall[w.label]["total"])
        total_cpu = min(cpu[w.label]["total"])
        per = total / w.nodes
        marg = (total - fixed) / w.nodes
        base_marg = (base_total - fixed) / base.nodes
        per_cpu = total_cpu / w.nodes
        print(
            f"{w.nodes:>7,} {per * 1e6:>9.1f} {per / (base_total / base.nodes):>9.2f} "
            f"{marg * 1e6:>10.1f} {marg / base_marg:>9.2f} "
            f"{per_cpu * 1e6:>12.1f} {per_cpu / (base_cpu / base.nodes):>9.2f}"
        )
    by_nodes = {w.nodes: w for w in sized}
    if 1_000 in by_nodes and 10_000 in by_nodes:
        for stage in STAGES:
            big, small = by_nodes[10_000].label, by_nodes[1_000].label
            ratio = min(wall[big][stage]) / min(wall[small][stage])
            ratio_cpu = min(cpu[big][stage]) / min(cpu[small][stage])
            print(
                f"  time(10k)/time(1k) {stage:<8} {ratio:5.2f} wall, {ratio_cpu:5.2f} cpu"
                "   (10.0 = linear)"
            )
    print()

    if memory is not None:
        method = memory[base.label]["rss_method"]
        print("peak memory: fresh subprocess per size, one untimed run each, after a warm-up.")
        print(
            "  traced = tracemalloc peak of Python allocations during load+compile+render "
            "(input text not counted, outputs alive at the end counted); retained = still "
            "allocated at the end"
        )
        print(
            f"  rss growth = peak RSS ({method}) during a separate untraced run minus RSS "
            "before it (adds libyaml/C and allocator overhead)"
        )
        print(
            "  marginal = (figure - same figure of the fixed row) / nodes. A peak is a maximum, "
            "not a sum: at 100 nodes it is reached"
        )
        print(
            "  while parsing the shipped library (the fixed row), so judge linearity from the "
            "1,000 and 10,000 rows and the retained column"
        )
        print(
            f"{'row':<10} {'nodes':>6} {'traced':>8} {'retained':>9} {'rss grow':>9} "
            f"{'rss peak':>9}  (MiB) | {'traced':>8} {'retained':>9}  (marginal KiB/node)"
        )
        fixed_mem = memory.get(FIXED.label, {"traced_peak": 0, "traced_retained": 0})
        for w in rows:
            m = memory.get(w.label)
            if m is None:
                continue
            line = (
                f"{w.label:<10} {w.nodes:>6} {mib(m['traced_peak'])} {mib(m['traced_retained']):>9}"
                f" {mib(m['rss_growth']):>9} {mib(m['rss_peak']):>9}        |"
            )
            if w.nodes:
                line += "".join(
                    f" {(m[k] - fixed_mem[k]) / w.nodes / 1024:>{width}.2f}"
                    for k, width in (("traced_peak", 8), ("traced_retained", 9))
                )
            print(line)
        if 1_000 in by_nodes and 10_000 in by_nodes:
            big = memory[by_nodes[10_000].label]
            small = memory[by_nodes[1_000].label]
            print(
                "  10k/1k: traced peak "
                f"{big['traced_peak'] / small['traced_peak']:5.2f}, retained "
                f"{big['traced_retained'] / small['traced_retained']:5.2f}, rss growth "
                f"{big['rss_growth'] / max(small['rss_growth'], 1):5.2f}   (10.0 = linear)"
            )
        print()

    met = True
    target = next((w for w in workloads if w.nodes == TARGET_NODES), None)
    if target is not None:
        best = min(wall[target.label]["total"])
        met = best < TARGET_SECONDS
        print(
            f"target: {TARGET_NODES:,} Slurm nodes ({target.definitions:,} definitions x 6 layers) "
            f"loaded, compiled and rendered in {best:.3f} s wall (best of {repeat}; median "
            f"{statistics.median(wall[target.label]['total']):.3f} s) "
            f"-> {'MET' if met else 'MISSED'} (< {TARGET_SECONDS:g} s)"
        )
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compile_bench",
        description="Time and peak memory of load -> compile -> render at several sizes.",
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs per size (best is reported)")
    parser.add_argument(
        "--sizes",
        default="100,1000,10000",
        help=f"comma-separated Slurm node counts, multiples of {REPLICAS} (default 100,1000,10000)",
    )
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
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    workloads = main_workloads(sizes)
    extra = [] if args.no_extra else [FIXED, WIDE]
    library = read_library()  # file I/O, outside the measured pipeline (like read_repo)
    wall, cpu, counts = time_workloads([*workloads, *extra], args.repeat, library)
    memory = None if args.no_memory else measure_memory([*workloads, *extra])
    met = report(workloads, extra, args.repeat, wall, cpu, counts, memory)
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
