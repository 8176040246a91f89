"""Node health, both ways, on the real local stack with `reconciler run` as users run it:
a cordoned Node drains its Slurm node (`k8s:` reason) and an uncordon resumes it; an admin's
drain survives both; a Slurm node set DOWN shows on its slurmd Pod and cordons its Node (ours,
lifted when it is back), while an admin's cordon is never lifted; a Slurm node that Slurm no
longer knows is left alone and counted."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.adapters.slurm.model import SlurmNode, SlurmRestApi
from reconciler.local.slurm.cluster import SlurmCluster, current_user
from reconciler.sync.node_health_decide import standing_reason
from tests.integration.helpers import http_get, reconciler_run, wait_for
from tests.integration.local_up import local_up

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = ROOT / "fixtures" / "config-repo"
NAMESPACE = "slurm"
INTERVAL = 1.0  # --node-sync-interval for these tests (the default is 10 s)
SETTLE = 3 * INTERVAL + 1  # long enough for several passes to have looked
T = TypeVar("T")


@dataclass
class Env:
    admin: Kube
    kubeconfig: Path
    slurm: SlurmCluster
    rest: SlurmRestApi
    port: int  # the daemon's /metrics
    log: Path
    timings: dict[str, float]

    def describe_node(self, node: str) -> str:
        """`kubectl describe node`, as an operator runs it (Debian's 1.20 client)."""
        done = subprocess.run(["kubectl", "describe", "node", node], capture_output=True,
                              text=True, timeout=30, check=False,
                              env={**os.environ, "KUBECONFIG": str(self.kubeconfig)})  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    def node_of(self, slurm_node: str) -> str:
        pod = self.admin.get("v1", "Pod", slurm_node, NAMESPACE)
        assert pod is not None, f"no slurmd Pod {slurm_node}"
        return str(pod["spec"]["nodeName"])

    def slurm_node(self, name: str) -> SlurmNode:
        node = self.rest.node(name)
        assert node is not None, f"Slurm does not know {name}"
        return node

    def scontrol(self, *args: str) -> None:
        self.slurm.run("scontrol", *args)

    def down(self, slurm_node: str) -> None:
        self.scontrol("update", f"NodeName={slurm_node}", "State=DOWN", "Reason=broken-by-test")

    def kept_down(self, slurm_node: str, probe: Callable[[], T]) -> Callable[[], T]:
        """`probe`, with the Slurm node put DOWN again whenever Slurm lifted it. Under
        ReturnToService=2 any registration returns a DOWN node, and slurmctld asks one node
        per ping to register: a DOWN lasts until then, a random few seconds to minutes."""

        def step() -> T:
            if self.slurm_node(slurm_node).state != "DOWN":
                self.down(slurm_node)
            return probe()

        return step

    def cordon(self, node: str, on: bool) -> None:
        self.admin.request_json(  # what `kubectl cordon` / `uncordon` send
            "PATCH", f"/api/v1/nodes/{node}", body={"spec": {"unschedulable": on or None}},
            content_type="application/strategic-merge-patch+json",
        )  # fmt: skip

    def node(self, name: str) -> dict[str, Any]:
        found = self.admin.get("v1", "Node", name)
        assert found is not None
        return found

    def pod_health(self, pod: str) -> tuple[dict[str, str], dict[str, Any]]:
        """The Pod's annotations of ours and its SlurmNodeHealthy condition ({} if none)."""
        found = self.admin.get("v1", "Pod", pod, NAMESPACE) or {}
        annotations = (found.get("metadata") or {}).get("annotations") or {}
        ours = {k: v for k, v in annotations.items()
                if k in (wk.ANNOTATION_SLURM_STATE, wk.ANNOTATION_SLURM_REASON)}  # fmt: skip
        conditions = (found.get("status") or {}).get("conditions") or []
        condition = next(
            (c for c in conditions if c["type"] == wk.CONDITION_SLURM_NODE_HEALTHY), {}
        )
        return ours, condition

    def metric(self, name: str, **labels: str) -> float:
        text = http_get(self.port, "/metrics")
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return float(sample.value)
        return 0.0


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-node-sync-"))
    try:
        repo = work / "repo"
        shutil.copytree(FIXTURE_REPO, repo)
        with local_up(
            repo, work / "up.log", prefix="sunk-reconciler-node-sync-", timings=stack_timings,
            label="node sync tests",
        ) as running:  # fmt: skip
            slurm = running.stack.slurm
            assert slurm is not None
            rest = connect(slurm.rest_url(), MintedTokens(slurm.paths.jwt_key, current_user()))
            admin = Kube.from_kubeconfig(running.stack.kube_paths.kubeconfig, field_manager="test")
            try:
                with reconciler_run(
                    repo, running.runtime, work, "--node-sync-interval", str(INTERVAL),
                    "--cordon-when-slurm-down",
                ) as (port, log):  # fmt: skip
                    yield Env(admin, running.stack.kube_paths.kubeconfig, slurm, rest, port, log,
                              stack_timings)  # fmt: skip
            finally:
                rest.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_cordoned_node_drains_its_slurm_node_and_an_uncordon_resumes_it(env: Env) -> None:
    slurm_node = "slurm-cpu-0"
    node = env.node_of(slurm_node)
    reason = f"k8s: node {node} cordoned"
    cordoned_at = time.monotonic()
    env.cordon(node, True)
    wait_for(lambda: env.slurm_node(slurm_node).reason == reason, 15,
             f"{slurm_node} to be drained: {env.log.read_text()}")  # fmt: skip
    drained = time.monotonic() - cordoned_at
    env.timings[f"node sync ({INTERVAL:g} s interval): cordon -> Slurm node drained"] = drained
    assert "DRAIN" in env.slurm_node(slurm_node).flags
    assert drained < 2 * INTERVAL + 2, f"cordon to drained took {drained:.2f} s"
    # Slurm -> Kubernetes: the slurmd Pod says so, in the same pass.
    annotations, condition = wait_for(
        lambda: (h := env.pod_health(slurm_node))[1].get("status") == "False" and h, 10,
        "the slurmd Pod to show the drain",
    )  # fmt: skip
    assert (condition["reason"], condition["message"]) == ("Drained", reason)
    assert annotations == {wk.ANNOTATION_SLURM_STATE: "IDLE+DRAIN",
                           wk.ANNOTATION_SLURM_REASON: reason}  # fmt: skip
    # The Node says why too: `kubectl describe node` lists our Event.
    said = f"Slurm node {slurm_node} drained: {reason}"
    described = wait_for(lambda: said in (d := env.describe_node(node)) and d, 10,
                         "the drain Event on the Node")  # fmt: skip
    assert re.search(rf"Warning\s+{wk.EVENT_SLURM_NODE_DRAINED}\s.*{re.escape(said)}", described)

    uncordoned_at = time.monotonic()
    env.cordon(node, False)
    wait_for(lambda: "DRAIN" not in env.slurm_node(slurm_node).flags, 15,
             f"{slurm_node} to be resumed: {env.log.read_text()}")  # fmt: skip
    resumed = time.monotonic() - uncordoned_at
    env.timings[f"node sync ({INTERVAL:g} s interval): uncordon -> Slurm node resumed"] = resumed
    resumed_node = env.slurm_node(slurm_node)  # 24.11 keeps the old reason; 22.05 clears it
    assert standing_reason(resumed_node.state, resumed_node.flags, resumed_node.reason) == ""
    wait_for(lambda: env.pod_health(slurm_node)[1].get("status") == "True", 10,
             "the slurmd Pod to show it healthy again")  # fmt: skip
    wait_for(lambda: env.pod_health(slurm_node)[0] == {wk.ANNOTATION_SLURM_STATE: "IDLE"}, 10,
             "the reason annotation to go")  # fmt: skip
    assert env.metric("reconciler_node_sync_actions_total", action="drain") >= 1
    assert env.metric("reconciler_node_sync_actions_total", action="resume") >= 1
    wait_for(lambda: f"Slurm node {slurm_node} resumed" in env.describe_node(node), 10,
             "the resume Event on the Node")  # fmt: skip


def test_an_admin_drain_survives_a_cordon_and_an_uncordon(env: Env) -> None:
    slurm_node = "slurm-gpu-small-0"
    node = env.node_of(slurm_node)
    # Ours first, then an admin's on top: the uncordon must not clear the admin's.
    env.cordon(node, True)
    wait_for(lambda: env.slurm_node(slurm_node).reason.startswith(wk.DRAIN_REASON_K8S_PREFIX),
             15, f"{slurm_node} to be drained")  # fmt: skip
    env.scontrol("update", f"NodeName={slurm_node}", "State=DRAIN", "Reason=admin")
    env.cordon(node, False)
    wait_for(lambda: env.pod_health(slurm_node)[0].get(wk.ANNOTATION_SLURM_REASON) == "admin",
             10, "a pass to see the admin's drain")  # fmt: skip
    time.sleep(SETTLE)
    seen = env.slurm_node(slurm_node)
    assert "DRAIN" in seen.flags and seen.reason == "admin", seen
    # The admin's drain first, then a cordon: the admin's reason is not overwritten.
    env.cordon(node, True)
    time.sleep(SETTLE)
    seen = env.slurm_node(slurm_node)
    assert "DRAIN" in seen.flags and seen.reason == "admin", seen
    env.cordon(node, False)
    time.sleep(SETTLE)
    assert env.slurm_node(slurm_node).reason == "admin"
    env.scontrol("update", f"NodeName={slurm_node}", "State=RESUME")
    wait_for(lambda: env.pod_health(slurm_node)[1].get("status") == "True", 10,
             "the slurmd Pod to show it healthy after the admin's resume")  # fmt: skip


def test_a_slurm_node_set_down_shows_on_its_pod_and_cordons_its_node(env: Env) -> None:
    slurm_node = "slurm-gpu-small-1"
    node = env.node_of(slurm_node)
    env.down(slurm_node)
    annotations, condition = wait_for(
        env.kept_down(slurm_node, lambda: (h := env.pod_health(slurm_node))[1].get("status")
                      == "False" and h), 10,
        f"the slurmd Pod to show {slurm_node} DOWN",
    )  # fmt: skip
    assert (condition["reason"], condition["message"]) == ("Down", "broken-by-test")
    assert annotations[wk.ANNOTATION_SLURM_STATE].startswith("DOWN")
    assert annotations[wk.ANNOTATION_SLURM_REASON] == "broken-by-test"
    # Every Slurm node on that Node is down (it hosts one): cordoned, and marked as ours.
    cordoned = wait_for(
        env.kept_down(slurm_node, lambda: (n := env.node(node))["spec"].get("unschedulable") and n),
        10, f"Node {node} to be cordoned",
    )  # fmt: skip
    assert cordoned["metadata"]["annotations"][wk.ANNOTATION_CORDONED_BY] == wk.CORDONED_BY_VALUE
    time.sleep(SETTLE)  # our own cordon is not a reason to drain: the admin's DOWN stays
    assert env.slurm_node(slurm_node).reason == "broken-by-test"

    env.scontrol("update", f"NodeName={slurm_node}", "State=RESUME")
    wait_for(lambda: not env.node(node)["spec"].get("unschedulable"), 10,
             f"Node {node} to be uncordoned")  # fmt: skip
    annotations = env.node(node)["metadata"].get("annotations") or {}
    assert wk.ANNOTATION_CORDONED_BY not in annotations
    wait_for(lambda: env.pod_health(slurm_node)[1].get("status") == "True", 10,
             "the slurmd Pod to show it healthy again")  # fmt: skip
    assert "DRAIN" not in env.slurm_node(slurm_node).flags


def test_an_admin_cordon_is_never_lifted(env: Env) -> None:
    slurm_node = "slurm-gpu-small-1"
    node = env.node_of(slurm_node)
    env.cordon(node, True)  # the admin's: no mark
    wait_for(lambda: env.slurm_node(slurm_node).reason == f"k8s: node {node} cordoned", 15,
             f"{slurm_node} to be drained")  # fmt: skip
    env.down(slurm_node)
    wait_for(env.kept_down(slurm_node, lambda: env.pod_health(slurm_node)[1].get("reason")
                           == "Down"), 10, "DOWN seen")  # fmt: skip
    env.scontrol("update", f"NodeName={slurm_node}", "State=RESUME")
    # Back from DOWN, on a Node still cordoned: drained again, and the cordon stays.
    wait_for(lambda: env.slurm_node(slurm_node).reason == f"k8s: node {node} cordoned", 15,
             f"{slurm_node} to be drained again")  # fmt: skip
    time.sleep(SETTLE)
    found = env.node(node)
    assert found["spec"].get("unschedulable") is True
    assert wk.ANNOTATION_CORDONED_BY not in (found["metadata"].get("annotations") or {})
    env.cordon(node, False)
    wait_for(lambda: "DRAIN" not in env.slurm_node(slurm_node).flags, 15, "the resume")


def test_a_node_slurm_does_not_know_is_left_alone_and_counted(env: Env) -> None:
    """slurm-cpu-0 retired to FUTURE under its running Pod: Slurm no longer lists it. Its
    Node cordoned: nothing is drained, the Pod stays, and the error is counted each pass."""
    slurm_node = "slurm-cpu-0"
    node = env.node_of(slurm_node)
    pod_uid = (env.admin.get("v1", "Pod", slurm_node, NAMESPACE) or {})["metadata"]["uid"]
    before = env.metric("reconciler_node_sync_errors_total", operation="unknown_node")
    env.scontrol("update", f"NodeName={slurm_node}", "State=FUTURE")
    assert env.rest.node(slurm_node) is None
    env.cordon(node, True)
    try:
        wait_for(
            lambda: env.metric("reconciler_node_sync_errors_total", operation="unknown_node")
            >= before + 3, 15, "three passes to count the unknown node",
        )  # fmt: skip
        assert f"Slurm does not know node {slurm_node}" in env.log.read_text()
        pod = env.admin.get("v1", "Pod", slurm_node, NAMESPACE)
        assert pod is not None and pod["metadata"]["uid"] == pod_uid, "the Pod was touched"
        assert "deletionTimestamp" not in pod["metadata"]
        assert env.rest.node(slurm_node) is None, "the unknown node was drained into existence"
    finally:
        env.cordon(node, False)
        # Back as a new Pod: its slurmd registers the FUTURE node again.
        env.admin.delete("v1", "Pod", slurm_node, NAMESPACE)
        wait_for(lambda: (n := env.rest.node(slurm_node)) is not None and n.state == "IDLE",
                 60, f"{slurm_node} to rejoin")  # fmt: skip
    assert "DRAIN" not in env.slurm_node(slurm_node).flags
