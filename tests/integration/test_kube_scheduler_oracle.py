"""Differential test: our filters (kuberules.feasibility) against the real kube-scheduler 1.20.

Hypothesis makes Nodes (labels, taints, cordons, capacity), Pods bound to them (labels,
requests, required anti-affinity) and one more Pod (requests with init containers and a
RuntimeClass overhead, nodeSelector, required node affinity, tolerations, topology spread,
pod affinity and anti-affinity), all within what Kubernetes 1.20 has. kube-scheduler places
the Pod on a private local control plane, and we must agree:
- the Node it chose is one we find feasible;
- when it leaves the Pod unschedulable, we find no Node feasible, and our reasons per Node
  add up to the same "0/N nodes are available: ..." histogram it wrote.

The number of examples is bounded (SUNK_ORACLE_EXAMPLES, default 50) and the seed printed
(set SUNK_ORACLE_SEED to replay one). A shrunk counter-example becomes a row of
tests/unit/test_kube_feasibility.py.
"""

from __future__ import annotations

import collections
import json
import os
import random
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, seed, settings
from hypothesis import strategies as st

from reconciler.adapters.kube import Kube
from reconciler.kuberules.feasibility import filter_nodes
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import new_temp_runtime_dir
from tests.integration.conftest import require_kube_binaries, unavailable
from tests.integration.kube_oracle import (
    NODE_TOKEN,
    RUNTIME_CLASS,
    Example,
    KubeScheduler,
    Oracle,
    Verdict,
    scheduler_binary,
)

Obj = dict[str, Any]
EXAMPLES = int(os.environ.get("SUNK_ORACLE_EXAMPLES", "50"))
SEED = int(os.environ.get("SUNK_ORACLE_SEED") or random.SystemRandom().randrange(2**32))
TALLY: collections.Counter[str] = collections.Counter()


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    require_kube_binaries()
    if not os.access(scheduler_binary(), os.X_OK):
        unavailable(f"no kube-scheduler at {scheduler_binary()}: run tools/setup.sh")
    runtime = new_temp_runtime_dir("sunk-reconciler-oracle-")
    stack = LocalStack(runtime, cluster_name="oracle")
    scheduler = None
    try:
        stack.up_kube()
        assert stack.kube is not None
        kubeconfig = stack.kube.paths.kubeconfig
        scheduler = KubeScheduler(kubeconfig, runtime / "kube-scheduler.log")
        scheduler.start()
        kube = Kube.from_kubeconfig(kubeconfig)
        oracle = Oracle(kube)
        oracle.install()
        yield oracle
        assert scheduler.alive(), (runtime / "kube-scheduler.log").read_text()[-3000:]
    finally:
        if scheduler is not None:
            scheduler.stop()
        stack.down()
        shutil.rmtree(runtime, ignore_errors=True)


# ---- what hypothesis makes ------------------------------------------------------------------

ZONES, RACKS, TIERS = ["a", "b"], ["r1", "r2", "r3"], ["1", "5", "x"]
LABEL_VALUES = {"zone": ZONES, "rack": RACKS, "tier": TIERS}
TOPOLOGY_KEYS = ["zone", "rack", "kubernetes.io/hostname"]
TAINTS = [
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "cpu", "effect": "NoExecute"},
    {"key": "maint", "effect": "NoExecute"},
    {"key": "soft", "effect": "PreferNoSchedule"},
]
TOLERATIONS = [
    {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Exists"},
    {"operator": "Exists"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "maint", "operator": "Exists", "effect": "NoExecute"},
]
APP_SELECTORS = [
    {"matchLabels": {"app": "web"}},
    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]},
    {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]},
]


def sometimes(draw: st.DrawFn, one_in: int) -> bool:
    """True about once in `one_in` draws: each constraint alone, so that kube-scheduler
    places about half the Pods and leaves the others Pending. True on the largest draw, not
    the smallest: hypothesis favours small integers, and shrinks towards them, so its
    simplest example has no constraint at all."""
    return draw(st.integers(1, one_in)) == one_in


def node_names(count: int) -> list[str]:
    return [f"{NODE_TOKEN}{i}" for i in range(count)]


@st.composite
def a_node(draw: st.DrawFn, name: str) -> Obj:
    labels = {"kubernetes.io/hostname": name}
    for key, values in LABEL_VALUES.items():
        if not sometimes(draw, 4):  # mostly labelled: spreading and affinity have domains
            labels[key] = draw(st.sampled_from(values))
    capacity = {
        "cpu": draw(st.sampled_from(["2", "4", "8"])),
        "memory": draw(st.sampled_from(["4Gi", "8Gi"])),
        "pods": draw(st.sampled_from(["3", "110", "110"])),
    }
    if gpus := draw(st.sampled_from([None, "1", "4", "4"])):
        capacity["nvidia.com/gpu"] = gpus
    spec: Obj = {}
    if sometimes(draw, 3):
        taints = draw(
            st.lists(st.sampled_from(TAINTS), min_size=1, max_size=2, unique_by=_taint_id)
        )
        spec["taints"] = taints
    if sometimes(draw, 8):
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def _taint_id(taint: Obj) -> tuple[str, str]:
    return taint["key"], taint["effect"]


def a_container(name: str, cpu: list[str], memory: list[str], gpus: bool) -> st.SearchStrategy:
    @st.composite
    def build(draw: st.DrawFn) -> Obj:
        requests = {"cpu": draw(st.sampled_from(cpu)), "memory": draw(st.sampled_from(memory))}
        if gpus and sometimes(draw, 4) and (count := draw(st.sampled_from(["1", "2"]))):
            requests["nvidia.com/gpu"] = count
        limits = {k: v for k, v in requests.items() if k == "nvidia.com/gpu"}
        resources: Obj = {"requests": requests}
        if limits:
            resources["limits"] = limits  # extended resources need limit == request
        return {"name": name, "image": "oracle.invalid/none", "resources": resources}

    return build()


@st.composite
def a_requirement(draw: st.DrawFn) -> Obj:
    key = draw(st.sampled_from(sorted(LABEL_VALUES)))
    operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    if operator in ("In", "NotIn"):
        values = draw(st.lists(st.sampled_from(LABEL_VALUES[key]), min_size=1, max_size=2,
                               unique=True))  # fmt: skip
        return {"key": key, "operator": operator, "values": values}
    if operator in ("Gt", "Lt"):
        return {"key": key, "operator": operator, "values": [draw(st.sampled_from(["0", "3"]))]}
    return {"key": key, "operator": operator}


@st.composite
def a_term(draw: st.DrawFn, names: list[str]) -> Obj:
    term: Obj = {}
    if expressions := draw(st.lists(a_requirement(), max_size=2)):
        term["matchExpressions"] = expressions
    if draw(st.booleans()) and draw(st.booleans()):
        term["matchFields"] = [{"key": "metadata.name",
                                "operator": draw(st.sampled_from(["In", "NotIn"])),
                                "values": [draw(st.sampled_from(names))]}]  # fmt: skip
    return term


@st.composite
def a_pod_term(draw: st.DrawFn) -> Obj:
    return {
        "labelSelector": draw(st.sampled_from(APP_SELECTORS)),
        "topologyKey": draw(st.sampled_from(TOPOLOGY_KEYS)),
    }


@st.composite
def an_affinity(draw: st.DrawFn, names: list[str]) -> Obj:
    affinity: Obj = {}
    if sometimes(draw, 3):
        terms = draw(st.lists(a_term(names), min_size=1, max_size=2))
        required = {"nodeSelectorTerms": terms}
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": required}
    for kind in ("podAffinity", "podAntiAffinity"):
        if sometimes(draw, 5):
            affinity[kind] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [draw(a_pod_term())]
            }
    return affinity


@st.composite
def a_bound_pod(draw: st.DrawFn, index: int, names: list[str]) -> Obj:
    spec: Obj = {
        "nodeName": draw(st.sampled_from(names)),
        "containers": [draw(a_container("c", ["100m", "1"], ["128Mi", "1Gi"], gpus=True))],
    }
    if sometimes(draw, 4):
        required = [draw(a_pod_term())]
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                required}}  # fmt: skip
    labels = {"app": draw(st.sampled_from(["web", "db"]))}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"bound-{index}", "labels": labels}, "spec": spec}  # fmt: skip


@st.composite
def an_example(draw: st.DrawFn) -> Example:
    names = node_names(draw(st.integers(1, 4)))
    nodes = [draw(a_node(name)) for name in names]
    bound = [draw(a_bound_pod(i, names)) for i in range(draw(st.integers(0, 5)))]
    containers = [draw(a_container(f"c{i}", ["100m", "500m", "1", "2"],
                                   ["128Mi", "1Gi", "3Gi"], gpus=True))
                  for i in range(draw(st.integers(1, 2)))]  # fmt: skip
    spec: Obj = {"containers": containers, "terminationGracePeriodSeconds": 0}
    if sometimes(draw, 3):
        spec["initContainers"] = [draw(a_container("init", ["1", "3"], ["1Gi", "5Gi"], False))]
    if sometimes(draw, 4):
        spec["runtimeClassName"] = RUNTIME_CLASS
    if sometimes(draw, 4):
        key = draw(st.sampled_from(sorted(LABEL_VALUES)))
        spec["nodeSelector"] = {key: draw(st.sampled_from(LABEL_VALUES[key]))}
    if affinity := draw(an_affinity(names)):
        spec["affinity"] = affinity
    if tolerations := draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2)):
        spec["tolerations"] = tolerations
    if sometimes(draw, 3):
        spec["topologySpreadConstraints"] = [{
            "maxSkew": draw(st.integers(1, 2)),
            "topologyKey": draw(st.sampled_from(TOPOLOGY_KEYS)),
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": draw(st.sampled_from(APP_SELECTORS)),
        }]  # fmt: skip
    labels = {"app": draw(st.sampled_from(["web", "db"]))}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "incoming", "labels": labels}, "spec": spec}  # fmt: skip
    return Example(nodes=nodes, bound=bound, pod=pod)


# ---- the comparison -------------------------------------------------------------------------


def our_reasons(verdict: Verdict) -> dict[str, list[str]]:
    return filter_nodes(verdict.pod, verdict.nodes, verdict.bound)


def disagreement(verdict: Verdict) -> str | None:
    ours = our_reasons(verdict)
    if verdict.node is not None:
        if ours.get(verdict.node):
            return f"kube-scheduler bound it to {verdict.node}; we refuse: {ours[verdict.node]}"
        return None
    feasible = [name for name, why in ours.items() if not why]
    if feasible:
        return f"kube-scheduler: {verdict.message!r}; we find feasible: {feasible}"
    histogram = collections.Counter(reason for why in ours.values() for reason in why)
    histogram["<nodes>"] = len(ours)
    if histogram != verdict.reasons:
        return f"kube-scheduler: {verdict.message!r}; our reasons: {dict(histogram)}"
    return None


@seed(SEED)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(example=an_example())
def test_kube_scheduler_and_our_filters_agree(
    oracle: Oracle, figures: dict[str, str], example: Example
) -> None:
    figures["kube-scheduler oracle seed (SUNK_ORACLE_SEED)"] = str(SEED)
    verdict = oracle.decide(example)
    assume(verdict is not None)
    assert verdict is not None
    TALLY["bound" if verdict.node else "unschedulable"] += 1
    _record(verdict)
    figures["kube-scheduler oracle examples"] = ", ".join(f"{v} {k}" for k, v in TALLY.items())
    problem = disagreement(verdict)
    assert problem is None, (
        f"{problem}\nseed {SEED}\nNodes: {_bare(verdict.nodes)}\nbound: {_bare(verdict.bound)}\n"
        f"Pod: {_bare([verdict.pod])}"
    )


def _record(verdict: Verdict) -> None:
    """With SUNK_ORACLE_RECORD=FILE, each verdict is appended to FILE (JSON lines): where
    tests/unit/test_kube_feasibility.py's rows come from."""
    path = os.environ.get("SUNK_ORACLE_RECORD")
    if path:
        row = {
            "nodes": _bare(verdict.nodes),
            "bound": _bare(verdict.bound),
            "pod": _bare([verdict.pod])[0],
            "node": verdict.node,
            "message": verdict.message,
        }
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")


def _bare(objects: list[Obj]) -> list[Obj]:
    """What the objects say, without the API server's bookkeeping."""
    keep = ("name", "labels", "namespace")
    return [
        {"metadata": {k: v for k, v in o["metadata"].items() if k in keep},
         "spec": o.get("spec"), "status": o.get("status")}
        for o in objects
    ]  # fmt: skip
