"""Power saving as a user sees it: what slurm.conf and the objects say, which Pods go and where
the others land, and who may call the power endpoint."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.slurm.model import SlurmNode
from reconciler.compile.desired import DesiredState
from reconciler.compile.power import wait_prolog
from reconciler.errors import CompileError, ReconcilerError
from reconciler.kuberules.pod_requests import pod_requests
from reconciler.scheduler.decide.placeholder import HookCredentials
from reconciler.scheduler.decide.power_decide import (
    PowerStep,
    is_asleep,
    power_steps,
)
from reconciler.scheduler.hook_server import HooksServer, parse_power_call

OURS = "slurm-slurm-slurm-scheduler"
POWER = """
slurmConfig:
  slurmd:
    suspendTime: 600
compute:
  nodes:
    gpu:
      definitions: [rtx4000]
      replicas: 4
      minReplicas: 1
    cpu:
      definitions: [cpu-epyc]
      replicas: 2
"""


def _of(state: DesiredState, kind: str, name: str) -> dict[str, Any]:
    return next(
        o for o in state.kube_objects if o["kind"] == kind and o["metadata"]["name"] == name
    )


# ---- compile --------------------------------------------------------------------------------


def test_suspend_time_renders_the_programs_the_floor_and_the_prolog(
    compile_values: Callable[..., DesiredState],
) -> None:
    state = compile_values(POWER)
    conf = dict(
        line.split("=", 1)
        for line in state.slurm_conf.splitlines()
        if "=" in line and not line.startswith(("NodeName", "PartitionName", "NodeSet", "#"))
    )
    assert conf["SuspendTime"] == "600"
    assert conf["SuspendProgram"] == "/etc/slurm/power/suspend"
    assert conf["ResumeProgram"] == "/etc/slurm/power/resume"
    assert conf["PrologSlurmctld"] == "/etc/slurm/power/wait-for-resume"
    assert (conf["SuspendTimeout"], conf["ResumeTimeout"]) == ("30", "60")
    assert conf["SuspendExcNodes"] == "slurm-gpu-[0-3]:1"  # cpu has no floor: all may sleep
    programs = _of(state, "ConfigMap", "slurm-power-programs")["data"]
    assert sorted(programs) == ["resume", "suspend", "wait-for-resume"]
    assert '-H @"$auth/header"' in programs["suspend"]  # the token never on a command line
    assert "/hooks/v1/power/resume" in programs["resume"]
    # slurmd Pods name our scheduler and report a boot at start (`-b`): Slurm waits for one.
    for name in ("slurm-gpu", "slurm-cpu"):
        spec = _of(state, "StatefulSet", name)["spec"]
        assert spec["replicas"] == (4 if name == "slurm-gpu" else 2)  # replicas: the most
        pod = spec["template"]["spec"]
        assert pod["schedulerName"] == OURS
        assert pod["containers"][0]["args"][:3] == ["slurmd", "-D", "-b"]
    controller = _of(state, "Deployment", "slurm-controller")["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in controller["containers"][0]["volumeMounts"]}
    assert mounts["power-programs"] == "/etc/slurm/power"
    assert mounts["power-auth"] == "/etc/slurm/power-auth"
    auth = next(v for v in controller["volumes"] if v["name"] == "power-auth")["secret"]
    assert auth == {"secretName": "slurm-power-auth", "optional": True, "defaultMode": 0o440}


@pytest.mark.parametrize("never", ["INFINITE", "-1", "infinite", None])
def test_without_power_saving_nothing_changes(
    compile_values: Callable[..., DesiredState], never: str | None
) -> None:
    values = POWER.replace("minReplicas: 1", "").replace(
        "suspendTime: 600", f"suspendTime: {never}" if never else ""
    )
    state = compile_values(values)
    assert "SuspendProgram" not in state.slurm_conf and "PrologSlurmctld" not in state.slurm_conf
    assert not [o for o in state.kube_objects if "power" in o["metadata"]["name"]]
    pod = _of(state, "StatefulSet", "slurm-gpu")["spec"]["template"]["spec"]
    assert "schedulerName" not in pod and "-b" not in pod["containers"][0]["args"]


def test_min_replicas_without_power_saving_is_refused(
    compile_values: Callable[..., DesiredState],
) -> None:
    with pytest.raises(
        CompileError, match="minReplicas is set, but nodes never power down"
    ) as error:
        compile_values(POWER.replace("suspendTime: 600", "suspendTime: INFINITE"))
    assert "slurmConfig.slurmd.suspendTime" in (error.value.hint or "")


def test_power_saving_without_our_scheduler_is_refused(
    compile_values: Callable[..., DesiredState],
) -> None:
    """SUNK's "Slurm Workload Manager" page: "slurmConfig.slurmd.suspendTime | Pods which remain
    idle or down for this amount of time will be deleted"; SUNK's "SUNK Pod Scheduler" page: "Set
    scheduler.enabled to true". A powered-down node's Pod names our scheduler, so without it the Pod
    would stay Pending forever."""
    with pytest.raises(CompileError) as error:
        compile_values(POWER + "scheduler:\n  enabled: false\n")
    message = str(error.value)
    assert "slurmConfig.slurmd.suspendTime is 600" in message
    assert "scheduler.enabled is false" in message and "Pending forever" in message
    assert "scheduler.enabled: true" in (error.value.hint or "")
    assert "suspendTime: INFINITE" in (error.value.hint or "")
    off = POWER.replace("minReplicas: 1", "").replace("suspendTime: 600", "suspendTime: INFINITE")
    compile_values(off + "scheduler:\n  enabled: false\n")  # no power saving: no scheduler


@pytest.mark.parametrize(
    ("floor", "message"),
    [
        ("5", "not between 0 and replicas"),
        ("-1", r"\(compute.nodes.gpu.minReplicas\): .*from 0 to 65536, got -1"),
    ],
)
def test_min_replicas_must_fit_replicas(
    compile_values: Callable[..., DesiredState], floor: str, message: str
) -> None:
    """A negative count is refused where it is written (config/values_file.py), the rest when
    node sets are compiled."""
    with pytest.raises(ReconcilerError, match=message):
        compile_values(POWER.replace("minReplicas: 1", f"minReplicas: {floor}"))


@pytest.mark.parametrize("bad", ["10m", "0", "'1.5'", "true"])
def test_suspend_time_must_be_seconds(
    compile_values: Callable[..., DesiredState], bad: str
) -> None:
    with pytest.raises(ReconcilerError, match=r"slurmConfig\.slurmd\.suspendTime"):
        compile_values(POWER.replace("suspendTime: 600", f"suspendTime: {bad}"))


def test_the_wait_prolog_ends_when_no_node_powers_up_and_always_exits_0(tmp_path: Path) -> None:
    states = tmp_path / "states"
    scontrol = tmp_path / "bin" / "scontrol"
    scontrol.parent.mkdir()
    # A stand-in scontrol: prints the next state line, as `scontrol show node -o` would.
    scontrol.write_text(f"#!/bin/sh\nhead -n1 {states}; sed -i 1d {states}\n")
    scontrol.chmod(0o755)
    prolog = tmp_path / "prolog"
    prolog.write_text(wait_prolog(1, "/etc/slurm", {"PATH": f"{scontrol.parent}:/usr/bin:/bin"}))
    prolog.chmod(0o755)
    states.write_text("State=IDLE+POWERED_DOWN\nState=MIXED+POWERING_UP\nState=MIXED\n")
    env = {"SLURM_JOB_NODELIST": "n[1-2]"}
    done = subprocess.run([str(prolog)], env=env, capture_output=True, timeout=10, check=False)
    assert done.returncode == 0 and states.read_text() == ""  # read until the node was up
    states.write_text("State=MIXED+POWERING_UP\n" * 20)  # never up: gives up after 1 s, exit 0
    done = subprocess.run([str(prolog)], env=env, capture_output=True, timeout=10, check=False)
    assert done.returncode == 0 and states.read_text().count("\n") < 20


# ---- decisions ------------------------------------------------------------------------------


def slurm_node(name: str, state: str = "IDLE", *flags: str) -> SlurmNode:
    return SlurmNode(
        name=name, state=state, flags=frozenset(flags), reason="", reason_set_by=None,
        reason_changed_at=None, cpus=4, alloc_cpus=0, real_memory=8192, alloc_memory=0,
        gres="", gres_used="", features=(), active_features=(), partitions=("all",),
        address="", hostname="", weight=1,
    )  # fmt: skip


def slurmd_pod(
    name: str, node: str | None = None, *, scheduler: str = OURS, cpu: str = "1", **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "slurmd", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
        ],
        **spec,
    }
    if node:
        body["nodeName"] = node
    return {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "slurmd"}},
        "spec": body,
        "status": {"phase": "Running" if node else "Pending"},
    }


def kube_node(
    name: str, cpu: str = "8", labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}},
    }


@pytest.mark.parametrize(
    ("state", "flags", "asleep"),
    [("IDLE", ("POWERED_DOWN",), True), ("IDLE", ("POWERING_DOWN",), True),
     ("IDLE", ("POWERED_DOWN", "POWERING_UP"), False), ("MIXED", ("POWERING_UP",), False),
     ("IDLE", (), False), ("DOWN", ("POWERED_DOWN",), True), ("IDLE", ("POWER_DOWN",), False)],
)  # fmt: skip
def test_what_counts_as_asleep(state: str, flags: tuple[str, ...], asleep: bool) -> None:
    assert is_asleep(slurm_node("n", state, *flags)) is asleep
    assert is_asleep(None) is False  # a node Slurm does not know yet runs as without power saving


def test_a_sleeping_node_s_pod_goes_any_ordinal_and_a_waking_one_is_bound() -> None:
    pods = [slurmd_pod("gpu-0", "k1"), slurmd_pod("gpu-1", "k2"), slurmd_pod("gpu-2"),
            slurmd_pod("gpu-3", "k3", scheduler="default-scheduler")]  # fmt: skip
    slurm = {"gpu-0": slurm_node("gpu-0", "IDLE", "POWERED_DOWN"), "gpu-1": slurm_node("gpu-1"),
             "gpu-2": slurm_node("gpu-2", "MIXED", "POWERING_UP"),
             "gpu-3": slurm_node("gpu-3", "IDLE", "POWERING_DOWN")}  # fmt: skip
    nodes = [kube_node("k1"), kube_node("k2"), kube_node("k3"), kube_node("k4")]
    steps = power_steps(pods, slurm, nodes, pods, placed_by=OURS)
    # Ordinal 0 goes though 1 runs; a Pod from before power saving (default-scheduler) goes too.
    assert steps == [PowerStep("delete", "gpu-0", "k1", "Slurm powered the node down"),
                     PowerStep("bind", "gpu-2", "k4"),  # the emptiest Node
                     PowerStep("delete", "gpu-3", "k3", "Slurm powered the node down")]  # fmt: skip


def test_a_held_pod_stays_pending_and_another_scheduler_s_pod_is_never_bound() -> None:
    pods = [slurmd_pod("gpu-0"), slurmd_pod("gpu-1", scheduler="default-scheduler")]
    slurm = {"gpu-0": slurm_node("gpu-0", "IDLE", "POWERED_DOWN"), "gpu-1": slurm_node("gpu-1")}
    assert power_steps(pods, slurm, [kube_node("k1")], [], placed_by=OURS) == []


def test_terminating_and_finished_pods_are_left_alone() -> None:
    going = slurmd_pod("gpu-0", "k1")
    going["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    done = slurmd_pod("gpu-1")
    done["status"]["phase"] = "Failed"
    slurm = {"gpu-0": slurm_node("gpu-0", "IDLE", "POWERED_DOWN"), "gpu-1": slurm_node("gpu-1")}
    assert power_steps([going, done], slurm, [kube_node("k1")], [], placed_by=OURS) == []


def test_binding_honours_affinity_taints_cordons_and_free_resources() -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "gpu", "operator": "In", "values": ["rtx4000"]}]}]}}}  # fmt: skip
    pod = slurmd_pod("gpu-0", cpu="6", affinity=affinity)
    gpu = {"gpu": "rtx4000"}
    nodes = [
        kube_node("a-wrong-label", labels={"gpu": "h100"}),
        kube_node("b-cordoned", labels=gpu, unschedulable=True),
        kube_node("c-tainted", labels=gpu, taints=[{"key": "x", "effect": "NoSchedule"}]),
        kube_node("d-full", labels=gpu),
        kube_node("e-fits", labels=gpu),
    ]
    used = [{"metadata": {"name": "other"}, "spec": {"nodeName": "d-full", "containers": [
        {"resources": {"requests": {"cpu": "3"}}}]}, "status": {"phase": "Running"}}]  # fmt: skip
    steps = power_steps([pod], {}, nodes, used, placed_by=OURS)
    assert steps == [PowerStep("bind", "gpu-0", "e-fits")]
    steps = power_steps([pod], {}, nodes[:4], used, placed_by=OURS)
    # Said as kube-scheduler says it (a FailedScheduling Event on the Pod).
    assert steps[0] == PowerStep("unplaceable", "gpu-0", None, (
        "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node "
        "affinity, 1 node(s) had taint {x: }, that the pod didn't tolerate, 1 node(s) were "
        "unschedulable."))  # fmt: skip
    steps = power_steps([pod], {}, nodes[:1], used, placed_by=OURS)
    assert steps[0].why == "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity."


def test_a_woken_pod_goes_back_to_the_node_it_left_when_it_fits() -> None:
    pod = slurmd_pod("gpu-0", cpu="6")
    pod["metadata"]["annotations"] = {"reconciler.sunk.dev/last-node": "k2"}
    nodes = [kube_node("k1"), kube_node("k2"), kube_node("k3")]
    assert power_steps([pod], {}, nodes, [], placed_by=OURS) == [PowerStep("bind", "gpu-0", "k2")]
    full = [{"metadata": {"name": "other"}, "spec": {"nodeName": "k2", "containers": [
        {"resources": {"requests": {"cpu": "4"}}}]}, "status": {"phase": "Running"}}]  # fmt: skip
    assert power_steps([pod], {}, nodes, full, placed_by=OURS) == [PowerStep("bind", "gpu-0", "k1")]


def test_two_pods_waking_at_once_do_not_share_the_last_free_room() -> None:
    pods = [slurmd_pod("gpu-0", cpu="5"), slurmd_pod("gpu-1", cpu="5")]
    steps = power_steps(pods, {}, [kube_node("k1"), kube_node("k2")], [], placed_by=OURS)
    assert [s.node for s in steps] == ["k1", "k2"]
    steps = power_steps(pods, {}, [kube_node("k1")], [], placed_by=OURS)
    assert [s.kind for s in steps] == ["bind", "unplaceable"]


def _c(cpu: str, *, always: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {"resources": {"requests": {"cpu": cpu}}}
    if always:
        container["restartPolicy"] = "Always"
    return container


@pytest.mark.parametrize(
    ("containers", "inits", "overhead", "cpu"),
    [
        ([_c("1"), _c("2")], [], None, "3"),  # summed
        ([_c("1")], [_c("4"), _c("2")], None, "4"),  # init containers one at a time
        ([_c("100")], [_c("10", always=True), _c("200")], None, "210"),  # sidecar first: 10 + 200
        ([_c("100")], [_c("200"), _c("10", always=True)], None, "200"),  # sidecar after: 110
        ([_c("1")], [_c("1", always=True), _c("1", always=True), _c("3")], None, "5"),
        ([_c("1")], [], {"cpu": "250m"}, "1.25"),  # plus the RuntimeClass overhead
        ([], [_c("1", always=True)], None, "1"),
    ],
)  # fmt: skip
def test_pod_requests_follow_kubernetes_pod_requests(
    containers: list[Any], inits: list[Any], overhead: dict[str, str] | None, cpu: str
) -> None:
    pod: dict[str, Any] = {"spec": {"containers": containers, "initContainers": inits}}
    if overhead:
        pod["spec"]["overhead"] = overhead
    assert pod_requests(pod)["cpu"] == Decimal(cpu)


def test_a_limit_without_a_request_counts_as_the_request() -> None:
    resources = {"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    pod = {"spec": {"containers": [{"resources": resources}]}}
    assert pod_requests(pod) == {"cpu": Decimal("0.5"), "memory": Decimal(2**30)}


# ---- the endpoint ---------------------------------------------------------------------------

CREDENTIALS = HookCredentials("http://127.0.0.1", b"power-test-key")


@pytest.mark.parametrize(
    ("path", "parsed"),
    [("/hooks/v1/power/suspend?nodes=n%5B1-3%5D", ("suspend", "n[1-3]")),
     ("/hooks/v1/power/resume?nodes=n1", ("resume", "n1")),
     ("/hooks/v1/power/reboot?nodes=n1", None), ("/hooks/v1/power/resume", None),
     ("/hooks/v1/pods/x/started?job=1", None)],
)  # fmt: skip
def test_power_calls_are_parsed(path: str, parsed: tuple[str, str] | None) -> None:
    assert parse_power_call(path) == parsed


def test_only_the_power_token_may_call_and_only_when_power_saving_is_on() -> None:
    calls: list[tuple[str, str]] = []
    server = HooksServer("127.0.0.1", 0, CREDENTIALS, lambda call: "ok")
    try:
        path = "/hooks/v1/power/suspend?nodes=n1"
        good = f"Bearer {CREDENTIALS.token_for('slurmctld:power')}"
        assert server.answer(path, good) == (404, "power saving is off\n")
        server.power = lambda verb, nodes: calls.append((verb, nodes)) or "ok"
        # A Pod's token (a placeholder job's) cannot power nodes down.
        pod_token = f"Bearer {CREDENTIALS.token_for('3c1d0f6e-0000-4000-8000-0000000000aa')}"
        assert server.answer(path, pod_token) == (403, "forbidden\n")
        assert server.answer(path, "") == (403, "forbidden\n")
        assert server.answer(path, good) == (200, "ok\n")
        assert calls == [("suspend", "n1")]
    finally:
        server.stop()


def test_binding_honours_pod_anti_affinity_and_spreading_as_kube_scheduler_does() -> None:
    # The binder uses the same filters as kube-scheduler (kuberules.feasibility), so a slurmd
    # Pod that must not share a Node with another slurmd Pod is kept apart from it.
    term = {"labelSelector": {"matchLabels": {"app.kubernetes.io/name": "slurmd"}},
            "topologyKey": "kubernetes.io/hostname"}  # fmt: skip
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    pod = slurmd_pod("gpu-1", affinity=anti)
    pod["metadata"]["annotations"] = {"reconciler.sunk.dev/last-node": "k1"}
    other = slurmd_pod("gpu-0", "k1")
    nodes = [kube_node("k1", labels={"kubernetes.io/hostname": "k1"}),
             kube_node("k2", labels={"kubernetes.io/hostname": "k2"})]  # fmt: skip
    steps = power_steps([pod, other], {}, nodes, [other], placed_by=OURS)
    assert steps == [PowerStep("bind", "gpu-1", "k2")]
    steps = power_steps([pod, other], {}, nodes[:1], [other], placed_by=OURS)
    assert steps[0].why == (
        "0/1 nodes are available: 1 node(s) didn't match pod affinity/anti-affinity, "
        "1 node(s) didn't match pod anti-affinity rules."
    )
