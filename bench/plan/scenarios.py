"""The plan benchmark's three scenarios per size, and what each plan must be."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from bench.compile.workload import REPLICAS, Workload, generate_repo
from bench.plan.live import live_state, server_object
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.config.repo import load_config
from reconciler.plan.diff import desired_kube_objects, desired_objects
from reconciler.plan.live import LiveState
from reconciler.plan.model import SLURM, SLURM_CONFIG, SLURM_NODE, ObjectRef, Summary

STAGES = ("dry-run?", "plan", "text", "json", "total")
SCALE_DOWN = 2  # replicas every StatefulSet loses in the scale-down scenario
CHANGED_EVERY = 10  # one StatefulSet in this many differs in the one-layer scenario
CHANGED_ENV = "COST_CENTER"  # set by the team-NN layers
OLD_VALUE = "cc-old"
ENV_PATH = f"spec.template.spec.containers[name=slurmd].env[name={CHANGED_ENV}].value"


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


def node_set_statefulsets(state: DesiredState) -> list[ObjectRef]:
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
    statefulsets = node_set_statefulsets(full)
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
    dry_runs = {*node_set_statefulsets(scaled), conf_map}
    gone = {
        ObjectRef(SLURM, SLURM_NODE, "", f"{ref.name}-{ordinal}")
        for ref in node_set_statefulsets(scaled)
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
