"""Plan benchmark (issue 4): time of a live plan against 100 ... 10,000 Slurm nodes.

Not a test: run it by hand from the repo root and read the figures.

    python -m bench.plan_bench               # or: python bench/plan_bench.py
    python -m bench.plan_bench --repeat 3 --sizes 100,1000,3000,10000
    python -m bench.plan_bench --apiserver   # + the cost of the API requests (local apiserver)

What is timed is the pure part of `reconciler plan` against a live cluster, no I/O:

    needs_dry_run(state, live)                       which objects need a server-side dry-run
    plan_changes(state, live, server_view=...)       the diff (Kubernetes and Slurm)
    render_text(plan), render_json(plan)             what the user / CI bot reads

The desired state is compiled from bench.compile_bench's synthetic repo (10 replicas per node
definition, 6 layers each). The live state is made from a desired state as the API server would
hold it: each object gets the fields the server adds (uid, resourceVersion, generation,
creationTimestamp, managedFields, status, and the defaults of kube-apiserver 1.20), so the
differ walks objects of their real size. Three scenarios per size: steady state (nothing to do),
10% of the StatefulSets changed in one env value, and a scale-down by 2 replicas everywhere.

The machine is shared and noisy: every size and scenario is timed in the same run, interleaved
round-robin, and each figure is the best of --repeat runs with the median next to it; linearity
is judged from ratios between sizes, not from absolute times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

if __package__ in (None, ""):  # `python bench/plan_bench.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.compile_bench import REPLICAS, Workload, generate_repo, main_workloads
from bench.harness.report import machine_line, ms, print_head
from bench.harness.timing import Times, round_robin, stage_times, stamp
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.config.files import read_library
from reconciler.config.repo import load_config
from reconciler.plan.diff import desired_kube_objects, desired_objects, needs_dry_run, plan_changes
from reconciler.plan.jsonout import render_json
from reconciler.plan.live import LiveNode, LiveState
from reconciler.plan.model import (
    KUBERNETES,
    SLURM,
    SLURM_CONFIG,
    SLURM_NODE,
    STEP_DRAIN,
    STEP_RETIRE,
    Action,
    ObjectRef,
    Plan,
    Summary,
)
from reconciler.plan.text import render_text

STAGES = ("dry-run?", "plan", "text", "json", "total")
# What the API server adds, as kube-apiserver 1.20.2 returns it (checked against the real one:
# `python -m bench.plan_bench --apiserver` prints how close the synthetic objects come).
SERVER_TIME = "2024-05-01T12:00:00Z"
FIELD_MANAGER_APPLY = "sunk-reconciler"
SCALE_DOWN = 2  # replicas every StatefulSet loses in the scale-down scenario
CHANGED_EVERY = 10  # one StatefulSet in this many differs in the one-layer scenario
CHANGED_ENV = "COST_CENTER"  # set by the team-NN layers
OLD_VALUE = "cc-old"
ENV_PATH = f"spec.template.spec.containers[name=slurmd].env[name={CHANGED_ENV}].value"


# --------------------------------------------------------------------------- live state


def server_object(obj: Mapping[str, Any], serial: int, *, generation: int = 1) -> dict[str, Any]:
    """`obj` as the API server would return it after we applied it: a fresh JSON-decoded copy
    with server metadata, managedFields, status and defaults."""
    out: dict[str, Any] = json.loads(json.dumps(obj))
    kind, meta = out["kind"], out["metadata"]
    name = meta["name"]
    managed = [_managed_entry(FIELD_MANAGER_APPLY, "Apply", out["apiVersion"], _fields_v1(obj))]
    meta.update(
        uid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{meta.get('namespace')}/{name}")),
        resourceVersion=str(1000 + serial),
        creationTimestamp=SERVER_TIME,
        managedFields=managed,
    )
    if kind == "StatefulSet":
        meta["generation"] = generation
        spec = out["spec"]
        spec.setdefault("revisionHistoryLimit", 10)
        template = spec["template"]
        template["metadata"].setdefault("creationTimestamp", None)
        pod = template["spec"]
        for key, value in (
            ("restartPolicy", "Always"),
            ("dnsPolicy", "ClusterFirst"),
            ("schedulerName", "default-scheduler"),
            ("securityContext", {}),
        ):
            pod.setdefault(key, value)
        for container in [*pod.get("containers", ()), *pod.get("initContainers", ())]:
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            image = container.get("image", "")
            tagged = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
            container.setdefault("imagePullPolicy", "IfNotPresent" if tagged else "Always")
            for env in container.get("env", ()):
                ref = (env.get("valueFrom") or {}).get("fieldRef")
                if ref is not None:
                    ref.setdefault("apiVersion", "v1")
            for port in container.get("ports", ()):
                port.setdefault("protocol", "TCP")
        for volume in pod.get("volumes", ()):
            if "configMap" in volume:
                volume["configMap"].setdefault("defaultMode", 420)
        replicas = spec.get("replicas", 1)
        revision = f"{name}-7b9f6cd47d"
        out["status"] = {
            "observedGeneration": generation,
            "replicas": replicas,
            "readyReplicas": replicas,
            "currentReplicas": replicas,
            "updatedReplicas": replicas,
            "currentRevision": revision,
            "updateRevision": revision,
            "collisionCount": 0,
        }
        status_fields = {f"f:{k}": {} for k in out["status"]}
        managed.append(
            _managed_entry(
                "kube-controller-manager", "Update", "apps/v1", {"f:status": status_fields}
            )
        )
    elif kind == "Service":
        spec = out["spec"]
        spec.setdefault("clusterIPs", [spec.get("clusterIP", "10.96.0.10")])
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        out["status"] = {"loadBalancer": {}}
    return out


def _managed_entry(manager: str, operation: str, api_version: str, fields: dict) -> dict:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": SERVER_TIME,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }


def _fields_v1(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The FieldsV1 set a server-side apply of `obj` records (what managedFields holds)."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("name", "namespace")}
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    return _field_set({"metadata": meta, **body})


def _field_set(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return {f"f:{k}": _field_set(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(i, dict) for i in value):
        keyed: dict[str, Any] = {}
        for item in value:
            key = _list_key(item)
            if key is None:
                return {}  # an atomic list: owned as a whole
            keyed[f"k:{json.dumps(key, separators=(',', ':'))}"] = {".": {}, **_field_set(item)}
        return keyed
    return {}


def _list_key(item: Mapping[str, Any]) -> dict[str, Any] | None:
    if "containerPort" in item:
        return {"containerPort": item["containerPort"], "protocol": item.get("protocol", "TCP")}
    if "port" in item:
        return {"port": item["port"], "protocol": item.get("protocol", "TCP")}
    if "mountPath" in item:
        return {"mountPath": item["mountPath"]}
    if "name" in item:
        return {"name": item["name"]}
    return None


def live_nodes(state: DesiredState) -> dict[str, LiveNode]:
    return {
        n.name: LiveNode(
            n.name, frozenset({"IDLE"}), None, n.cpus, n.real_memory_mb, n.gres, n.features
        )
        for n in state.slurm_nodes
    }


def live_state(state: DesiredState) -> LiveState:
    """What the adapters would read back from a cluster where `state` was applied."""
    kube = {
        ref: server_object(obj, i)
        for i, (ref, obj) in enumerate(desired_kube_objects(state).items())
    }
    # The generated Secrets exist (their data is never read into live state).
    secrets = frozenset(s.name for s in state.secrets)
    return LiveState(kube, live_nodes(state), state.slurm_conf, state.gres_conf, secrets=secrets)


def with_old_env(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of a live StatefulSet whose slurmd container still has the old env value."""
    out = json.loads(json.dumps(obj))
    [slurmd] = [c for c in out["spec"]["template"]["spec"]["containers"] if c["name"] == "slurmd"]
    [env] = [e for e in slurmd["env"] if e["name"] == CHANGED_ENV]
    env["value"] = OLD_VALUE
    return out


# --------------------------------------------------------------------------- scenarios


@dataclass
class Expected:
    dry_runs: set[ObjectRef]
    summary: Summary
    controller_restart: bool
    updates: set[ObjectRef] = field(default_factory=set)
    deletes: set[ObjectRef] = field(default_factory=set)
    # Field paths every StatefulSet update must show, exactly.
    statefulset_fields: tuple[str, ...] = ()


@dataclass
class Scenario:
    key: str
    title: str
    state: DesiredState
    live: LiveState
    server_view: dict[ObjectRef, dict[str, Any]]
    expected: Expected


SCENARIOS = (
    ("steady", "1. steady state: live == desired (no dry-run requests, no changes)"),
    (
        "layer",
        f"2. one layer changed: 1 StatefulSet in {CHANGED_EVERY} differs live in one env value "
        f"({CHANGED_ENV}); dry-run views for those",
    ),
    (
        "scale",
        f"3. scale-down: every StatefulSet {REPLICAS} -> {REPLICAS - SCALE_DOWN} replicas "
        f"(live has {SCALE_DOWN} extra Slurm nodes each: drain + retire)",
    ),
)


def _statefulsets(state: DesiredState) -> list[ObjectRef]:
    """The node sets' StatefulSets (not the login StatefulSet every config renders)."""
    return [
        r
        for r, o in desired_kube_objects(state).items()
        if r.kind == "StatefulSet"
        and o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "compute"
    ]


def _summary(state: DesiredState, add=0, change=0, destroy=0, drain=0, reconfigure=0) -> Summary:
    # Every desired object that is neither created nor updated is counted unchanged.
    unchanged = len(desired_objects(state)) - add - change
    return Summary(add, change, destroy, unchanged, drain, reconfigure)


def build_scenarios(workload: Workload, library: Mapping[str, str]) -> list[Scenario]:
    """All three scenarios of one size; compiled and built once, outside the timings."""
    full = compile_desired_state(load_config(generate_repo(workload), library))
    smaller = Workload(workload.label, workload.definitions, REPLICAS - SCALE_DOWN)
    scaled = compile_desired_state(load_config(generate_repo(smaller), library))
    live = live_state(full)
    statefulsets = _statefulsets(full)
    want = desired_kube_objects(full)

    # 1. steady state
    steady = Scenario(
        "steady", SCENARIOS[0][1], full, live, {},
        Expected(set(), _summary(full), controller_restart=False),
    )  # fmt: skip

    # 2. one env value differs in every CHANGED_EVERY-th StatefulSet (a layer was edited)
    changed = statefulsets[::CHANGED_EVERY]
    kube = dict(live.kube_objects)
    kube.update({ref: with_old_env(kube[ref]) for ref in changed})
    layer_live = replace(live, kube_objects=kube)
    layer = Scenario(
        "layer", SCENARIOS[1][1], full, layer_live,
        {ref: server_object(want[ref], i, generation=2) for i, ref in enumerate(changed)},
        Expected(
            set(changed), _summary(full, change=len(changed)), controller_restart=False,
            updates=set(changed), statefulset_fields=(ENV_PATH,),
        ),
    )  # fmt: skip

    # 3. scale-down: desired has fewer replicas; live is still the full state
    scaled_want = desired_kube_objects(scaled)
    conf_map = next(r for r in scaled_want if r.kind == "ConfigMap" and r.name.endswith("-conf"))
    dry_runs = {*_statefulsets(scaled), conf_map}
    gone = {
        ObjectRef(SLURM, SLURM_NODE, "", f"{ref.name}-{ordinal}")
        for ref in _statefulsets(scaled)
        for ordinal in range(REPLICAS - SCALE_DOWN, REPLICAS)
    }
    slurm_conf = ObjectRef(SLURM, SLURM_CONFIG, "", "slurm.conf")
    scale = Scenario(
        "scale", SCENARIOS[2][1], scaled, live,
        {ref: server_object(scaled_want[ref], i, generation=2) for i, ref in enumerate(dry_runs)},
        Expected(
            dry_runs,
            _summary(
                scaled, change=len(dry_runs) + 1, destroy=len(gone), drain=len(gone),
                reconfigure=1,
            ),
            controller_restart=True,  # NodeName lines lose nodes (no maxReplicas spares here)
            updates={*dry_runs, slurm_conf}, deletes=gone, statefulset_fields=("spec.replicas",),
        ),
    )  # fmt: skip
    return [steady, layer, scale]


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


# --------------------------------------------------------------------------- report


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


# --------------------------------------------------------------------------- API requests


def apiserver_estimate(scenarios: dict[str, list[Scenario]], requests: int) -> None:
    """Secondary: what the requests a live plan makes cost against a real local kube-apiserver
    1.20.2 (reconciler/local; `reconciler local setup` fetches it). Skipped when it is missing."""
    from reconciler.adapters.kube import Kube
    from reconciler.errors import LocalStackError
    from reconciler.local import kube as kube_module
    from reconciler.local.stack import LocalStack, new_temp_runtime_dir

    print()
    print("SECONDARY: API request cost (real local kube-apiserver; not part of the pure figures)")
    try:
        kube_module.find_binaries()
    except LocalStackError as exc:
        print(f"  skipped: {exc.message}")
        return
    # The largest size with at most 1,000 StatefulSets (the 10,000-node workload's count).
    label, scs = max(
        ((lb, s) for lb, s in scenarios.items() if len(_statefulsets(s[0].state)) <= 1000),
        key=lambda item: len(_statefulsets(item[1][0].state)),
    )
    steady, _, scale = scs
    objects = list(desired_kube_objects(steady.state).values())
    runtime = new_temp_runtime_dir("plan-bench-")
    stack = LocalStack(runtime, cluster_name="plan-bench")
    client = None
    try:
        started = time.perf_counter()
        stack.up_kube()
        up = time.perf_counter() - started
        print(f"  etcd + kube-apiserver + kube-controller-manager up in {up:.1f} s")
        assert stack.kube is not None
        client = Kube.from_kubeconfig(stack.kube.paths.kubeconfig)
        namespace = steady.state.namespace
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        # Create the live objects, StatefulSets at replicas 0 (no Pods for the controllers).
        started = time.perf_counter()
        for obj in objects:
            body = json.loads(json.dumps(obj))
            if body["kind"] == "StatefulSet":
                body["spec"]["replicas"] = 0
            client.apply(body)
        created = time.perf_counter() - started
        sts_count = sum(1 for o in objects if o["kind"] == "StatefulSet")
        print(
            f"  created the {label}-node workload's {len(objects)} objects ({sts_count} "
            f"StatefulSets at replicas 0) in {created:.1f} s, sequential applies"
        )
        _compare_with_server(client, steady, namespace)
        selector = "app.kubernetes.io/managed-by=sunk-reconciler"
        lists = []
        for _ in range(3):
            t0 = time.perf_counter()
            listed = client.list("apps/v1", "StatefulSet", namespace, label_selector=selector)
            lists.append(time.perf_counter() - t0)
        assert len(listed.items) == sts_count, len(listed.items)
        print(
            f"  LIST {sts_count} StatefulSets (one paged read): best {min(lists) * 1000:.0f} ms, "
            f"median {statistics.median(lists) * 1000:.0f} ms"
        )
        # Sequential server-side-apply dry-runs of the scale-down's objects (desired replicas).
        views = list(scale.server_view)
        scaled = desired_kube_objects(scale.state)
        times = []
        for i in range(requests):
            obj = scaled[views[i % len(views)]]
            t0 = time.perf_counter()
            view = client.apply(obj, dry_run=True)
            times.append(time.perf_counter() - t0)
            assert view["metadata"]["name"] == obj["metadata"]["name"]
        per = statistics.median(times)
        print(
            f"  {requests} sequential server-side-apply dry-runs (PATCH ?dryRun=All): median "
            f"{per * 1000:.1f} ms, best {min(times) * 1000:.1f} ms, p90 "
            f"{sorted(times)[int(len(times) * 0.9)] * 1000:.1f} ms per request"
        )
        print("  estimate for the dry-runs a plan needs, sequential, at the median (pure plan time "
              "is separate):")  # fmt: skip
        for lb, s in scenarios.items():
            line = ", ".join(
                f"{sc.key} {len(sc.expected.dry_runs):,} -> {len(sc.expected.dry_runs) * per:.2f} s"
                for sc in s
            )
            print(f"    {lb:>6} nodes: {line}")
    finally:
        if client is not None:
            client.close()
        stack.down()
        shutil.rmtree(runtime, ignore_errors=True)


def _compare_with_server(client: Any, steady: Scenario, namespace: str) -> None:
    """How close the synthetic live objects are to what the server really returns."""
    sts = next(r for r in steady.live.kube_objects if r.kind == "StatefulSet")
    real = client.get("apps/v1", "StatefulSet", sts.name, namespace)
    ours = steady.live.kube_objects[sts]

    def paths(value: Any, prefix: str = "") -> set[str]:
        if isinstance(value, dict):
            return {p for k, v in value.items() for p in paths(v, f"{prefix}.{k}")} | {prefix}
        if isinstance(value, list):
            return {p for i, v in enumerate(value) for p in paths(v, f"{prefix}[{i}]")} | {prefix}
        return {prefix}

    skip = ".metadata.managedFields"
    mine = {p for p in paths(ours) if not p.startswith(skip)}
    theirs = {p for p in paths(real) if not p.startswith(skip)}
    only_real = sorted(theirs - mine)
    only_ours = sorted(mine - theirs)
    print(
        f"  synthetic vs real live StatefulSet {sts.name}: {len(json.dumps(ours))} vs "
        f"{len(json.dumps(real))} bytes JSON; field paths only in the real one: "
        f"{only_real or 'none'}; only in ours: {only_ours or 'none'} (managedFields not compared)"
    )


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.plan_bench",
        description="Time of the pure live plan (needs_dry_run, plan_changes, render) at sizes.",
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs per size and scenario")
    parser.add_argument(
        "--sizes",
        default="100,1000,10000",
        help=f"comma-separated Slurm node counts, multiples of {REPLICAS} (default 100,1000,10000)",
    )
    parser.add_argument(
        "--apiserver",
        action="store_true",
        help="also time real API requests against a temporary local kube-apiserver (secondary)",
    )
    parser.add_argument(
        "--requests", type=int, default=200, help="dry-run requests to time with --apiserver"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    workloads = main_workloads(sizes)
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
