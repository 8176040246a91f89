"""Plan benchmark: time of a live plan against 100 ... 10,000 Slurm nodes.

Not a test: run it by hand from the repo root and read the figures.

    python -m bench.plan_bench               # or: python bench/plan_bench.py
    python -m bench.plan_bench --repeat 3 --sizes 100,1000,3000,10000
    python -m bench.plan_bench --apiserver   # + the cost of the API requests (local apiserver)

What is timed is the pure part of `reconciler plan` against a live cluster, no I/O:

    needs_dry_run(state, live)                       which objects need a server-side dry-run
    plan_changes(state, live, server_view=...)       the diff (Kubernetes and Slurm)
    render_text(plan), render_json(plan)             what the user / CI bot reads

The desired state is compiled from the compile benchmark's synthetic repo
(bench/compile/workload.py: 10 replicas per node definition, 6 layers each). The live state is
made from a desired state as the API server would hold it: each object gets the fields the
server adds (uid, resourceVersion, generation, creationTimestamp, managedFields, status, and the
defaults of kube-apiserver 1.20), so the differ walks objects of their real size. Three
scenarios per size: steady state (nothing to do), 10% of the StatefulSets changed in one env
value, and a scale-down by 2 replicas everywhere.

The machine is shared and noisy: every size and scenario is timed in the same run, interleaved
round-robin, and each figure is the best of --repeat runs with the median next to it; linearity
is judged from ratios between sizes, not from absolute times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

if __package__ in (None, ""):  # `python bench/plan_bench.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.compile.workload import add_size_options, sized_workloads
from bench.harness.timing import Times, round_robin, stage_times, stamp
from bench.plan.apiserver import apiserver_estimate
from bench.plan.report import report
from bench.plan.scenarios import SCENARIOS, STAGES, Scenario, build_scenarios
from reconciler.config.files import read_library
from reconciler.plan.diff import needs_dry_run, plan_changes
from reconciler.plan.jsonout import render_json
from reconciler.plan.model import (
    KUBERNETES,
    SLURM,
    SLURM_NODE,
    STEP_DRAIN,
    STEP_RETIRE,
    Action,
    ObjectRef,
    Plan,
)
from reconciler.plan.text import render_text

# --------------------------------------------------------------------------- one run


@dataclass
class Outcome:
    dry_runs: list[ObjectRef]
    plan: Plan
    text: str
    json_text: str


def run_scenario(sc: Scenario) -> tuple[dict[str, float], dict[str, float], Outcome]:
    t0 = stamp()
    dry_runs = needs_dry_run(sc.state, sc.live)
    t1 = stamp()
    plan = plan_changes(sc.state, sc.live, server_view=sc.server_view)
    t2 = stamp()
    text = render_text(plan)
    t3 = stamp()
    json_text = render_json(plan)
    t4 = stamp()
    wall, cpu = stage_times(STAGES, (t0, t1, t2, t3, t4))
    return wall, cpu, Outcome(dry_runs, plan, text, json_text)


def check(label: str, sc: Scenario, out: Outcome) -> dict[str, int]:
    """Refuse to report figures for a plan that is not what the scenario must produce."""
    exp, plan = sc.expected, out.plan
    problems: list[str] = []

    def want(what: str, got: Any, expected: Any) -> None:
        if got != expected:
            problems.append(f"{what}: got {_short(got)}, want {_short(expected)}")

    want("needs_dry_run", set(out.dry_runs), exp.dry_runs)
    want("needs_dry_run (no duplicates)", len(out.dry_runs), len(exp.dry_runs))
    want("summary", plan.summary(), exp.summary)
    want("controller_restart", plan.controller_restart, exp.controller_restart)
    by_action = {a: {c.ref for c in plan.changes if c.action is a} for a in Action}
    want("creates", by_action[Action.CREATE], set())
    want("updates", by_action[Action.UPDATE], exp.updates)
    want("deletes", by_action[Action.DELETE], exp.deletes)
    for change in plan.changes:
        if change.ref.kind == "StatefulSet":
            want(f"fields of {change.ref}", tuple(f.path for f in change.fields),
                 exp.statefulset_fields)  # fmt: skip
        if change.ref.kind == SLURM_NODE and change.action is Action.DELETE:
            want(f"steps of {change.ref}", change.steps, (STEP_DRAIN, STEP_RETIRE))
    want("plan warnings", plan.warnings, ())
    if not plan.has_changes and "No changes." not in out.text:
        problems.append("render_text: no 'No changes.' line")
    want("render_text summary line", out.text.rstrip("\n").rsplit("\n", 1)[-1],
         exp.summary.line())  # fmt: skip
    want("render_text '(update)' headers", out.text.count(" (update)\n"), len(exp.updates))
    want("render_text '(delete)' headers", out.text.count(" (delete)\n"), len(exp.deletes))
    data = json.loads(out.json_text)
    want("render_json summary", data["summary"], asdict(exp.summary))
    want("render_json changes", len(data["changes"]), len(plan.changes))
    if problems:
        raise SystemExit(
            f"benchmark check failed for {sc.key} at {label} nodes: " + "; ".join(problems)
        )
    kinds = Counter((c.ref.scope, c.action) for c in plan.changes)
    return {
        "dry_runs": len(out.dry_runs),
        "changes": len(plan.changes),
        "kube": sum(n for (scope, _), n in kinds.items() if scope == KUBERNETES),
        "slurm": sum(n for (scope, _), n in kinds.items() if scope == SLURM),
        "text_kib": len(out.text) // 1024,
        "json_kib": len(out.json_text) // 1024,
    }


def _short(value: Any) -> str:
    text = repr(sorted(value, key=str) if isinstance(value, set) else value)
    if len(text) < 300:
        return text
    return text[:300] + (f"... ({len(value)} items)" if hasattr(value, "__len__") else "...")


# --------------------------------------------------------------------------- timing

# Times: (size label, scenario key) -> stage -> seconds, one per run


def time_scenarios(
    scenarios: dict[str, list[Scenario]], repeat: int
) -> tuple[Times, Times, dict[tuple[str, str], dict[str, int]]]:
    jobs = [((label, sc.key), (label, sc)) for label, scs in scenarios.items() for sc in scs]
    # Warm-up (imports, first-call costs) on the smallest size, every scenario.
    for sc in scenarios[next(iter(scenarios))]:
        run_scenario(sc)
    # Round-robin, rotating the start so no job always runs right after the largest.
    return round_robin(
        jobs,
        repeat,
        STAGES,
        lambda job: run_scenario(job[1]),
        lambda job, outcome: check(job[0], job[1], outcome),
        shift_step=len(SCENARIOS),
    )


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.plan_bench",
        description="Time of the pure live plan (needs_dry_run, plan_changes, render) at sizes.",
    )
    add_size_options(parser, "runs per size and scenario")
    parser.add_argument(
        "--apiserver",
        action="store_true",
        help="also time real API requests against a temporary local kube-apiserver (secondary)",
    )
    parser.add_argument(
        "--requests", type=int, default=200, help="dry-run requests to time with --apiserver"
    )
    args = parser.parse_args(argv)
    workloads = sized_workloads(parser, args)
    if not workloads or workloads[0].nodes == 0:
        parser.error("--sizes needs positive node counts")
    library = read_library()
    started = time.perf_counter()
    scenarios = {w.label: build_scenarios(w, library) for w in workloads}
    setup = time.perf_counter() - started
    wall, cpu, counts = time_scenarios(scenarios, args.repeat)
    suspicious = report(workloads, scenarios, args.repeat, wall, cpu, counts)
    print(
        f"  (compiling the desired states and building the live ones took {setup:.1f} s, untimed)"
    )
    print()
    if suspicious:
        print("linearity: WORSE THAN LINEAR somewhere: " + "; ".join(suspicious))
    elif {1_000, 10_000} <= {w.nodes for w in workloads}:
        print(
            "linearity: no stage of any scenario grows more than 1.3x linear from 1,000 to "
            "10,000 nodes (stages under 5 ms at 10,000 are not judged)"
        )
    if args.apiserver:
        apiserver_estimate(scenarios, args.requests)
    return 0


if __name__ == "__main__":
    sys.exit(main())
