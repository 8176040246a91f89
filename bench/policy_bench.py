"""Policy benchmark: what CEL pod policies cost the scheduler per Pod at admission, compiled
(reconciler/policy/cel_compiled.py) and, in the same run, on celpy's interpreter.

Not a test: run it by hand from the repo root and read the figures. Pure: no local stack, no
API server, no Slurm; nothing is started.

    python -m bench.policy_bench               # or: python bench/policy_bench.py
    python -m bench.policy_bench --pods 200 --repeat 7
    python -m bench.policy_bench --no-profile  # the timing table and the verdict only

Options: --pods N (synthetic Pods, default 100), --repeat N (timed passes over them, default 5;
every Pod is timed once per pass in each variant), --seed N (the Pods' random seed, default 7),
--profile / --no-profile (the cProfile section and the experiments after it; by default they
run when (c) misses the target), --strict (exit 1 when the verdict is MISSED). The exit status
is 1 when a check fails, otherwise 0.

What is timed, per Pod, as the scheduler's Intake.request_of runs it, without its I/O (the
Pod's Namespace is given, as the scheduler's cache would give it; no Event is sent):

    (a) admit(pod, kill_wait_seconds=30)        the built-in admission code
    (b) the policy step, the 7 shipped policies reads_namespace, PodPolicies.judge(pod, ns),
                                                the verdict's audits, refusal() and warnings
    (c) the policy step, 25 policies            the same with 18 of the 20 repo policies of
                                                bench/policy/repo_policies.py (NOT_MEASURED)
    (c) interpreted                             (c) with every expression on celpy's interpreter

The engine remembers each policy's verdict by the values the policy reads (CompiledPolicy.memo),
so (b) and (c) are timed twice: for a new Pod (memos emptied before the call: every policy is
evaluated) and for a replica (a sibling from the same template, other name and uid, was judged
just before, as in a Job or Deployment; only policies that read what differs are evaluated).
The verdict is judged on the new Pod, the worst case: 25 policies within 2 ms of CPU. The
scheduler runs the policy step and then admit(), so what policies add to a Pod is the step
itself. Once per revision the daemon compiles the policies: the parse of the repo's policy
file, effective_policies and compile_policies are timed for (b) and (c) as well.

The Pods look as the scheduler holds them (server metadata, the defaults of kube-apiserver
1.20, status Pending; no managedFields, which the scheduler drops from what it watches): 1 to 4
containers, with and without annotations, in 5 namespaces with different labels; about half of
them break one or two rules on purpose (each rule is broken by some Pod). Before any figure is
printed, every Pod's verdicts are checked: each planted violation is found by the policy meant
to find it, a clean Pod is not denied and admit() admits it, (b)'s findings are (c)'s
restricted to the shipped policies, no expression fails (no InternalError finding), and the
compiled evaluator's findings are the interpreter's, for the Pod and its sibling. A mismatch
stops the benchmark.

The machine is shared and noisy: all variants are timed in the same run, interleaved per Pod
(their order rotates), in a shuffled Pod order per pass, after a warm-up pass, with
gc.collect() between passes; figures are medians and p95 over all Pod x pass samples, and the
mean over Pods of each Pod's median (what sets throughput). `cpu` is the thread's CPU time,
less disturbed by other processes than wall time; the verdict and the throughput estimates use
it. The profile and the experiments (where the time of (c) goes, measured without changing
reconciler/) follow the verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

if __package__ in (None, ""):  # `python bench/policy_bench.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness.report import machine_line
from bench.policy.measure import (
    Call,
    check,
    compile_revision,
    forget,
    memos,
    params,
    policy_step,
    replica_misses,
    time_compiles,
    time_variants,
)
from bench.policy.pods import KILL_WAIT, Sample, make_samples
from bench.policy.profile import experiments, profile
from bench.policy.report import TARGET_NEW_POD, report_throughput, report_times
from reconciler.policy.engine import interpreted
from reconciler.scheduler.decide.admission import admit
from reconciler.scheduler.pod_policies import PodPolicies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.policy_bench",
        description="CPU per Pod of the scheduler's admission with CEL pod policies.",
    )
    parser.add_argument("--pods", type=int, default=100, help="synthetic Pods (default 100)")
    parser.add_argument("--repeat", type=int, default=5, help="timed passes (default 5)")
    parser.add_argument("--seed", type=int, default=7, help="the Pods' random seed")
    parser.add_argument(
        "--profile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="cProfile (c) and run the experiments (default: when (c) misses the target)",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 if the verdict is MISSED")
    args = parser.parse_args(argv)
    if args.pods < 1 or args.repeat < 1:
        parser.error("--pods and --repeat must be at least 1")
    started = time.perf_counter()
    print("reconciler policy benchmark (admission cost per Pod)")
    print(f"  {machine_line()}")

    t0 = time.perf_counter()
    compile_revision(with_repo=True)  # the first one in a process also builds celpy's parser
    cold = time.perf_counter() - t0
    compiled_b, _, _ = compile_revision(with_repo=False)
    compiled_c, _, _ = compile_revision(with_repo=True)
    shipped = PodPolicies(compiled_b, params())
    full = PodPolicies(compiled_c, params())
    slow = PodPolicies(compile_revision(with_repo=True, interpret=True)[0], params())
    samples = make_samples(args.pods, args.seed)
    counts = check(samples, shipped, full, slow)
    n_programs = sum(
        len(p.conditions) + sum(1 + (v.message is not None) for v in p.validations)
        for p in full.policies
    )
    sizes = [len(json.dumps(s.pod)) for s in samples]
    print(
        f"  policies: (b) {len(shipped.policies)} shipped; (c) {len(full.policies)} "
        f"({n_programs} CEL programs, {len(interpreted(full.policies))} of them left to celpy's "
        f"interpreter); reads namespaceObject: {full.reads_namespace}"
    )
    print(
        f"  Pods: {len(samples)}, {statistics.mean(s.containers for s in samples):.1f} containers"
        f" and {statistics.mean(sizes) / 1024:.1f} KiB of JSON on average; "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
    )
    if memos(full):
        print(
            "  the engine remembers verdicts by the values each policy reads: a new Pod is judged "
            "with the memos emptied; a replica"
        )
        print("  right after a sibling (same template, other name/uid) was judged")
        print(f"  policies evaluated anew for a replica: (b) {replica_misses(samples, shipped)}")
        print(f"    (c) {replica_misses(samples, full)}")
    else:
        print("  the engine has no verdict memo: a replica costs what a new Pod does")
    print(
        f"  times: {args.repeat} passes, all variants interleaved per Pod; median and p95 over "
        "all Pod x pass samples, mean = mean over Pods of each Pod's median"
    )
    print()

    def replica(policies: PodPolicies) -> Call:
        def prepare(s: Sample) -> None:  # its sibling was judged just before
            forget(policies)
            policy_step(policies, s.pod, s.namespace)

        return prepare, lambda s: policy_step(policies, s.sibling, s.namespace)

    calls: dict[str, Call] = {
        "a": (None, lambda s: admit(s.pod, kill_wait_seconds=KILL_WAIT)),
        "b": (lambda s: forget(shipped), lambda s: policy_step(shipped, s.pod, s.namespace)),
        "c": (lambda s: forget(full), lambda s: policy_step(full, s.pod, s.namespace)),
        "ci": (lambda s: forget(slow), lambda s: policy_step(slow, s.pod, s.namespace)),
        "b2": replica(shipped),
        "c2": replica(full),
        "c2i": replica(slow),
    }
    times = time_variants(samples, calls, args.repeat, args.seed)
    cpu = report_times(times, samples)
    compiles = time_compiles(args.repeat)
    print()
    print(f"once per revision, ms (median of {args.repeat}; wall): ", end="")
    print(
        "; ".join(
            f"{k}: parse {statistics.median(compiles[k]['parse']) * 1e3:.1f} + compile "
            f"{statistics.median(compiles[k]['compile']) * 1e3:.1f}"
            for k in "bc"
        )
        + f"; the first compile in a process {cold * 1e3:.0f} (builds celpy's Lark parser)"
    )

    ok = report_throughput(cpu, args.strict)
    if args.profile or (args.profile is None and cpu["c"].mean > TARGET_NEW_POD):
        profile(samples, full)
        experiments(samples, full)
    print()
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
