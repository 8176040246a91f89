"""`reconciler plan` and `reconciler apply` end to end on the real local stack, run as a user
runs them (the CLI as a subprocess, against a stack of `reconciler local up`), on a copy of
fixtures/config-repo that the tests edit.

The tests run in file order and build on each other's state (one stack per module):

  up (fixture repo)  -> plan: no changes
  add gpu-big        -> created, slurmctld restarted, node IDLE, Pod Running
  gpu-small 2 -> 4   -> spares join, no restart
  gpu-small 4 -> 1   -> apply waits for the job running on gpu-small-3, then retires 1-3
  layer edits        -> only the StatefulSets using the layer change
  remove `cpu`       -> StatefulSet and Slurm node pruned
  stale plan file    -> refused; a drain by someone else is left alone

Two ConfigMaps in the namespace that are not ours (one unlabelled, one with our release label
but another manager's managed-by) are checked after every apply: never modified, never deleted.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.local.slurm.cluster import SlurmCluster
from reconciler.local.stack import LocalStack
from tests.integration.helpers import wait_for
from tests.integration.local_stack_ops import recorded_pids
from tests.integration.local_up import RunningUp, local_up, reconciler_cli

pytestmark = pytest.mark.integration

FIXTURE_REPO = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"
NAMESPACE = "slurm"
NO_CHANGES = "Plan: 0 to add, 0 to change, 0 to destroy."
SLURMD = "spec.template.spec.containers[name=slurmd]"
BYSTANDER_MANAGER = "someone-else"

# A node definition that fits the local Nodes `local up` registered for the fixture repo
# (rtx4000 + las1, as gpu-small): the node agent honors required node affinity, and the local
# Nodes are made once, at `up`, from the repo it started with. Its name sorts after `cpu`,
# which a later test removes: its slurmd port must not move then.
GPU_BIG = """
    gpu-big:
      definitions: [rtx4000, cu120, las1, local-size, big-tuning]
      replicas: 1
"""
# A repo-local layer only gpu-big uses.
BIG_TUNING = """# Used by gpu-big only.
big-tuning:
  env:
    - name: BIG_NODE
      value: "1"
"""
CPU_DEFINITION = """
    cpu:
      definitions: [cpu-epyc, las1, local-size]
      replicas: 1
"""


@dataclass
class Env:
    repo: Path  # the copy the tests edit and apply
    work: Path  # plan files, command output
    jobs: Path  # world-writable: batch jobs write here
    running: RunningUp
    kube: Kube
    bystanders: dict[str, str] = field(default_factory=dict)  # name -> resourceVersion

    @property
    def runtime(self) -> Path:
        return self.running.runtime

    @property
    def stack(self) -> LocalStack:
        return self.running.stack

    @property
    def slurm(self) -> SlurmCluster:
        slurm = self.stack.slurm
        assert slurm is not None
        return slurm


# ---- the stack --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-apply-work-"))
    work.chmod(0o755)  # jobs may run as another user
    jobs = work / "jobs"
    jobs.mkdir()
    jobs.chmod(0o1777)
    up_repo, repo = work / "up-repo", work / "repo"
    shutil.copytree(FIXTURE_REPO, up_repo)
    shutil.copytree(FIXTURE_REPO, repo)
    try:
        with local_up(
            up_repo, work / "up.log", prefix="sunk-reconciler-apply-", timings=stack_timings,
            label="apply tests",
        ) as running:  # fmt: skip
            env = Env(
                repo, work, jobs, running, Kube.from_kubeconfig(running.stack.kube_paths.kubeconfig)
            )
            _create_bystanders(env)
            yield env
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _create_bystanders(env: Env) -> None:
    """ConfigMaps without our ownership labels, written by another field manager."""
    for name, labels in (
        ("not-ours", {}),
        # Our release label alone does not make an object ours: managed-by must say so too.
        ("slurm-lookalike", {wk.LABEL_RELEASE: "slurm", wk.LABEL_MANAGED_BY: "helm"}),
    ):
        obj = env.kube.apply(
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
             "data": {"owner": BYSTANDER_MANAGER}},
            field_manager=BYSTANDER_MANAGER,
        )  # fmt: skip
        env.bystanders[name] = obj["metadata"]["resourceVersion"]


def _assert_bystanders_untouched(env: Env) -> None:
    for name, version in env.bystanders.items():
        obj = env.kube.get("v1", "ConfigMap", name, NAMESPACE)
        assert obj is not None, f"ConfigMap {name} (not ours) was deleted"
        assert obj["data"] == {"owner": BYSTANDER_MANAGER}, obj
        assert obj["metadata"]["resourceVersion"] == version, f"ConfigMap {name} was modified"


def _assert_up_alive(env: Env) -> None:
    env.running.assert_alive()


def _up_output(env: Env) -> str:
    return env.running.output()


def _output(env: Env, result: subprocess.CompletedProcess[str]) -> str:
    """A command's output for a failure message, with what `local up` said (a stack that
    stops under a test takes ~10 s to go down; its traceback comes at the end)."""
    return f"exit {result.returncode}\n{result.stdout}{result.stderr}\n{_up_output(env)}"


# ---- the CLI ----------------------------------------------------------------------------


def _reconciler(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return reconciler_cli(*args, timeout=timeout)


def _plan(env: Env, *extra: str) -> dict[str, Any]:
    """`plan -o json --detailed-exitcode`: exit 2 exactly when the JSON lists changes."""
    _assert_up_alive(env)
    result = _reconciler(
        "plan", str(env.repo), "--runtime-dir", str(env.runtime), "-o", "json",
        "--detailed-exitcode", *extra,
    )  # fmt: skip
    assert result.returncode in (0, 2), _output(env, result)
    plan = json.loads(result.stdout)
    assert result.returncode == (2 if plan["changes"] else 0), _output(env, result)
    assert plan["offline"] is False and plan["fingerprint"]
    for change in plan["changes"]:
        assert change["name"] not in env.bystanders, change
    return plan


def _apply(env: Env, *extra: str, plan: dict[str, Any] | None = None) -> tuple[str, float]:
    """`apply --yes`; its progress lines (stderr) and how long it took."""
    _assert_up_alive(env)
    started = time.monotonic()
    result = _reconciler(
        "apply", str(env.repo), "--runtime-dir", str(env.runtime), "--yes", *extra, timeout=180
    )
    seconds = time.monotonic() - started
    assert result.returncode == 0, _output(env, result)
    if plan is not None:
        s = plan["summary"]
        done = f"Apply complete: {s['add']} added, {s['change']} changed, {s['destroy']} destroyed."
        assert done in result.stdout, result.stdout
    _assert_bystanders_untouched(env)
    env.running.pids |= set(recorded_pids(env.stack))
    return result.stderr, seconds


def _assert_no_changes(env: Env) -> None:
    """What a user runs right after an apply: `plan --detailed-exitcode` exits 0."""
    _assert_up_alive(env)
    result = _reconciler(
        "plan", str(env.repo), "--runtime-dir", str(env.runtime), "--detailed-exitcode"
    )
    assert result.returncode == 0, _output(env, result)
    assert NO_CHANGES in result.stdout, result.stdout


def _changes(plan: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    by_ref = {(c["scope"], c["kind"], c["name"]): c for c in plan["changes"]}
    assert len(by_ref) == len(plan["changes"]), "an object is listed twice"
    return by_ref


def _actions(plan: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    return {ref: change["action"] for ref, change in _changes(plan).items()}


def _fields(change: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {f["path"]: (f["before"], f["after"]) for f in change["fields"]}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not in {path} exactly once"
    path.write_text(text.replace(old, new))


# ---- Slurm and Kubernetes probes ----------------------------------------------------------


def _sinfo(env: Env) -> dict[str, str]:
    """Node -> state as `sinfo -N` shows it (FUTURE nodes are hidden)."""
    out = env.slurm.run("sinfo", "-h", "-N", "-o", "%N %T")
    return dict(line.split() for line in out.splitlines() if line.strip())


def _node(env: Env, name: str, *flags: str) -> dict[str, str]:
    """`scontrol show node -o` as key -> value (empty when slurmctld does not show it)."""
    out = env.slurm.run("scontrol", *flags, "show", "node", name, "-o", check=False)
    return dict(re.findall(r"(\w+)=(.*?)(?= \w+=|$)", out.strip()))


def _node_state(env: Env, name: str) -> set[str]:
    return env.slurm.node_state(name)


def _pod(env: Env, name: str) -> dict[str, Any] | None:
    return env.kube.get("v1", "Pod", name, NAMESPACE)


def _wait_pod_running(env: Env, name: str) -> dict[str, Any]:
    def running() -> dict[str, Any] | None:
        pod = _pod(env, name)
        return pod if pod and (pod.get("status") or {}).get("phase") == "Running" else None

    return wait_for(running, 30, f"Pod {name} Running")


def _wait_pod_gone(env: Env, name: str) -> None:
    wait_for(lambda: _pod(env, name) is None, 60, f"Pod {name} deleted")


def _statefulset(env: Env, name: str) -> dict[str, Any] | None:
    return env.kube.get("apps/v1", "StatefulSet", name, NAMESPACE)


def _node_port(env: Env, name: str) -> int:
    """The slurmd port slurm.conf (as slurmctld reads it) gives a node."""
    text = env.stack.slurm_paths.slurm_conf.read_text()
    found = re.search(rf"^NodeName={re.escape(name)} .*\bPort=(\d+)", text, re.M)
    assert found is not None, f"{name} is not in slurm.conf"
    return int(found.group(1))


def _slurmctld_pid(env: Env) -> int:
    record = env.stack.supervisor.running("slurmctld")
    assert record is not None, "slurmctld is not running"
    return record.pid


def _restarts(env: Env) -> int:
    """How often the controller Deployment was rolled (`kubectl rollout history`): each
    slurmctld restart apply makes is one more revision."""
    deployment = env.kube.get("apps/v1", "Deployment", "slurm-controller", "slurm")
    assert deployment is not None, "no controller Deployment"
    return int(deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"]) - 1


def _job_state(env: Env, job_id: str) -> str:
    return env.slurm.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False).strip()


# ---- the tests --------------------------------------------------------------------------


def test_plan_right_after_local_up_has_no_changes(env: Env) -> None:
    """`local up` applied the compiled objects: the live plan agrees, in text and JSON."""
    _assert_no_changes(env)
    plan = _plan(env)
    assert plan["changes"] == [] and plan["controllerRestart"] is False
    assert plan["summary"]["add"] == plan["summary"]["change"] == 0
    assert plan["summary"]["destroy"] == 0 and plan["summary"]["unchanged"] > 0
    # The fixture keeps one definition switched off, and the plan names it.
    [off] = plan["warnings"]
    assert "node definition 'h100-training' makes no nodes" in off, off


def test_first_apply_creates_a_new_node_definition(
    env: Env, stack_timings: dict[str, float]
) -> None:
    (env.repo / "compute-defs" / "big.yaml").write_text(BIG_TUNING)
    values = env.repo / "values.yaml"
    values.write_text(values.read_text() + GPU_BIG)
    assert _statefulset(env, "slurm-gpu-big") is None

    plan = _plan(env)
    assert plan["controllerRestart"] is True  # a new NodeName line: Slurm 22.05 must restart
    assert _actions(plan) == {
        ("kubernetes", "ConfigMap", "slurm-slurm-conf"): "update",
        ("kubernetes", "StatefulSet", "slurm-gpu-big"): "create",
        ("slurm", "SlurmConfig", "slurm.conf"): "update",
        ("slurm", "SlurmConfig", "gres.conf"): "update",
        ("slurm", "Node", "slurm-gpu-big-0"): "create",
    }
    changes = _changes(plan)
    created = changes[("kubernetes", "StatefulSet", "slurm-gpu-big")]
    assert created["before"] is None and created["after"]["spec"]["replicas"] == 1
    assert created["desired"]["metadata"]["labels"][wk.LABEL_MANAGED_BY] == wk.MANAGED_BY_VALUE
    assert changes[("slurm", "Node", "slurm-gpu-big-0")]["steps"] == ["register"]
    conf = changes[("slurm", "SlurmConfig", "slurm.conf")]
    assert "NodeName=slurm-gpu-big-0 " in conf["after"] and "slurm-gpu-big" not in conf["before"]
    assert plan["summary"] | {"unchanged": 0} == {
        "add": 2, "change": 3, "destroy": 0, "unchanged": 0, "drain": 0, "reconfigure": 1,
    }  # fmt: skip

    # A job that runs through the controller's restart (its state is on the controller's
    # claim) and completes.
    # It runs until the test lets it go, however long the apply takes on a loaded machine
    # (a fixed sleep ended it before the check on 25.11.7 under load).
    done, go = env.jobs / "survivor-done", env.jobs / "survivor-go"
    job = env.slurm.run(
        "sbatch", "--parsable", "-p", "all", "-w", "slurm-cpu-0",
        "-o", str(env.jobs / "slurm-%j.out"), "--wrap",
        f"until [ -e {go} ]; do sleep 0.2; done; echo done > {done}",
    ).strip()  # fmt: skip
    wait_for(lambda: _job_state(env, job) == "RUNNING", 30, f"job {job} RUNNING")
    pid, restarts = _slurmctld_pid(env), _restarts(env)
    progress, seconds = _apply(env, plan=plan)
    stack_timings["apply: add a node definition (slurmctld restart)"] = seconds
    assert "apply: restarted slurmctld" in progress
    assert "apply: created StatefulSet slurm/slurm-gpu-big" in progress
    assert "apply: joined: slurm-gpu-big-0" in progress
    # Without waiting out the register timeout (60 s) for the node whose Pod comes later.
    assert seconds < 30, progress
    assert _slurmctld_pid(env) != pid and _restarts(env) == restarts + 1

    sts = _statefulset(env, "slurm-gpu-big")
    assert sts is not None and sts["spec"]["replicas"] == 1
    assert sts["metadata"]["labels"][wk.LABEL_RELEASE] == "slurm"
    pod = _wait_pod_running(env, "slurm-gpu-big-0")
    assert pod["spec"]["nodeName"]
    assert "IDLE" in _node_state(env, "slurm-gpu-big-0")
    assert _sinfo(env)["slurm-gpu-big-0"] == "idle"
    node = _node(env, "slurm-gpu-big-0")
    assert "gpu-big" in node["AvailableFeatures"].split(",")
    # The nodes that were there came back after the restart, the job's still running it.
    assert _job_state(env, job) == "RUNNING"
    assert _sinfo(env)["slurm-cpu-0"] in ("mixed", "allocated")
    for name in ("slurm-gpu-small-0", "slurm-gpu-small-1"):
        assert _sinfo(env)[name] == "idle", name
    _assert_no_changes(env)
    go.touch()
    wait_for(done.exists, 60, f"job {job} to finish after the restart")
    wait_for(lambda: _sinfo(env)["slurm-cpu-0"] == "idle", 30, "slurm-cpu-0 idle again")


def test_scale_up_within_max_replicas_needs_no_restart(
    env: Env, stack_timings: dict[str, float]
) -> None:
    _edit(env.repo / "values.d" / "10-gpu-scale.yaml", "replicas: 2", "replicas: 4")
    plan = _plan(env)
    assert plan["controllerRestart"] is False  # slurm-gpu-small-2/3 are declared (FUTURE)
    assert _actions(plan) == {
        ("kubernetes", "ConfigMap", "slurm-slurm-conf"): "update",
        ("kubernetes", "StatefulSet", "slurm-gpu-small"): "update",
        ("slurm", "SlurmConfig", "slurm.conf"): "update",
        ("slurm", "Node", "slurm-gpu-small-2"): "create",
        ("slurm", "Node", "slurm-gpu-small-3"): "create",
    }
    changes = _changes(plan)
    sts = changes[("kubernetes", "StatefulSet", "slurm-gpu-small")]
    assert _fields(sts) == {"spec.replicas": (2, 4)}
    for name in ("slurm-gpu-small-2", "slurm-gpu-small-3"):
        assert changes[("slurm", "Node", name)]["steps"] == ["register"]

    pid, restarts = _slurmctld_pid(env), _restarts(env)
    progress, seconds = _apply(env, plan=plan)
    stack_timings["apply: gpu-small 2 -> 4 (no restart)"] = seconds
    assert "apply: slurmctld reconfigured" in progress
    assert "restarted slurmctld" not in progress
    assert "apply: joined: slurm-gpu-small-2, slurm-gpu-small-3" in progress
    assert _slurmctld_pid(env) == pid and _restarts(env) == restarts

    for name in ("slurm-gpu-small-2", "slurm-gpu-small-3"):
        _wait_pod_running(env, name)
        assert "IDLE" in _node_state(env, name), name
        assert _sinfo(env)[name] == "idle", name
    _assert_no_changes(env)


def test_scale_down_waits_for_the_job_on_a_removed_node(
    env: Env, stack_timings: dict[str, float]
) -> None:
    # The job runs until the test lets it go, once the drain is seen: apply must wait for
    # it however slow the machine is (a fixed sleep raced the apply under load).
    done, go = env.jobs / "job-done", env.jobs / "job-go"
    job_id = env.slurm.run(
        "sbatch", "--parsable", "-p", "gpu", "-w", "slurm-gpu-small-3",
        "-o", str(env.jobs / "slurm-%j.out"), "--wrap",
        f"until [ -e {go} ]; do sleep 0.2; done; echo done > {done}",
    ).strip().split(";")[0]  # fmt: skip
    wait_for(lambda: _job_state(env, job_id) == "RUNNING", 30, f"job {job_id} RUNNING")

    _edit(env.repo / "values.d" / "10-gpu-scale.yaml", "replicas: 4", "replicas: 1")
    plan = _plan(env)
    assert plan["controllerRestart"] is False
    assert _actions(plan) == {
        ("kubernetes", "ConfigMap", "slurm-slurm-conf"): "update",
        ("kubernetes", "StatefulSet", "slurm-gpu-small"): "update",
        ("slurm", "SlurmConfig", "slurm.conf"): "update",
        ("slurm", "Node", "slurm-gpu-small-1"): "delete",
        ("slurm", "Node", "slurm-gpu-small-2"): "delete",
        ("slurm", "Node", "slurm-gpu-small-3"): "delete",
    }
    changes = _changes(plan)
    assert _fields(changes[("kubernetes", "StatefulSet", "slurm-gpu-small")]) == {
        "spec.replicas": (4, 1)
    }
    for name in ("slurm-gpu-small-1", "slurm-gpu-small-2", "slurm-gpu-small-3"):
        assert changes[("slurm", "Node", name)]["steps"] == ["drain", "retire"], name
    assert plan["summary"]["drain"] == 3

    host = (env.kube.get("v1", "Pod", "slurm-gpu-small-3", "slurm") or {})["spec"]["nodeName"]
    progress_file = env.work / "apply-scale-down.err"
    started, started_wall = time.monotonic(), time.time()
    with progress_file.open("w") as err, (env.work / "apply-scale-down.out").open("w") as out:
        apply = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "apply", str(env.repo), "--runtime-dir",
             str(env.runtime), "--yes", "--drain-timeout", "60"],
            stdout=out, stderr=err, text=True,
        )  # fmt: skip
    try:
        # Drained while its job runs on; the job is neither killed nor requeued.
        wait_for(lambda: "DRAIN" in _node_state(env, "slurm-gpu-small-3"), 15, "the drain")
        assert _job_state(env, job_id) == "RUNNING" and not done.exists()
        # Its Kubernetes Node says why (`kubectl describe node` lists the Event).
        said = "Slurm node slurm-gpu-small-3 drained: reconciler: removed by apply"
        wait_for(lambda: [e for e in env.kube.list("v1", "Event", "default").items
                          if e["involvedObject"].get("name") == host and e["message"] == said
                          and e["reason"] == wk.EVENT_SLURM_NODE_DRAINED], 10,
                 f"the drain Event on Node {host}")  # fmt: skip
        assert apply.poll() is None, "apply ended while the drained node's job still ran"
        go.touch()
        if apply.wait(timeout=90) != 0:
            pytest.fail(f"apply failed:\n{progress_file.read_text()}\n{_up_output(env)}")
    finally:
        if apply.poll() is None:
            apply.kill()
            apply.wait()
    seconds, finished_wall = time.monotonic() - started, time.time()
    stack_timings["apply: gpu-small 4 -> 1 (waits for a running job)"] = seconds
    progress = progress_file.read_text()
    _assert_bystanders_untouched(env)

    # The job ran to its end while apply waited for it: apply took its remaining time.
    assert done.read_text() == "done\n"
    ended = done.stat().st_mtime
    assert started_wall < ended <= finished_wall, (started_wall, ended, finished_wall)
    job = env.slurm.run("scontrol", "show", "job", job_id, "-o")
    assert "JobState=COMPLETED" in job and "ExitCode=0:0" in job, job
    lines = progress.splitlines()
    drained = lines.index(
        "apply: drained slurm-gpu-small-1, slurm-gpu-small-2, slurm-gpu-small-3; "
        "waiting for their jobs to finish"
    )
    retired = next(i for i, line in enumerate(lines) if line.startswith("apply: retired "))
    shrunk = lines.index("apply: updated StatefulSet slurm/slurm-gpu-small")
    assert drained < retired < shrunk, progress

    sinfo = _sinfo(env)
    assert sinfo["slurm-gpu-small-0"] == "idle"
    for name in ("slurm-gpu-small-1", "slurm-gpu-small-2", "slurm-gpu-small-3"):
        assert name not in sinfo, sinfo
        assert _node_state(env, name) == set(), name  # hidden from a plain `scontrol show`
        assert _node(env, name, "--future")["State"] == "FUTURE", name
        _wait_pod_gone(env, name)
        assert env.stack.supervisor.running(f"slurmd-{name}") is None, name
    sts = _statefulset(env, "slurm-gpu-small")
    assert sts is not None and sts["spec"]["replicas"] == 1
    _assert_no_changes(env)


def test_layer_change_updates_only_the_statefulsets_using_it(env: Env) -> None:
    pods = {name: _pod(env, name) for name in ("slurm-gpu-big-0", "slurm-cpu-0")}
    # A layer only gpu-big uses: only its StatefulSet changes, by exactly that env var.
    _edit(
        env.repo / "compute-defs" / "big.yaml",
        '      value: "1"\n',
        '      value: "1"\n    - name: NCCL_IB_DISABLE\n      value: "1"\n',
    )
    plan = _plan(env)
    assert _actions(plan) == {("kubernetes", "StatefulSet", "slurm-gpu-big"): "update"}
    assert plan["controllerRestart"] is False
    env_var = f"{SLURMD}.env[name=NCCL_IB_DISABLE]"
    (change,) = plan["changes"]
    assert _fields(change) == {env_var: (None, {"name": "NCCL_IB_DISABLE", "value": "1"})}

    # The repo's local-size layer (every enabled definition uses it): requests only, which
    # do not size Slurm nodes (limits do), so nothing in Slurm changes either.
    _edit(env.repo / "compute-defs" / "local.yaml", 'cpu: "1"', 'cpu: "2"')
    plan = _plan(env)
    statefulsets = ("slurm-cpu", "slurm-gpu-big", "slurm-gpu-small")
    assert _actions(plan) == {("kubernetes", "StatefulSet", n): "update" for n in statefulsets}
    requests = f"{SLURMD}.resources.requests.cpu"
    changes = _changes(plan)
    for name in statefulsets:
        expected = {requests: ("1", "2")}
        if name == "slurm-gpu-big":
            expected[env_var] = (None, {"name": "NCCL_IB_DISABLE", "value": "1"})
        assert _fields(changes[("kubernetes", "StatefulSet", name)]) == expected, name

    restarts = _restarts(env)
    progress, _ = _apply(env, plan=plan)
    for name in statefulsets:
        assert f"apply: updated StatefulSet slurm/{name}" in progress
    assert "slurmctld" not in progress  # no Slurm change: neither reconfigure nor restart
    assert _restarts(env) == restarts
    sts = _statefulset(env, "slurm-gpu-big")
    assert sts is not None
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "NCCL_IB_DISABLE", "value": "1"} in container["env"]
    assert container["resources"]["requests"]["cpu"] == "2"
    # updateStrategy OnDelete: the template change restarts no slurmd under running jobs.
    for name, before in pods.items():
        after = _pod(env, name)
        assert before is not None and after is not None
        assert after["metadata"]["uid"] == before["metadata"]["uid"], name
    _assert_no_changes(env)


def test_deleting_a_node_definition_prunes_it(env: Env, stack_timings: dict[str, float]) -> None:
    big_port = _node_port(env, "slurm-gpu-big-0")
    _edit(env.repo / "values.yaml", CPU_DEFINITION, "")
    plan = _plan(env)
    assert plan["controllerRestart"] is True  # its NodeName line goes
    assert _actions(plan) == {
        ("kubernetes", "ConfigMap", "slurm-slurm-conf"): "update",
        ("slurm", "SlurmConfig", "slurm.conf"): "update",
        ("slurm", "Node", "slurm-cpu-0"): "delete",
        ("kubernetes", "StatefulSet", "slurm-cpu"): "delete",
    }
    node = _changes(plan)[("slurm", "Node", "slurm-cpu-0")]
    assert node["steps"] == ["drain", "retire"]
    # A node `up` did not know (gpu-big-0) keeps its slurmd port: its slurmd listens there.
    conf = _changes(plan)[("slurm", "SlurmConfig", "slurm.conf")]["after"]
    assert "NodeName=slurm-gpu-big-0 " in conf and f" Port={big_port} " in conf

    progress, seconds = _apply(env, plan=plan)
    stack_timings["apply: remove a node definition (slurmctld restart)"] = seconds
    assert seconds < 30, progress  # every node that stays reported back after the restart
    lines = progress.splitlines()
    # The Slurm node is drained and retired before its Pod goes.
    assert (
        lines.index("apply: drained slurm-cpu-0; waiting for their jobs to finish")
        < (lines.index("apply: retired slurm-cpu-0 (FUTURE: declared, hidden, no jobs)"))
        < lines.index("apply: deleted StatefulSet slurm/slurm-cpu")
    ), progress
    assert "apply: restarted slurmctld" in progress
    wait_for(lambda: _statefulset(env, "slurm-cpu") is None, 30, "StatefulSet slurm-cpu gone")
    _wait_pod_gone(env, "slurm-cpu-0")
    wait_for(lambda: "slurm-cpu-0" not in _sinfo(env), 30, "slurm-cpu-0 gone from sinfo")
    assert _node(env, "slurm-cpu-0") == {}  # slurmctld no longer knows it
    assert env.stack.supervisor.running("slurmd-slurm-cpu-0") is None
    assert _node_port(env, "slurm-gpu-big-0") == big_port
    sinfo = _sinfo(env)
    assert sinfo == {"slurm-gpu-big-0": "idle", "slurm-gpu-small-0": "idle"}, sinfo
    _assert_no_changes(env)


def test_a_stale_plan_is_refused_and_a_foreign_drain_is_left_alone(env: Env) -> None:
    _edit(env.repo / "values.d" / "10-gpu-scale.yaml", "replicas: 1", "replicas: 2")
    saved = env.work / "plan.json"
    made = _reconciler(
        "plan", str(env.repo), "--runtime-dir", str(env.runtime), "--out", str(saved)
    )
    assert made.returncode == 0 and f"plan saved to {saved}" in made.stderr, made.stderr
    conf_map = env.kube.get("v1", "ConfigMap", "slurm-slurm-conf", NAMESPACE)
    assert conf_map is not None

    def assert_nothing_changed() -> None:
        sts = _statefulset(env, "slurm-gpu-small")
        assert sts is not None and sts["spec"]["replicas"] == 1
        now = env.kube.get("v1", "ConfigMap", "slurm-slurm-conf", NAMESPACE)
        assert now is not None and now["data"] == conf_map["data"]
        assert "slurm-gpu-small-1" not in _sinfo(env)
        assert _pod(env, "slurm-gpu-small-1") is None

    def apply_saved(plan_file: Path) -> subprocess.CompletedProcess[str]:
        return _reconciler(
            "apply", str(env.repo), "--runtime-dir", str(env.runtime), "--yes",
            "--plan-file", str(plan_file),
        )  # fmt: skip

    # 1. Someone else drains a node after the plan was made.
    env.slurm.run(
        "scontrol", "update", "nodename=slurm-gpu-small-0", "state=drain", "reason=admin: disk"
    )
    refused = apply_saved(saved)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "stale" in refused.stderr and "Apply complete" not in refused.stdout
    assert_nothing_changed()

    # The fresh plan warns about that drain (JSON and text) and leaves the node out.
    warning = "slurm-gpu-small-0 is drained by someone else ('admin: disk')"
    plan = _plan(env, "--out", str(saved))
    assert any(warning in w for w in plan["warnings"]), plan["warnings"]
    assert ("slurm", "Node", "slurm-gpu-small-0") not in _changes(plan)
    assert _changes(plan)[("slurm", "Node", "slurm-gpu-small-1")]["steps"] == ["register"]
    text = _reconciler("plan", str(env.repo), "--runtime-dir", str(env.runtime))
    assert text.returncode == 0 and warning in text.stdout, _output(env, text)

    # 2. Another field manager changes a StatefulSet of ours.
    env.kube.apply(
        {"apiVersion": "apps/v1", "kind": "StatefulSet",
         "metadata": {"name": "slurm-gpu-small", "namespace": NAMESPACE,
                      "annotations": {"example.com/oncall": "ops"}}},
        field_manager=BYSTANDER_MANAGER,
    )  # fmt: skip
    refused = apply_saved(saved)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "stale" in refused.stderr
    assert_nothing_changed()
    _assert_bystanders_untouched(env)

    # A fresh apply goes through, and clears neither the drain nor the other manager's field.
    progress, _ = _apply(env, plan=plan)
    assert "resumed" not in progress
    assert "apply: joined: slurm-gpu-small-1" in progress
    node = _node(env, "slurm-gpu-small-0")
    assert "DRAIN" in node["State"] and node["Reason"].startswith("admin: disk"), node
    sts = _statefulset(env, "slurm-gpu-small")
    assert sts is not None and sts["spec"]["replicas"] == 2
    assert sts["metadata"]["annotations"]["example.com/oncall"] == "ops"
    _wait_pod_running(env, "slurm-gpu-small-1")

    # A drain of ours (reason "reconciler: ...") on a node that stays is cleared.
    env.slurm.run(
        "scontrol", "update", "nodename=slurm-gpu-small-1", "state=drain",
        f"reason={wk.DRAIN_REASON_PREFIX} interrupted apply",
    )  # fmt: skip
    plan = _plan(env)
    assert _actions(plan) == {("slurm", "Node", "slurm-gpu-small-1"): "update"}
    assert _changes(plan)[("slurm", "Node", "slurm-gpu-small-1")]["steps"] == ["resume"]
    progress, _ = _apply(env)
    assert "apply: resumed slurm-gpu-small-1" in progress
    assert "DRAIN" not in _node_state(env, "slurm-gpu-small-1")
    assert "DRAIN" in _node_state(env, "slurm-gpu-small-0")  # still someone else's

    # Their drain is theirs to clear; then the cluster matches the repo.
    env.slurm.run("scontrol", "update", "nodename=slurm-gpu-small-0", "state=resume")
    assert "DRAIN" not in _node_state(env, "slurm-gpu-small-0")
    _assert_no_changes(env)
    assert sorted(_sinfo(env)) == ["slurm-gpu-big-0", "slurm-gpu-small-0", "slurm-gpu-small-1"]
    _assert_bystanders_untouched(env)
