"""Where the time of (c) goes (cProfile), and what its parts cost (experiments)."""

from __future__ import annotations

import cProfile
import gc
import os
import pstats
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any
from unittest import mock

import celpy

from bench.policy.measure import forget, params, policy_step
from bench.policy.pods import Sample
from reconciler.policy import engine
from reconciler.policy.cel_values import to_cel
from reconciler.policy.inputs import inputs_key
from reconciler.scheduler.pod_policies import PodPolicies

# ---- profile and experiments ------------------------------------------------------------------

AREAS = (  # (label, substrings of a profiled function's file), first match wins
    (
        "compiled CEL (closures) and to_cel",
        (
            "reconciler/policy/cel_compiled.py",
            "reconciler/policy/cel_loops.py",
            "reconciler/policy/cel_values.py",
        ),
    ),
    ("celpy types and operators", ("celpy/celtypes.py", "celpy/evaluation.py")),
    ("celpy interpreter (lark tree walk)", ("lark/",)),
    ("typing at run time (own time)", ("typing.py",)),
    (
        "Kubernetes CEL library + quantity",
        (
            "reconciler/policy/k8s_library.py",
            "reconciler/policy/k8s_quantity.py",
            "reconciler/policy/cel_calls.py",
            "reconciler/kuberules/quantity.py",
            "fractions.py",
            "decimal",
        ),
    ),
    ("memo keys (inputs.py, json)", ("reconciler/policy/inputs.py", "json/")),
    ("logging (disabled debug calls)", ("logging/",)),
    ("engine + PodPolicies", ("reconciler/policy/engine.py", "reconciler/scheduler/")),
    ("regular expressions", ("re2", "re/", "sre_", "re.py")),
)
CUMULATIVE = (  # (basename:function, what it is)
    ("cel_compiled.py:evaluate", "Program.evaluate: all program runs"),
    ("cel_values.py:to_cel", "to_cel: the activation (once per Pod)"),
    ("inputs.py:inputs_key", "the memo keys (every Pod, every policy)"),
    ("cel_calls.py:call", "Kubernetes CEL library calls"),
    ("typing.py:inner", "typing subscripts at run time"),
)


def profile(samples: Sequence[Sample], full: PodPolicies) -> None:
    print()
    print("PROFILE of (c), new Pods: cProfile over one pass of the Pods (it slows Python code")
    print("down, so read the shares, not the times)")
    prof = cProfile.Profile()
    prof.enable()
    for s in samples:
        forget(full)  # a new Pod: every policy evaluated
        policy_step(full, s.pod, s.namespace)
    prof.disable()
    forget(full)
    raw: dict[Any, Any] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in raw.values())
    areas: Counter[str] = Counter()
    for (filename, _, funcname), entry in raw.items():
        where = filename if filename != "~" else funcname
        label = next(
            (lb for lb, keys in AREAS if any(k in where for k in keys)),
            "built-ins (hash, getattr, isinstance ...)" if filename == "~" else "other",
        )
        areas[label] += entry[2]
    print("  own time by area:")
    for label, seconds in areas.most_common():
        print(f"    {label:44} {seconds / total:6.1%}")
    cumulative: Counter[str] = Counter()
    for (fn, _, name), entry in raw.items():
        cumulative[f"{os.path.basename(fn)}:{name}"] += entry[3]
    print("  cumulative (with what they call):")
    for key, why in CUMULATIVE:
        if key in cumulative:
            print(f"    {why:60} {cumulative[key] / total:6.1%}")
    print("  top functions by own time:")
    for (fn, line, name), entry in sorted(raw.items(), key=lambda kv: -kv[1][2])[:8]:
        short = "/".join(fn.split("/")[-2:]) + f":{line}" if fn != "~" else ""
        print(f"    {entry[2] / total:6.1%} {entry[1]:>9} calls  {short}({name})")


def experiments(samples: Sequence[Sample], full: PodPolicies) -> None:
    """What the parts of the policy step cost, measured here without changing reconciler/."""
    n = len(samples)
    print()
    print("EXPERIMENTS: CPU per Pod, best of 3 passes over all Pods each (so compare them with the")
    print("reference line, timed the same way, rather than with the table above)")

    def step(i: int) -> None:  # a new Pod: memos emptied (well under 1% of the time)
        forget(full)
        policy_step(full, samples[i].pod, samples[i].namespace)

    reference = _best_per_pod(step, n)
    print(f"  reference: the policy step of (c): {reference * 1e3:.2f} ms per Pod")

    runs: Counter[str] = Counter()
    real_run = engine._run

    def counting(program: Any, activation: dict[str, Any], *rest: Any) -> Any:
        runs["programs"] += 1
        return real_run(program, activation, *rest)

    with mock.patch.object(engine, "_run", counting):
        for s in samples:
            forget(full)
            full.judge(s.pod, s.namespace)
    per_pod = runs["programs"] / n
    print(
        f"  CEL programs run per Pod (matchConditions, validations, messages): {per_pod:.1f}, "
        f"{reference / per_pod * 1e6:.0f} us each on average (with the engine's share)"
    )

    reads = _best_per_pod(lambda i: full.reads_namespace, n)
    print(f"  PodPolicies.reads_namespace (recomputed per Pod): {reads * 1e6:.0f} us")

    base = params()
    roots = [
        {"object": s.pod, "params": dict(base), "namespaceObject": dict(s.namespace)}
        for s in samples
    ]
    convert = _best_per_pod(lambda i: {k: to_cel(v) for k, v in roots[i].items()}, n)
    celpys = _best_per_pod(lambda i: {k: celpy.json_to_cel(v) for k, v in roots[i].items()}, n)
    print(
        f"  to_cel of Pod + params + Namespace: {convert * 1e6:.0f} us ({convert / reference:.1%};"
        f" celpy's json_to_cel: {celpys * 1e6:.0f} us); once per Pod, at its first memo miss"
    )
    keyed = [p for p in full.policies if hasattr(p, "inputs")]
    memo_keys = _best_per_pod(lambda i: [inputs_key(p.inputs, roots[i], {}) for p in keyed], n)
    shared: dict[Any, str] = {}

    def keys(i: int) -> None:
        shared.clear()
        for p in keyed:
            inputs_key(p.inputs, roots[i], shared)

    memo_keys_shared = _best_per_pod(keys, n)
    print(
        f"  the memo's keys (inputs_key, JSON of what each policy reads) for all {len(keyed)} "
        f"policies: {memo_keys_shared * 1e6:.0f} us per Pod, paid by every Pod "
        f"({memo_keys * 1e6:.0f} us without sharing a path's JSON between policies)"
    )

    per_policy = []
    for compiled in full.policies:
        alone = PodPolicies((compiled,), full.params)

        def judge_alone(i: int, alone: PodPolicies = alone) -> None:
            forget(alone)
            alone.judge(samples[i].pod, samples[i].namespace)

        t = _best_per_pod(judge_alone, n)
        per_policy.append((max(t - convert, 0.0), compiled.policy.name, compiled.policy.origin))
    per_policy.sort(reverse=True)
    forget(full)
    together = sum(t for t, _, _ in per_policy)
    print("  per policy (judge with that policy alone, minus to_cel):")
    for t, name, origin in per_policy[:8]:
        print(f"    {t * 1e6:6.0f} us  {name} ({origin})")
    rest = per_policy[8:]
    print(
        f"    {sum(t for t, _, _ in rest) * 1e6:6.0f} us  the other {len(rest)}; all "
        f"{len(per_policy)} + one to_cel: {(together + convert) * 1e3:.2f} ms "
        f"(reference {reference * 1e3:.2f})"
    )


def _best_per_pod(call: Callable[[int], Any], count: int, passes: int = 3) -> float:
    best = float("inf")
    for _ in range(passes):
        gc.collect()
        c0 = time.thread_time_ns()
        for i in range(count):
            call(i)
        best = min(best, (time.thread_time_ns() - c0) / 1e9 / count)
    return best


# ---- main ---------------------------------------------------------------------------------------
