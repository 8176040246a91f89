"""`reconciler local up REPO` of a repo with the `slurmConfig.slurmd.suspendTime` of SUNK's "Slurm
Workload Manager" page ("Pods which remain idle or down for this amount of time will be deleted")
comes up on its own, with no scheduler started by hand: its slurmd Pods name our Pod scheduler,
and `local up` runs it, so they are placed, Slurm's nodes register, and a node powered down and
woken goes through its hooks."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from tests.integration.helpers import wait_for
from tests.integration.local_up import RepoStack, fixture_stack

NAMESPACE = "slurm"
OURS = "slurm-slurm-slurm-scheduler"
# Long enough that no node sleeps by itself while the test looks; the test powers one down.
POWER = "slurmConfig:\n  slurmd:\n    suspendTime: 600\n    resumeTimeout: 60\n"


@pytest.fixture(scope="module")
def stack(stack_timings: dict[str, float]) -> Iterator[RepoStack]:
    with fixture_stack("localpower", stack_timings, {"50-power.yaml": POWER}) as stack:
        yield stack


def _kube(stack: RepoStack) -> Kube:
    return Kube.from_kubeconfig(stack.running.stack.kube_paths.kubeconfig, field_manager="test")


def test_power_saving_repo_comes_up_with_its_scheduler(stack: RepoStack) -> None:
    said = stack.running.log.read_text()
    assert f"slurmd Pods name scheduler {OURS} (power saving): it runs here" in said
    assert f"# scheduler {OURS} (answers to {OURS}, " in said  # and SUNK's other forms
    assert ") runs here (hooks on 127.0.0.1:" in said
    pods = _kube(stack).list("v1", "Pod", NAMESPACE, label_selector=f"{wk.LABEL_NAME}=slurmd")
    assert {p["spec"]["schedulerName"] for p in pods.items} == {OURS}
    assert all(p["spec"].get("nodeName") for p in pods.items), stack.running.output()
    # The programs' Secret points at the hooks of the scheduler `local up` runs.
    secret = _kube(stack).get("v1", "Secret", f"slurm{wk.POWER_SECRET_SUFFIX}", NAMESPACE)
    assert secret is not None, stack.running.output()
    url = base64.b64decode(secret["data"][wk.POWER_SECRET_URL_KEY]).decode()
    assert url.startswith("http://127.0.0.1:") and url.rstrip("/").split(":")[-1] in said
    assert stack.slurm.run("srun", "-w", "slurm-cpu-0", "hostname", timeout=60).strip()


def test_a_node_powered_down_loses_its_pod_and_a_job_wakes_it(stack: RepoStack) -> None:
    kube = _kube(stack)
    before = kube.get("v1", "Pod", "slurm-cpu-0", NAMESPACE)
    assert before is not None
    stack.slurm.run("scontrol", "update", "NodeName=slurm-cpu-0", "State=POWER_DOWN")
    wait_for(
        lambda: (pod := kube.get("v1", "Pod", "slurm-cpu-0", NAMESPACE)) is None
        or pod["metadata"]["uid"] != before["metadata"]["uid"],
        60, f"slurm-cpu-0's Pod to go: {stack.running.output()}",
    )  # fmt: skip
    out = stack.slurm.run("srun", "-w", "slurm-cpu-0", "hostname", timeout=120)
    assert out.strip(), stack.running.output()
    woken = kube.get("v1", "Pod", "slurm-cpu-0", NAMESPACE)
    assert woken is not None and woken["spec"].get("nodeName"), stack.running.output()
