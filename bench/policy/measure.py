"""The policy step as the scheduler runs it, the checks of its verdicts, and its timing."""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.policy.pods import (
    KILL_WAIT,
    NEVER_FIRES_HERE,
    REFUSED_BY_ADMIT,
    SCHEDULER_NAME,
    VIOLATIONS,
    Sample,
)
from bench.policy.repo_policies import NOT_MEASURED, REPO_POLICIES, REPO_POLICY_FILE
from reconciler.config.files import read_shipped_policies
from reconciler.config.policy_file import parse_policy_file
from reconciler.policy.engine import CompiledPolicy, compile_policies, effective_policies
from reconciler.policy.loader import shipped_documents
from reconciler.policy.subjects import default_params
from reconciler.scheduler.decide.admission import PodRequest, admit
from reconciler.scheduler.pod_policies import PodPolicies, Verdict

# ---- policies ---------------------------------------------------------------------------------


def params() -> dict[str, Any]:
    """What the scheduler passes as `params` (params_of: killWait, schedulerName, ...)."""
    hosts = [f"slurm-node-{i:02d}" for i in range(16)]
    return {
        **default_params(),
        "killWait": KILL_WAIT,
        "schedulerName": SCHEDULER_NAME,
        "slurmNodeHosts": hosts,
        # values scheduler.podPolicy.defaultUserId: the generated Pods' uid, so a clean Pod
        # without user-id is not denied as root (the default in SUNK's "Schedule Kubernetes Pods
        # with Slurm")
        "defaultUserId": 1000,
    }


def compile_revision(
    with_repo: bool, interpret: bool = False
) -> tuple[tuple[CompiledPolicy, ...], float, float]:
    """What the daemon does once per revision for the pod policies: parse the shipped files
    and the repo's policy file, effective_policies, compile_policies (with `interpret`, every
    expression on celpy's interpreter). The repo's: 18 of REPO_POLICIES (NOT_MEASURED).
    -> (policies, parse s, compile s)."""
    t0 = time.perf_counter()
    shipped = shipped_documents(read_shipped_policies())
    repo = parse_policy_file(REPO_POLICIES, REPO_POLICY_FILE, "repo") if with_repo else []
    repo = [doc for doc in repo if doc.name not in NOT_MEASURED]
    t1 = time.perf_counter()
    compiled = compile_policies(effective_policies(shipped, repo), interpret=interpret)
    t2 = time.perf_counter()
    pods = tuple(p for p in compiled if p.policy.target == "pod")
    return pods, t1 - t0, t2 - t1


def policy_step(policies: PodPolicies, pod: Mapping[str, Any], namespace: Any) -> Verdict:
    """What the scheduler's Intake._passes_policies computes for a Pod, without its I/O: the
    Namespace is given (the scheduler reads it through a cache), no Event is sent, nothing is
    logged."""
    ns = namespace if policies.reads_namespace else None
    verdict = policies.judge(pod, ns)
    _ = verdict.audits, verdict.refusal(), verdict.warnings
    return verdict


def memos(policies: PodPolicies) -> list[dict[Any, Any]]:
    """The engine's verdict memos (CompiledPolicy.memo: a policy that saw the same values at
    the paths it reads answers from it); none if this engine has no memo."""
    found = (getattr(p, "memo", None) for p in policies.policies)
    return [m for m in found if isinstance(m, dict)]


def forget(policies: PodPolicies) -> None:
    for memo in memos(policies):
        memo.clear()


def replica_misses(samples: Sequence[Sample], policies: PodPolicies) -> str:
    """Which policies are evaluated anew for a replica of a Pod judged just before."""
    missed: Counter[str] = Counter()
    for s in samples:
        forget(policies)
        policy_step(policies, s.pod, s.namespace)
        before = [len(getattr(p, "memo", ())) for p in policies.policies]
        policy_step(policies, s.sibling, s.namespace)
        for p, size in zip(policies.policies, before, strict=True):
            if len(getattr(p, "memo", ())) > size:
                missed[p.policy.name] += 1
    forget(policies)
    names = ", ".join(f"{name} ({n} of {len(samples)} Pods)" for name, n in missed.most_common())
    return f"{sum(missed.values()) / len(samples):.1f} of {len(policies.policies)}" + (
        f": {names}" if names else ""
    )


# ---- checks -------------------------------------------------------------------------------------


def check(
    samples: Sequence[Sample], shipped: PodPolicies, full: PodPolicies, interpreted: PodPolicies
) -> dict[str, int]:
    """Refuse to report figures for verdicts that are not what the Pods were built to get, or
    that the compiled evaluator and celpy's interpreter do not agree on (each Pod and its
    sibling, every finding with its message)."""
    problems: list[str] = []
    shipped_names = {p.policy.name for p in shipped.policies}
    fired: Counter[str] = Counter()
    stats: Counter[str] = Counter()
    for s in samples:
        name = s.pod["metadata"]["name"]
        a = admit(s.pod, kill_wait_seconds=KILL_WAIT)
        b, c = policy_step(shipped, s.pod, s.namespace), policy_step(full, s.pod, s.namespace)
        found = {f.policy for f in c.findings}
        fired.update(found)
        for f in c.findings:
            if f.reason == "InternalError":
                problems.append(f"{name}: {f.policy} failed: {f.message}")
        for planted in s.violations:
            if VIOLATIONS[planted] not in found:
                problems.append(f"{name}: planted {planted}, {VIOLATIONS[planted]} did not find it")
        refused = bool(REFUSED_BY_ADMIT & set(s.violations))
        if refused == isinstance(a, PodRequest):
            problems.append(
                f"{name}: admit() gave {type(a).__name__} for {s.violations or 'a clean Pod'}"
            )
        if not s.violations and c.denials:
            problems.append(f"{name}: a clean Pod denied: {c.refusal()}")
        if b.findings != tuple(f for f in c.findings if f.policy in shipped_names):
            problems.append(f"{name}: (b) and (c) disagree on the shipped policies")
        for pod in (s.pod, s.sibling):
            forget(full)
            forget(interpreted)
            got = policy_step(full, pod, s.namespace).findings
            if got != policy_step(interpreted, pod, s.namespace).findings:
                problems.append(f"{name}: compiled and interpreted findings differ")
        stats["denied"] += bool(c.denials)
        stats["warned"] += bool(c.warnings)
        stats["audited"] += bool(c.audits)
        stats["refused by admit"] += refused
        stats["with annotations"] += "annotations" in s.pod["metadata"]
        stats["planted"] += bool(s.violations)
    never = sorted({p.policy.name for p in full.policies} - set(fired) - NEVER_FIRES_HERE)
    if never and len(samples) >= len(VIOLATIONS):
        problems.append(f"never fired: {', '.join(never)}")
    if problems:
        raise SystemExit(
            "benchmark check failed: "
            + "; ".join(problems[:10])
            + (f" (+{len(problems) - 10} more)" if len(problems) > 10 else "")
        )
    return dict(stats)


# ---- timing -----------------------------------------------------------------------------------


@dataclass
class Times:
    wall: dict[str, list[list[float]]] = field(default_factory=dict)  # variant -> pod -> runs
    cpu: dict[str, list[list[float]]] = field(default_factory=dict)


Call = tuple[Callable[[Sample], Any] | None, Callable[[Sample], Any]]  # (untimed prepare, timed)


def time_variants(
    samples: Sequence[Sample], calls: Mapping[str, Call], repeat: int, seed: int
) -> Times:
    times = Times(
        wall={k: [[] for _ in samples] for k in calls},
        cpu={k: [[] for _ in samples] for k in calls},
    )
    keys = list(calls)
    for s in samples:  # warm-up
        for k in keys:
            prepare, call = calls[k]
            if prepare is not None:
                prepare(s)
            call(s)
    rng = random.Random(seed + 1)
    order = list(range(len(samples)))
    for round_ in range(repeat):
        rng.shuffle(order)
        gc.collect()  # garbage of the previous pass is not charged to this one
        for n, i in enumerate(order):
            shift = (round_ + n) % len(keys)
            for k in keys[shift:] + keys[:shift]:
                prepare, call = calls[k]
                if prepare is not None:
                    prepare(samples[i])
                w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                call(samples[i])
                c1, w1 = time.thread_time_ns(), time.perf_counter_ns()
                times.wall[k][i].append((w1 - w0) / 1e9)
                times.cpu[k][i].append((c1 - c0) / 1e9)
    return times


@dataclass
class Stats:
    median: float
    p95: float
    mean: float  # mean over Pods of each Pod's median


def stats(per_pod: list[list[float]]) -> Stats:
    flat = sorted(x for runs in per_pod for x in runs)
    p95 = flat[min(len(flat) - 1, round(0.95 * (len(flat) - 1)))]
    mean = statistics.fmean(statistics.median(runs) for runs in per_pod)
    return Stats(statistics.median(flat), p95, mean)


def time_compiles(repeat: int) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {k: {"parse": [], "compile": []} for k in "bc"}
    for round_ in range(repeat):
        for k in "bc" if round_ % 2 == 0 else "cb":
            gc.collect()
            _, parse, comp = compile_revision(with_repo=k == "c")
            out[k]["parse"].append(parse)
            out[k]["compile"].append(comp)
    return out


# ---- report -------------------------------------------------------------------------------------
