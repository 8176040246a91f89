"""Where the time of (c) goes (cProfile), and what would make it cheaper (experiments)."""

from __future__ import annotations

import cProfile
import functools
import gc
import logging
import os
import pstats
import time
import typing
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any
from unittest import mock

import celpy
from celpy.celparser import CELParser
from celpy.evaluation import Evaluator

from bench.policy.measure import forget, params, policy_step
from bench.policy.pods import Sample
from reconciler.policy import engine
from reconciler.policy.engine import compile_policies
from reconciler.scheduler.pod_policies import PodPolicies

# ---- profile and experiments ------------------------------------------------------------------

AREAS = (  # (label, substrings of a profiled function's file), first match wins
    ("celpy interpreter (lark tree walk)", ("celpy/evaluation.py", "lark/")),
    ("typing at run time (own time)", ("typing.py",)),
    ("celpy types", ("celpy/celtypes.py",)),
    ("json_to_cel (the activation)", ("celpy/adapter.py",)),
    (
        "Kubernetes CEL library + quantity",
        (
            "reconciler/policy/k8s_library.py",
            "reconciler/compile/quantity.py",
            "fractions.py",
            "decimal",
        ),
    ),
    ("logging (disabled debug calls)", ("logging/",)),
    ("engine + PodPolicies", ("reconciler/policy/engine.py", "reconciler/scheduler/")),
    ("regular expressions", ("re2", "re/", "sre_", "re.py")),
)
CUMULATIVE = (  # (basename:function, what it is)
    ("__init__.py:evaluate", "Runner.evaluate: all program runs"),
    ("typing.py:inner", "typing subscripts at run time (Tuple[Result, Result] ...)"),
    ("__init__.py:new_activation", "a new Activation per program run"),
    ("evaluation.py:set_activation", "its clone + load_values per program run"),
    ("adapter.py:json_to_cel", "json_to_cel (once per Pod)"),
    ("k8s_library.py:call", "Kubernetes CEL library calls"),
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
    """Where a faster engine could come from, measured here without changing reconciler/."""
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

    def counting(program: Any, activation: dict[str, Any]) -> Any:
        runs["programs"] += 1
        return real_run(program, activation)

    with mock.patch.object(engine, "_run", counting):
        for s in samples:
            forget(full)
            full.judge(s.pod, s.namespace)
    per_pod = runs["programs"] / n
    print(
        f"  CEL programs run per Pod (matchConditions, validations, messages): {per_pod:.1f}, "
        f"{reference / per_pod * 1e6:.0f} us each on average"
    )

    reads = _best_per_pod(lambda i: full.reads_namespace, n)
    print(f"  PodPolicies.reads_namespace (recomputed per Pod): {reads * 1e6:.0f} us")

    base = params()

    def activation(s: Sample) -> dict[str, Any]:
        return {
            "object": celpy.json_to_cel(s.pod),
            "params": celpy.json_to_cel(dict(base)),
            "namespaceObject": celpy.json_to_cel(dict(s.namespace)),
        }

    convert = _best_per_pod(lambda i: activation(samples[i]), n)
    print(
        f"  json_to_cel of Pod + params + Namespace: {convert * 1e6:.0f} us "
        f"({convert / reference:.1%}); evaluate() converts once per Pod (at its first memo "
        "miss), not per policy"
    )
    keyed = [p for p in full.policies if hasattr(p, "inputs")]
    if keyed:
        from reconciler.policy.inputs import inputs_key

        base_roots = dict(base)

        def keys(i: int) -> None:
            roots = {
                "object": samples[i].pod,
                "params": base_roots,
                "namespaceObject": samples[i].namespace,
            }
            for p in keyed:
                inputs_key(p.inputs, roots)

        memo_keys = _best_per_pod(keys, n)
        print(
            f"  the memo's keys (inputs_key, JSON of what each policy reads) for all "
            f"{len(keyed)} policies: {memo_keys * 1e6:.0f} us per Pod, paid by every Pod"
        )

    env = celpy.Environment()
    trivial = env.program(env.compile("true"))
    acts = [activation(s) for s in samples]
    fixed = _best_per_pod(lambda i: trivial.evaluate(acts[i]), n)
    prepared = []
    for act in acts:
        one = trivial.new_activation().clone()
        one.identifiers.load_values(act)
        prepared.append(one)
    reuse = _best_per_pod(lambda i: Evaluator(trivial.ast, prepared[i]).evaluate(), n)
    print(
        f"  fixed cost of a program run (`true` through Runner.evaluate: new Activation, clone, "
        f"load_values): {fixed * 1e6:.0f} us x {per_pod:.1f} = {fixed * per_pod * 1e3:.2f} ms "
        f"({fixed * per_pod / reference:.1%})"
    )
    print(
        f"    on one Activation built per Pod (Evaluator(ast, act).evaluate()): {reuse * 1e6:.0f} "
        f"us a run: would save {(fixed - reuse) * per_pod * 1e3:.2f} ms "
        f"({(fixed - reuse) * per_pod / reference:.1%})"
    )

    plain, hashed = float("inf"), float("inf")
    for _ in range(3):  # interleaved: the two are compared with each other
        plain = min(plain, _best_per_pod(step, n, passes=1))
        hashed = min(hashed, _with_cached_union_hash(lambda: _best_per_pod(step, n, passes=1)))
    print(
        "  typing.Union hashes memoized (celpy subscripts Tuple[Result, Result] & co. in its hot "
        "paths; each subscript hashes the Result Union anew, through a frozenset of its members): "
        f"{hashed * 1e3:.2f} ms against {plain * 1e3:.2f} ({hashed / plain - 1:+.0%})"
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
    print("  per policy (judge with that policy alone, minus json_to_cel):")
    for t, name, origin in per_policy[:8]:
        print(f"    {t * 1e3:6.2f} ms  {name} ({origin})")
    rest = per_policy[8:]
    print(
        f"    {sum(t for t, _, _ in rest) * 1e3:6.2f} ms  the other {len(rest)}; all "
        f"{len(per_policy)} + one json_to_cel: {(together + convert) * 1e3:.2f} ms "
        f"(reference {reference * 1e3:.2f})"
    )
    transpiled_experiment(samples, full, reference)


def _with_cached_union_hash(measure: Callable[[], float]) -> float:
    """Run `measure` with typing's Union.__hash__ memoized per object (restored after)."""
    union = typing._UnionGenericAlias  # type: ignore[attr-defined]
    original = union.__hash__
    memo: dict[int, tuple[Any, int]] = {}

    def cached(self: Any) -> int:
        found = memo.get(id(self))
        if found is None:
            found = memo[id(self)] = (self, original(self))
        return found[1]

    union.__hash__ = cached
    try:
        return measure()
    finally:
        union.__hash__ = original


def transpiled_experiment(samples: Sequence[Sample], full: PodPolicies, reference: float) -> None:
    """celpy 0.5's other runner, CompiledRunner (CEL transpiled to Python): faster, but right?
    Compiled with the engine's own compile_policies under a patched Environment; celpy's parser
    is a singleton made for one tree class, so it is rebuilt for the transpiler and after it."""
    celpy_log = logging.getLogger("celpy")
    level = celpy_log.level
    celpy_log.setLevel(logging.CRITICAL)  # it logs every failed exec() as an "Internal error"
    try:
        CELParser.CEL_PARSER = None
        environment = functools.partial(celpy.Environment, runner_class=celpy.CompiledRunner)
        with mock.patch.object(engine.celpy, "Environment", environment):
            try:
                compiled = compile_policies(p.policy for p in full.policies)
            except Exception as error:  # report it, do not stop the benchmark
                print(f"  celpy CompiledRunner: does not compile these policies ({error})")
                return
        fast = PodPolicies(compiled, full.params)
        differ = failed = 0
        for s in samples:
            got = fast.judge(s.pod, s.namespace).findings
            differ += got != full.judge(s.pod, s.namespace).findings
            failed += sum(f.reason == "InternalError" for f in got)
        n = len(samples)

        def judge_fast(i: int) -> None:
            forget(fast)
            fast.judge(samples[i].pod, samples[i].namespace)

        t = _best_per_pod(judge_fast, n)
        print(
            f"  celpy's CompiledRunner (CEL transpiled to Python): {t * 1e3:.2f} ms "
            f"({t / reference - 1:+.0%}), but its findings differ on {differ} of {n} Pods: "
            f"{failed / n:.1f} of the {len(fast.policies)} policies fail per Pod (its generated "
            "code errors on has(), `cond ? a : b` and more), so that time is mostly of failing "
            "code; it also runs through module globals (not thread-safe): not a way out"
        )
    finally:
        CELParser.CEL_PARSER = None
        celpy_log.setLevel(level)


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
