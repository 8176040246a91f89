"""The compile benchmark's tables: times per size, linearity, peak memory, the target."""

from __future__ import annotations

import statistics
from typing import Any

import yaml

from bench.compile.workload import (
    FIXED,
    REPLICAS,
    STAGES,
    TARGET_NODES,
    TARGET_SECONDS,
    TEAM_LAYERS,
    TUNE_LAYERS,
    Workload,
)
from bench.harness.report import machine_line, mib, ms, print_head


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
