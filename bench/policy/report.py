"""The policy benchmark's tables: time per Pod, and what it means for throughput."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence

from bench.harness.report import print_head
from bench.policy.measure import Stats, Times, stats
from bench.policy.pods import Sample

# ---- the scheduler benchmark's figures (README, "Scheduler benchmark", f453755) ------------
RAW_SUBMITS_PER_S = 399.6  # raw slurmrestd submits/s, 500 jobs, 16 submitters
TARGET_SHARE = 0.8  # the scheduler benchmark's target: 80% of the raw submit rate
END_TO_END_PODS_PER_S = 37.4  # the backlog phase's Pods bound/s
SCHEDULER_CPU_PER_POD = 0.006  # the scheduler process's own CPU per Pod (s), without policies
MACHINE_CPUS = 2  # the dev machine those figures come from
TARGET_NEW_POD = 0.002  # s of CPU: 25 policies on an unlike (new) Pod, compiled
TITLES = {
    "a": "(a) admit() only",
    "b": "(b) 7 shipped, new Pod",
    "c": "(c) 25 policies, new Pod",
    "ci": "(c) 25, new Pod, celpy interpreter",
    "b2": "(b) 7 shipped, a replica",
    "c2": "(c) 25 policies, a replica",
    "c2i": "(c) 25, a replica, celpy interpreter",
}


def us(seconds: float) -> str:
    return f"{seconds * 1e6:9.0f}"


def report_times(times: Times, samples: Sequence[Sample]) -> dict[str, Stats]:
    cpu = {k: stats(times.cpu[k]) for k in times.cpu}
    wall = {k: stats(times.wall[k]) for k in times.wall}
    head = (
        f"{'per Pod, microseconds':36} | {'cpu med':>9} {'cpu p95':>9} {'cpu mean':>9} | "
        f"{'wall med':>9} {'wall p95':>9} | {'x (a) med':>9} {'x (a) mean':>10}"
    )
    print_head(head)
    for k in times.cpu:
        c, w = cpu[k], wall[k]
        print(
            f"{TITLES[k]:36} | {us(c.median)} {us(c.p95)} {us(c.mean)} | {us(w.median)} "
            f"{us(w.p95)} | {c.median / cpu['a'].median:9.0f} {c.mean / cpu['a'].mean:10.0f}"
        )
    by_size: dict[int, list[float]] = defaultdict(list)
    for i, s in enumerate(samples):
        by_size[s.containers].append(statistics.median(times.cpu["c"][i]))
    for new, old in (("c", "ci"), ("c2", "c2i")):
        ratios = [
            statistics.median(i) / statistics.median(c)
            for c, i in zip(times.cpu[new], times.cpu[old], strict=True)
        ]
        fast, slow = cpu[new].mean, cpu[old].mean
        print(
            f"  {TITLES[new]}: compiled {fast * 1e3:.2f} ms, celpy's interpreter "
            f"{slow * 1e3:.2f} ms (means of Pod medians): {slow / fast:.0f} x; per Pod "
            f"{min(ratios):.0f} to {max(ratios):.0f} x"
        )
    print(
        "  (c) by containers per Pod, cpu median of Pod medians: "
        + ", ".join(
            f"{n}: {statistics.median(v) * 1e3:.1f} ms ({len(v)} Pods)"
            for n, v in sorted(by_size.items())
        )
    )
    return cpu


def report_throughput(cpu: Mapping[str, Stats], strict: bool) -> bool:
    added_c = cpu["c"].mean
    submit = 1 / RAW_SUBMITS_PER_S
    target = TARGET_SHARE * RAW_SUBMITS_PER_S
    print()
    print("What it means for throughput (added = the policy step's CPU per Pod, mean of Pod")
    print("medians; it holds the GIL, so the scheduler's 16 workers do not run it in parallel):")
    rows = []
    for key in ("b", "c", "ci", "b2", "c2"):
        label, added = TITLES[key], cpu[key].mean
        rows.append(
            (
                label,
                added * 1e3,
                added / submit,
                1 / added,
                1 / added / RAW_SUBMITS_PER_S,
                1 / (SCHEDULER_CPU_PER_POD + added),
                1 / (1 / END_TO_END_PODS_PER_S + added),
                1 / (1 / END_TO_END_PODS_PER_S + added / MACHINE_CPUS),
            )
        )
    head = (
        f"{'':36} | {'added ms':>8} {'x submit':>8} | {'bound/s':>8} {'x raw':>6} | "
        f"{'+6ms/s':>7} | {'e2e serial':>10} {'e2e 2-CPU':>9}"
    )
    print_head(head)
    for label, ms, x_submit, bound, x_raw, sched, serial, spread in rows:
        print(
            f"{label:36} | {ms:8.2f} {x_submit:8.2f} | {bound:8.1f} {x_raw:6.2f} | {sched:7.1f} | "
            f"{serial:10.1f} {spread:9.1f}"
        )
    print(
        f"  x submit: against the CPU budget of one raw slurmrestd submit at {RAW_SUBMITS_PER_S}/s"
        f" ({submit * 1e3:.2f} ms)"
    )
    print(
        "  bound/s: Pods/s if the policy step were the scheduler's only cost; x raw: that over "
        f"{RAW_SUBMITS_PER_S}/s (target {TARGET_SHARE})"
    )
    print(
        f"  +6ms/s: Pods/s the scheduler process's CPU allows with its own ~"
        f"{SCHEDULER_CPU_PER_POD * 1e3:.0f} ms per Pod plus the policy step"
    )
    print(
        f"  e2e serial: the measured {END_TO_END_PODS_PER_S} Pods bound/s with the step added to"
        " every Pod's path, 1/(1/37.4 + added);"
    )
    print(
        f"  e2e 2-CPU: the same if the saturated {MACHINE_CPUS} CPUs absorb it, "
        "1/(1/37.4 + added/2)"
    )
    bound = 1 / added_c
    drop = 1 - rows[1][6] / END_TO_END_PODS_PER_S
    print(
        f"  throughput: (c) caps the scheduler at {bound:.0f} Pods/s = "
        f"{bound / RAW_SUBMITS_PER_S:.2f} x raw (target {target:.0f}/s); end-to-end "
        f"{END_TO_END_PODS_PER_S} -> {rows[1][6]:.1f} Pods/s (-{drop:.0%})"
    )
    met = added_c <= TARGET_NEW_POD
    print()
    print(
        f"verdict: {'MET' if met else 'MISSED'}: 25 policies (7 shipped + 18 repo) cost "
        f"{added_c * 1e3:.2f} ms of CPU per new Pod compiled, target <= "
        f"{TARGET_NEW_POD * 1e3:.0f} ms (celpy's interpreter: {cpu['ci'].mean * 1e3:.1f} ms, "
        f"{cpu['ci'].mean / added_c:.0f} x); a replica of a Pod already judged: "
        f"{cpu['c2'].mean * 1e3:.2f} ms"
    )
    return met or not strict
