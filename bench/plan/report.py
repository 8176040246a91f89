"""The plan benchmark's tables: one per scenario, every size, every stage."""

from __future__ import annotations

import json
import statistics

from bench.compile.workload import REPLICAS, Workload
from bench.harness.report import machine_line, ms, print_head
from bench.harness.timing import Times
from bench.plan.scenarios import SCENARIOS, STAGES, Scenario
from reconciler.plan.diff import desired_kube_objects


def live_sizes(scenarios: dict[str, list[Scenario]]) -> str:
    label = next(iter(scenarios))
    live = scenarios[label][0].live
    sts = [o for r, o in live.kube_objects.items() if r.kind == "StatefulSet"]
    want = desired_kube_objects(scenarios[label][0].state)
    sizes = [len(json.dumps(o)) for o in sts]
    managed = [len(json.dumps(o["metadata"]["managedFields"])) for o in sts]
    desired = [len(json.dumps(o)) for r, o in want.items() if r.kind == "StatefulSet"]
    return (
        f"a live StatefulSet is {statistics.mean(sizes) / 1024:.1f} KiB as JSON "
        f"({statistics.mean(managed) / 1024:.1f} KiB of it managedFields; the desired one "
        f"{statistics.mean(desired) / 1024:.1f} KiB)"
    )


def report(
    workloads: list[Workload],
    scenarios: dict[str, list[Scenario]],
    repeat: int,
    wall: Times,
    cpu: Times,
    counts: dict[tuple[str, str], dict[str, int]],
) -> list[str]:
    """Print the tables; returns the stages that look worse than linear."""
    print("reconciler plan benchmark")
    print(f"  {machine_line()}")
    print(
        f"  desired: bench.compile_bench's repo ({REPLICAS} replicas per node definition, "
        "6 layers); live: the applied state as kube-apiserver returns it"
    )
    print(f"  (server metadata, managedFields, status, defaults): {live_sizes(scenarios)}")
    print(
        "  dry-run? = needs_dry_run; plan = plan_changes (with the dry-run views); "
        "text = render_text; json = render_json"
    )
    print(
        f"  times: best of {repeat} runs (all sizes and scenarios interleaved round-robin), "
        "wall clock; median and cpu (process time) of the totals alongside"
    )
    suspicious: list[str] = []
    base = workloads[0]
    by_nodes = {w.nodes: w for w in workloads}
    for key, title in SCENARIOS:
        print()
        print(title)
        head = (
            f"{'nodes':>7} {'sts':>5} {'dry-runs':>8} {'changes':>7} {'text/json KiB':>14} |"
            + "".join(f"{s:>9}" for s in STAGES)
            + f" | {'median':>8} {'cpu':>8}  (ms) | {'us/node':>8} {'vs ' + base.label:>7}"
        )
        print_head(head)
        base_total = min(wall[(base.label, key)]["total"]) / base.nodes
        for w in workloads:
            t = wall[(w.label, key)]
            c = counts[(w.label, key)]
            per = min(t["total"]) / w.nodes
            print(
                f"{w.nodes:>7,} {w.definitions:>5,} {c['dry_runs']:>8,} {c['changes']:>7,} "
                f"{str(c['text_kib']) + '/' + str(c['json_kib']):>14} |"
                + "".join(f" {ms(min(t[s]))}" for s in STAGES)
                + f" | {ms(statistics.median(t['total']))} {ms(min(cpu[(w.label, key)]['total']))}"
                f"       | {per * 1e6:>8.2f} {per / base_total:>7.2f}"
            )
        if 1_000 in by_nodes and 10_000 in by_nodes:
            big, small = by_nodes[10_000].label, by_nodes[1_000].label
            ratios = []
            for stage in STAGES:
                b, s = min(wall[(big, key)][stage]), min(wall[(small, key)][stage])
                ratio = b / s if s > 0 else float("inf")
                flag = ""
                if ratio > 13 and b > 0.005:  # well above 10 and not lost in timer noise
                    flag = " (!)"
                    suspicious.append(f"{key}/{stage}: 10k/1k = {ratio:.1f}")
                ratios.append(f"{stage} {ratio:.1f}{flag}")
            print("  time(10k)/time(1k), 10.0 = linear: " + ", ".join(ratios))
    print()
    print(
        "  checked before reporting: needs_dry_run's refs, the plan's summary, every change's "
        "ref, action, field paths"
    )
    print(
        "  (StatefulSets) and steps (drained nodes), controller restart, and the text/JSON "
        "summaries; a mismatch stops the run."
    )
    return suspicious
