"""Node health, both ways: the pure decisions (Kubernetes Nodes x slurmd Pods x Slurm nodes ->
actions), and the shell's promises that need no cluster (a failed action does not stop the
others; a node slurmrestd does not know is never drained; errors reach /metrics)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import generate_latest

from reconciler import wellknown as wk
from reconciler.adapters.scontrol_args import check_text
from reconciler.adapters.slurm.client import SlurmRestClient
from reconciler.adapters.slurm.model import Snapshot
from reconciler.adapters.slurm.transport import Response, wire_errors
from reconciler.adapters.slurm.v0038 import CODEC as V0038
from reconciler.adapters.slurm.v0038 import node_from_wire
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.errors import ScontrolError
from reconciler.sync.node_health_decide import (
    Cordon,
    Drain,
    KubeNode,
    NodeSyncPlan,
    NodeSyncSettings,
    PodHealth,
    Resume,
    SetPodHealth,
    SlurmdPod,
    SlurmNodeView,
    Uncordon,
    kube_node_from,
    plan_node_health,
    slurmd_pod_from,
    standing_reason,
)
from reconciler.sync.node_health_effects import NodeSync

NOW = "2024-05-01T12:00:00Z"
EARLIER = "2020-01-01T00:00:00Z"
NPD = NodeSyncSettings(drain_on_conditions=frozenset({"KernelDeadlock"}),
                       drain_on_taints=frozenset({"example.com/gpu-broken"}))  # fmt: skip
CORDON = NodeSyncSettings(cordon_when_slurm_down=True)
K8S = wk.DRAIN_REASON_K8S_PREFIX


def pod(name: str, node: str, slurm: SlurmNodeView | None = None) -> SlurmdPod:
    """A slurmd Pod; with `slurm`, already showing that node's health (nothing to write)."""
    if slurm is None:
        return SlurmdPod("slurm", name, node)
    planned = plan_node_health([KubeNode(node)], [SlurmdPod("slurm", name, node)], [slurm],
                               NodeSyncSettings(), now=NOW)  # fmt: skip
    [update] = [a for a in planned.actions if isinstance(a, SetPodHealth)]
    return shown(SlurmdPod("slurm", name, node), update)


def shown(before: SlurmdPod, update: SetPodHealth) -> SlurmdPod:
    """The Pod after the sync's writes."""
    annotations = dict(before.annotations)
    for key, value in (update.annotations or {}).items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    return replace(before, annotations=annotations, health=update.condition or before.health)


def idle(name: str, *flags: str, reason: str = "", state: str = "IDLE") -> SlurmNodeView:
    return SlurmNodeView(name, state, frozenset(flags), reason)


def plan(
    nodes: Iterable[KubeNode],
    pods: Iterable[SlurmdPod],
    slurm: Iterable[SlurmNodeView],
    settings: NodeSyncSettings | None = None,
) -> NodeSyncPlan:
    return plan_node_health(nodes, pods, slurm, settings or NodeSyncSettings(), now=NOW)


def slurm_actions(planned: NodeSyncPlan) -> list[Any]:
    return [a for a in planned.actions if isinstance(a, Drain | Resume | Cordon | Uncordon)]


# ---- Kubernetes -> Slurm ----------------------------------------------------------------------


def test_a_cordoned_node_drains_its_slurm_nodes_saying_why() -> None:
    a, b = idle("gpu-a"), idle("gpu-b")
    planned = plan([KubeNode("gpu-1", unschedulable=True)],
                   [pod("gpu-a", "gpu-1", a), pod("gpu-b", "gpu-1", b)], [a, b])  # fmt: skip
    assert slurm_actions(planned) == [
        Drain("gpu-a", "k8s: node gpu-1 cordoned"), Drain("gpu-b", "k8s: node gpu-1 cordoned"),
    ]  # fmt: skip
    assert planned.problems == ()


def test_uncordon_resumes_only_drains_that_carry_the_k8s_prefix() -> None:
    ours = idle("a", "DRAIN", reason="k8s: node n1 cordoned")
    admin = idle("b", "DRAIN", reason="admin: bad DIMM")
    scale_down = idle("c", "DRAIN", reason=f"{wk.DRAIN_REASON_PREFIX} removed by apply")
    by_slurm = idle("d", "NOT_RESPONDING", reason="Not responding", state="DOWN")
    nodes = [ours, admin, scale_down, by_slurm]
    planned = plan([KubeNode("n1")], [pod(n.name, "n1", n) for n in nodes], nodes)
    assert slurm_actions(planned) == [Resume("a", "k8s: node n1 cordoned")]


def test_an_admin_drain_survives_a_cordon_and_an_uncordon() -> None:
    admin = idle("a", "DRAIN", reason="admin")
    for node in (KubeNode("n1", unschedulable=True), KubeNode("n1")):
        assert slurm_actions(plan([node], [pod("a", "n1", admin)], [admin])) == []


@given(
    reason=st.text(min_size=1, max_size=40).filter(lambda r: not r.startswith(K8S)),
    state=st.sampled_from(["IDLE", "ALLOCATED", "MIXED", "DOWN"]),
    flags=st.sets(st.sampled_from(["DRAIN", "FAIL", "NOT_RESPONDING", "COMPLETING"])),
    unschedulable=st.booleans(),
    ready=st.sampled_from(["True", "False", "Unknown", ""]),
)
def test_a_reason_someone_else_set_is_never_overwritten_nor_cleared(
    reason: str, state: str, flags: set[str], unschedulable: bool, ready: str
) -> None:
    theirs = SlurmNodeView("a", state, frozenset(flags), reason)
    node = KubeNode("n1", unschedulable=unschedulable, ready=ready)
    assert slurm_actions(plan([node], [pod("a", "n1")], [theirs], NPD)) == []


def test_not_ready_drains_and_a_node_without_a_ready_condition_does_not() -> None:
    a = idle("a")
    for ready in ("False", "Unknown"):
        planned = plan([KubeNode("n1", ready=ready)], [pod("a", "n1", a)], [a])
        assert slurm_actions(planned) == [Drain("a", "k8s: node n1 NotReady")]
    assert slurm_actions(plan([KubeNode("n1", ready="")], [pod("a", "n1", a)], [a])) == []


def test_configured_conditions_and_taints_drain_others_do_not() -> None:
    a = idle("a")

    def drains(node: KubeNode) -> list[Any]:
        return slurm_actions(plan([node], [pod("a", "n1", a)], [a], NPD))

    deadlock = {"Ready": "True", "KernelDeadlock": "True"}
    assert drains(KubeNode("n1", conditions=deadlock)) == [
        Drain("a", "k8s: node n1 condition KernelDeadlock")
    ]
    assert drains(KubeNode("n1", conditions={"KernelDeadlock": "False"})) == []
    assert drains(KubeNode("n1", conditions={"ReadonlyFilesystem": "True"})) == []
    for effect in ("NoSchedule", "NoExecute"):
        assert drains(KubeNode("n1", taints=(("example.com/gpu-broken", effect),))) == [
            Drain("a", "k8s: node n1 taint example.com/gpu-broken")
        ]
    assert drains(KubeNode("n1", taints=(("example.com/gpu-broken", "PreferNoSchedule"),))) == []
    not_configured = (("node.kubernetes.io/unschedulable", "NoSchedule"),)
    assert drains(KubeNode("n1", taints=not_configured)) == []
    every = KubeNode("n1", unschedulable=True, ready="False", conditions=deadlock,
                     taints=(("example.com/gpu-broken", "NoExecute"),))  # fmt: skip
    assert drains(every) == [
        Drain(
            "a",
            "k8s: node n1 cordoned, NotReady, "
            "condition KernelDeadlock, taint example.com/gpu-broken",
        )
    ]


def test_a_drain_of_ours_is_left_alone_or_its_reason_brought_up_to_date() -> None:
    same = idle("a", "DRAIN", reason="k8s: node n1 cordoned")
    cordoned = KubeNode("n1", unschedulable=True)
    assert slurm_actions(plan([cordoned], [pod("a", "n1", same)], [same])) == []
    older = idle("a", "DRAIN", reason="k8s: node n1 cordoned")
    both = KubeNode("n1", unschedulable=True, ready="False")
    assert slurm_actions(plan([both], [pod("a", "n1", older)], [older])) == [
        Drain("a", "k8s: node n1 cordoned, NotReady")
    ]


@given(
    node=st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,60}[a-z0-9])?", fullmatch=True),
    conditions=st.sets(st.text(min_size=1, max_size=80), max_size=4),
)
def test_every_drain_reason_is_one_scontrol_takes(node: str, conditions: set[str]) -> None:
    settings = NodeSyncSettings(drain_on_conditions=frozenset(conditions))
    kube = KubeNode(node, unschedulable=True, conditions=dict.fromkeys(conditions, "True"))
    a = idle("a")
    [drain] = slurm_actions(plan([kube], [pod("a", node, a)], [a], settings))
    assert drain.reason.startswith(f"{K8S} node ")
    assert check_text("reason", drain.reason) == drain.reason


# ---- what cannot be seen ----------------------------------------------------------------------


def test_an_unknown_slurm_node_gets_no_action_only_a_problem() -> None:
    cordoned = KubeNode("n1", unschedulable=True)
    planned = plan([cordoned], [pod("ghost", "n1")], [], CORDON)
    assert planned.actions == ()
    [problem] = planned.problems
    assert problem.subject == "ghost" and "Slurm does not know node ghost" in problem.message


def test_a_pod_on_a_node_the_api_server_does_not_list_gets_no_action() -> None:
    drained = idle("a", "DRAIN", reason="k8s: node gone cordoned")
    planned = plan([], [pod("a", "gone", drained)], [drained], CORDON)
    assert planned.actions == () and "Node gone" in planned.problems[0].message


# ---- Slurm -> Kubernetes ----------------------------------------------------------------------


def test_a_down_node_shows_on_its_pod_as_a_false_condition_and_annotations() -> None:
    down = idle("a", reason="broken PSU", state="DOWN")
    [update] = plan([KubeNode("n1")], [pod("a", "n1")], [down]).actions
    assert update == SetPodHealth(
        "slurm", "a", PodHealth("False", "Down", "broken PSU", NOW),
        {wk.ANNOTATION_SLURM_STATE: "DOWN", wk.ANNOTATION_SLURM_REASON: "broken PSU"},
    )  # fmt: skip


def test_condition_reasons_name_the_slurm_state() -> None:
    cases = {
        idle("a"): ("True", "Up"),
        idle("a", state="ALLOCATED"): ("True", "Up"),
        idle("a", "NOT_RESPONDING"): ("True", "Up"),
        idle("a", "DRAIN", reason="x"): ("False", "Drained"),
        idle("a", "DRAIN", reason="x", state="MIXED"): ("False", "Draining"),
        idle("a", "FAIL", reason="x"): ("False", "Fail"),
        idle("a", "FAIL", reason="x", state="ALLOCATED"): ("False", "Failing"),
        idle("a", "DRAIN", reason="x", state="DOWN"): ("False", "Down"),
        idle("a", state="UNKNOWN"): ("False", "Unknown"),
    }
    for slurm, expected in cases.items():
        [update] = plan([KubeNode("n1")], [pod("a", "n1")], [slurm]).actions
        assert isinstance(update, SetPodHealth) and update.condition is not None
        assert (update.condition.status, update.condition.reason) == expected, slurm


@given(
    before=st.sampled_from(["IDLE", "ALLOCATED", "DOWN"]),
    after=st.sampled_from(["IDLE", "ALLOCATED", "DOWN"]),
    before_flags=st.sets(st.sampled_from(["DRAIN", "FAIL"])),
    after_flags=st.sets(st.sampled_from(["DRAIN", "FAIL"])),
    before_reason=st.sampled_from(["", "k8s: node n1 cordoned", "admin"]),
    after_reason=st.sampled_from(["", "admin", "Not responding"]),
)
def test_pod_health_is_written_only_when_it_changes_and_keeps_its_transition_time(
    before: str, after: str, before_flags: set[str], after_flags: set[str],
    before_reason: str, after_reason: str,
) -> None:  # fmt: skip
    old = SlurmNodeView("a", before, frozenset(before_flags), before_reason)
    new = SlurmNodeView("a", after, frozenset(after_flags), after_reason)
    shown_before = pod("a", "n1", old)
    assert shown_before.health is not None
    earlier = replace(shown_before, health=replace(shown_before.health, last_transition=EARLIER))
    planned = plan([KubeNode("n1")], [earlier], [new])
    updates = [a for a in planned.actions if isinstance(a, SetPodHealth)]
    if not updates:
        assert pod("a", "n1", new).annotations == earlier.annotations
        return
    [update] = updates
    now = shown(earlier, update)
    assert plan([KubeNode("n1")], [now], [new]).actions == ()  # written once, then quiet
    assert now.health is not None and earlier.health is not None
    flipped = now.health.status != earlier.health.status
    assert now.health.last_transition == (NOW if flipped else EARLIER)


def test_a_reason_that_clears_removes_its_annotation() -> None:
    drained = idle("a", "DRAIN", reason="admin")
    [update] = plan([KubeNode("n1")], [pod("a", "n1", drained)], [idle("a")]).actions
    assert isinstance(update, SetPodHealth)
    assert update.annotations == {wk.ANNOTATION_SLURM_STATE: "IDLE",
                                  wk.ANNOTATION_SLURM_REASON: None}  # fmt: skip


# ---- cordon when Slurm is down ----------------------------------------------------------------


def test_a_node_whose_slurm_nodes_are_all_down_is_cordoned_partial_is_not() -> None:
    down_a = idle("a", reason="x", state="DOWN")
    down_b = idle("b", "FAIL", reason="y")
    node = KubeNode("n1", resource_version="42")
    pods = [pod("a", "n1", down_a), pod("b", "n1", down_b)]
    assert slurm_actions(plan([node], pods, [down_a, down_b], CORDON)) == [
        Cordon("n1", "42", "Slurm nodes down: a, b")
    ]
    assert slurm_actions(plan([node], pods, [down_a, down_b])) == []  # the setting is off
    partial = [down_a, idle("b")]
    assert slurm_actions(plan([node], [pod("a", "n1", down_a), pod("b", "n1", partial[1])],
                              partial, CORDON)) == []  # fmt: skip
    unseen = plan([node], [pod("a", "n1", down_a), pod("b", "n1")], [down_a], CORDON)
    assert slurm_actions(unseen) == []  # one Slurm node unknown: no verdict on the Node


def test_our_cordon_is_lifted_when_slurm_recovers_and_is_not_a_drain_cause() -> None:
    ours = KubeNode("n1", unschedulable=True, cordoned_by_us=True, resource_version="7")
    down = idle("a", reason="x", state="DOWN")
    assert slurm_actions(plan([ours], [pod("a", "n1", down)], [down], CORDON)) == []
    back = idle("a")
    assert slurm_actions(plan([ours], [pod("a", "n1", back)], [back], CORDON)) == [
        Uncordon("n1", "7")
    ]
    # An admin uncordoned it while Slurm was down: that stands; the mark goes on recovery.
    lifted = replace(ours, unschedulable=False)
    assert slurm_actions(plan([lifted], [pod("a", "n1", down)], [down], CORDON)) == []
    assert slurm_actions(plan([lifted], [pod("a", "n1", back)], [back], CORDON)) == [
        Uncordon("n1", "7")
    ]


@given(state=st.sampled_from(["IDLE", "DOWN", "ALLOCATED"]), flags=st.sets(st.just("FAIL")))
def test_an_admin_cordon_is_never_uncordoned(state: str, flags: set[str]) -> None:
    admin = KubeNode("n1", unschedulable=True)
    slurm = SlurmNodeView("a", state, frozenset(flags), "x" if flags or state == "DOWN" else "")
    planned = plan([admin], [pod("a", "n1", slurm)], [slurm], CORDON)
    assert not any(isinstance(a, Uncordon | Cordon) for a in planned.actions)


# ---- reading API objects ----------------------------------------------------------------------


def test_nodes_and_slurmd_pods_from_api_objects() -> None:
    node = kube_node_from({
        "metadata": {"name": "n1", "resourceVersion": "9",
                     "annotations": {wk.ANNOTATION_CORDONED_BY: wk.CORDONED_BY_VALUE}},
        "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoExecute"}]},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"},
                                  {"type": "KernelDeadlock", "status": "True"}]},
    })  # fmt: skip
    assert node == KubeNode("n1", True, "Unknown", {"Ready": "Unknown", "KernelDeadlock": "True"},
                            (("k", "NoExecute"),), True, "9")  # fmt: skip
    running = {
        "metadata": {"name": "a", "namespace": "slurm",
                     "annotations": {wk.ANNOTATION_SLURM_STATE: "IDLE", "other": "x"}},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [
            {"type": wk.CONDITION_SLURM_NODE_HEALTHY, "status": "True", "reason": "Up",
             "lastTransitionTime": NOW}]},
    }  # fmt: skip
    assert slurmd_pod_from(running) == SlurmdPod(
        "slurm", "a", "n1", {wk.ANNOTATION_SLURM_STATE: "IDLE"}, PodHealth("True", "Up", "", NOW)
    )
    pending = {**running, "status": {"phase": "Pending"}}
    deleting = {**running, "metadata": {**running["metadata"], "deletionTimestamp": NOW}}
    unbound = {**running, "spec": {}}
    assert [slurmd_pod_from(p) for p in (pending, deleting, unbound)] == [None, None, None]


# ---- the shell, without a cluster -------------------------------------------------------------


class FakeKube:
    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self._objects = {"Node": nodes, "Pod": pods}
        self.writes: list[str] = []

    def list(self, api_version: str, kind: str, *_: Any, **__: Any) -> Any:
        return type("Listing", (), {"items": tuple(self._objects[kind])})

    def resource(self, api_version: str, kind: str) -> Any:
        from reconciler.adapters.kube_wire import Resource

        return Resource("/api/v1", kind.lower() + "s", kind == "Pod", kind)

    def request_json(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.writes.append(f"{method} {path}")
        return {}

    def apply(self, obj: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.writes.append(f"apply {obj['metadata']['name']} {kwargs.get('subresource')}")
        return {}

    def annotate_pod(self, namespace: str, pod: str, *_: Any, **__: Any) -> dict[str, Any]:
        self.writes.append(f"PATCH /api/v1/namespaces/{namespace}/pods/{pod}/status")
        return {}

    def create_event(self, regarding: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.writes.append(f"event {regarding['metadata']['name']} {kwargs['reason']}")
        return {}


class FakeSlurm:
    """Lists `listed`; node() answers with the real v0.0.38 parsing of `single` answers."""

    def __init__(self, listed: list[dict[str, Any]], single: dict[str, tuple[int, dict]]) -> None:
        self._listed = listed
        self._single = single

    def nodes(self) -> Snapshot[Any]:
        return Snapshot(tuple(node_from_wire(n) for n in self._listed), 0)

    def node(self, name: str) -> Any:
        status, body = self._single[name]
        transport = type("T", (), {
            "request": lambda *_a, **_k: Response(status, body, wire_errors(body)),
            "close": lambda *_: None,
        })()  # fmt: skip
        return SlurmRestClient(transport, V0038).node(name)  # type: ignore[arg-type]

    def close(self) -> None:
        pass


class FakeScontrol:
    def __init__(self, failing: set[str]) -> None:
        self._failing = failing
        self.drained: list[str] = []

    def drain_node(self, node: str, reason: str) -> None:
        if node in self._failing:
            raise ScontrolError(["update"], exit_code=1, message="Invalid node name specified")
        self.drained.append(node)

    def resume_node(self, node: str) -> None:
        raise AssertionError("nothing here is ours to resume")


def slurmd(name: str, node: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "slurm"}, "spec": {"nodeName": node},
            "status": {"phase": "Running"}}  # fmt: skip


def wire(name: str) -> dict[str, Any]:
    return {"name": name, "state": "idle", "state_flags": [], "reason": ""}


def test_one_failed_drain_does_not_stop_the_others_and_an_unknown_node_is_never_drained() -> None:
    """Three Slurm nodes on a cordoned Node: `b`'s drain fails; by the time `c` is drained,
    slurmrestd answers 200 with an `errors` array for it (slurm-operator#79): no drain, an
    error counted. `a` is drained all the same."""
    kube = FakeKube(
        [{"metadata": {"name": "n1"}, "spec": {"unschedulable": True}}],
        [slurmd(n, "n1") for n in ("a", "b", "c")],
    )
    unknown = {"errors": [{"error_number": 2018, "error": "Invalid node name specified"}]}
    slurm = FakeSlurm([wire("a"), wire("b"), wire("c")],
                      {"a": (200, {"nodes": [wire("a")]}), "b": (200, {"nodes": [wire("b")]}),
                       "c": (200, unknown)})  # fmt: skip
    scontrol = FakeScontrol(failing={"b"})
    metrics = DaemonMetrics()
    sync = NodeSync(kube, slurm, scontrol, namespace="slurm", release="slurm",  # type: ignore[arg-type]
                    settings=NodeSyncSettings())  # fmt: skip
    sync.observe(metrics.observe_node_sync)
    report = sync.run_once()
    assert scontrol.drained == ["a"]
    assert [w for w in kube.writes if w.startswith("event")] == ["event n1 SlurmNodeDrained"]
    assert [a.slurm_node for a, _ in report.failed] == ["b"]  # type: ignore[union-attr]
    assert [a.slurm_node for a, _ in report.skipped] == ["c"]  # type: ignore[union-attr]
    text = generate_latest(metrics.registry).decode()
    assert 'reconciler_node_sync_errors_total{operation="drain"} 1.0' in text
    assert 'reconciler_node_sync_errors_total{operation="unknown_node"} 1.0' in text
    assert 'reconciler_node_sync_actions_total{action="drain"} 1.0' in text
    # Every Pod's health is still written, b's and c's too: Slurm lists them as IDLE.
    assert {w.split()[1] for w in kube.writes if w.endswith(" status")} == {"a", "b", "c"}


def test_a_failed_read_decides_nothing_and_is_counted() -> None:
    class Down(FakeSlurm):
        def nodes(self) -> Snapshot[Any]:
            from reconciler.errors import SlurmUnavailableError

            raise SlurmUnavailableError("slurmrestd unreachable", endpoint="GET /nodes")

    kube = FakeKube([{"metadata": {"name": "n1"}, "spec": {"unschedulable": True}}],
                    [slurmd("a", "n1")])  # fmt: skip
    metrics = DaemonMetrics()
    sync = NodeSync(kube, Down([], {}), FakeScontrol(set()), namespace="slurm",  # type: ignore[arg-type]
                    release="slurm", settings=NodeSyncSettings())  # fmt: skip
    sync.observe(metrics.observe_node_sync)
    report = sync.run_once()
    assert "unreachable" in report.error and not report.done and not kube.writes
    text = generate_latest(metrics.registry).decode()
    assert 'reconciler_node_sync_errors_total{operation="list"} 1.0' in text


@pytest.mark.parametrize(
    ("state", "flags", "reason", "standing"),
    [("IDLE", {"DRAIN"}, "admin", "admin"), ("DOWN", set(), "broken", "broken"),
     ("MIXED", {"FAIL"}, "gpu", "gpu"),
     # Slurm 24.11 keeps the reason after RESUME: it no longer holds the node.
     ("IDLE", set(), "k8s: node n1 cordoned", ""), ("IDLE", {"NOT_RESPONDING"}, "admin", "")],
)  # fmt: skip
def test_a_reason_holds_a_node_only_while_it_is_drained_failed_or_down(
    state: str, flags: set[str], reason: str, standing: str
) -> None:
    assert standing_reason(state, frozenset(flags), reason) == standing
