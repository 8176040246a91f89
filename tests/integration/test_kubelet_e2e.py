"""The fixture repo's whole cluster on real kubelets, from our images: `reconciler local up
--kubelet REPO` loads them, makes the Secrets and claim the repo names, applies it and waits
until every Pod is Ready by its own probes and every Slurm node idle; Slurm runs jobs in the
slurmd containers; ssh reaches the login Pod; the kubelet restarts a killed slurmd. One stack
for the whole module.

The repo is fixtures/config-repo with one layer of the test's (TEST_LAYER: two CPU nodes, sshd
in the compute Pods); `local up` adds this machine's (2 CPUs, no GPU: fake device files for
the GPU nodes).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconciler.local.kubelet_cluster import CGROUP_ROOT
from reconciler.local.kubelets import CONTROL_PLANE_ADDRESS
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import new_temp_runtime_dir
from tests.integration.helpers import stop_cleanly, wait_for
from tests.integration.test_kubelet_cluster import _down_leaves_nothing, _require_kubelet_stack

pytestmark = pytest.mark.image  # needs the cluster's images: sorted last, after CI's build

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"
NAMESPACE = "slurm"
OUR_IMAGES = {"ghcr.io/sunk-reconciler/slurm:24.11.5", "ghcr.io/sunk-reconciler/mariadb:10.11"}
APPLY_TIMEOUT = 600
# Images built on a fresh cache first (the slurm image compiles Slurm), then everything Ready.
UP_TIMEOUT = 3600
SLURM_URL = "http://slurm-rest.slurm.svc.cluster.local:6820"
# Two CPU nodes, so that `srun -N2` has two nodes to run on; a third declared (State=FUTURE),
# for which `local up --nodes 5` makes a fifth Node, labelled as the first. `local up` adds
# the rest for this machine of 2 CPUs without GPUs (MACHINE_LAYER, reconciler/local/
# kubelet_repo.py).
TEST_LAYER = """\
compute:
  ssh:
    enabled: true  # SUNK's "Slurm Workload Manager": SSH to compute nodes
  nodes:
    cpu:
      replicas: 2
      maxReplicas: 3
"""


@dataclass
class Cluster:
    kubeconfig: Path
    netns: str
    work: Path
    runtime: Path

    @property
    def ssh_key(self) -> Path:
        return self.runtime / "secrets" / "id_ed25519"

    @property
    def jwt_key(self) -> Path:
        return self.runtime / "secrets" / "jwt_hs256.key"

    @property
    def repo(self) -> Path:
        """The repo as `local up` applied it: the test's, plus this machine's layer."""
        return self.runtime / "repo"

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 120) -> str:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), "-n", NAMESPACE, *args],
            capture_output=True, text=True, timeout=timeout, input=input,
        )  # fmt: skip
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    def pods(self) -> list[dict[str, Any]]:
        return list(json.loads(self.kubectl("get", "pods", "-o", "json"))["items"])

    def pod(self, name: str) -> dict[str, Any]:
        return dict(json.loads(self.kubectl("get", "pod", name, "-o", "json")))

    def slurm(self, *argv: str, pod: str = "deploy/slurm-controller", container: str = "slurmctld",
              timeout: float = 120) -> str:  # fmt: skip
        return self.kubectl("exec", pod, "-c", container, "--", *argv, timeout=timeout)

    def node_states(self) -> dict[str, str]:
        lines = self.slurm("sinfo", "-h", "-N", "-o", "%N %T").split()
        return dict(zip(lines[::2], lines[1::2], strict=True))

    def in_netns(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", self.netns, *argv], capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip


def _repo(dest: Path) -> Path:
    repo = dest / "repo"
    shutil.copytree(FIXTURE, repo)
    (repo / "values.d" / "90-kubelet.yaml").write_text(TEST_LAYER)
    return repo


def _apply(cluster: Cluster) -> str:
    """`reconciler apply` of the repo as `local up` applied it, as a user inside the
    cluster's network runs it (Services by name); what it printed."""
    done = cluster.in_netns(
        sys.executable, "-m", "reconciler", "apply", str(cluster.repo), "--kubeconfig",
        str(cluster.kubeconfig), "--slurm-url", SLURM_URL,
        "--slurm-jwt-key", str(cluster.jwt_key), "--yes", timeout=APPLY_TIMEOUT,
    )  # fmt: skip
    with (cluster.work / "apply.log").open("a") as log:
        log.write(done.stdout + done.stderr)
    assert done.returncode == 0, f"reconciler apply failed:\n{done.stdout[-4000:]}{done.stderr}"
    return done.stdout + done.stderr


def _wait_ready(up: subprocess.Popen[bytes], log: Path) -> str:
    """What `local up` printed once it said it is ready ("ready in" is its last line)."""
    deadline = time.monotonic() + UP_TIMEOUT
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "local: ready in" in text:
            return text
        if up.poll() is not None:
            pytest.fail(f"`local up --kubelet` exited {up.returncode}:\n{text}")
        time.sleep(0.5)
    pytest.fail(f"`local up --kubelet` not ready after {UP_TIMEOUT} s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory,
    stack_timings: dict[str, float],
    figures: dict[str, str],
) -> Iterator[Cluster]:
    _require_kubelet_stack()
    work = tmp_path_factory.mktemp("kubelet-e2e")
    repo = _repo(work)
    runtime = new_temp_runtime_dir("sunk-reconciler-e2e-")
    log = work / "up.log"
    started = time.monotonic()
    with log.open("wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "local", "up", "--kubelet", str(repo),
             "--nodes", "5", "--runtime-dir", str(runtime)],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    stack = None
    try:
        said = _wait_ready(up, log)
        assert said.rstrip().splitlines()[-1].startswith("local: ready in"), said
        stack = LocalStack.open(runtime)
        kubelets = stack.kubelets
        assert kubelets is not None
        found = Cluster(stack.kube_paths.kubeconfig, kubelets.network.name, work, runtime)
        stack_timings["kubelet e2e: `local up --kubelet REPO` to every Pod Ready, nodes idle"] = (
            time.monotonic() - started
        )
        memory = kubelets.memory()
        figures["kubelet e2e memory (MiB resident)"] = (
            f"{sum(memory.values()) / 2**20:.0f} ("
            + (", ".join(f"{k} {v / 2**20:.0f}" for k, v in sorted(memory.items())))
            + ")"
        )
        yield found
    finally:
        _down_leaves_nothing(runtime, up, log, stack)


def _workload_pod_name(pod: dict[str, Any]) -> str:
    """A StatefulSet Pod's name; a Deployment's Pod without its two hashes."""
    name = str(pod["metadata"]["name"])
    owner = pod["metadata"]["ownerReferences"][0]["kind"]
    return name.rsplit("-", 2)[0] if owner == "ReplicaSet" else name


def test_every_pod_is_ready_by_its_own_probes_as_a_container_of_our_image(cluster: Cluster) -> None:
    pods = cluster.pods()
    names = sorted(map(_workload_pod_name, pods))
    assert names == ["slurm-accounting", "slurm-controller", "slurm-cpu-0", "slurm-cpu-1",
                     "slurm-gpu-small-0", "slurm-gpu-small-1", "slurm-login-0",
                     "slurm-mysql-0", "slurm-rest"]  # fmt: skip
    for pod in pods:
        for status in pod["status"]["containerStatuses"]:
            assert status["image"] in OUR_IMAGES, (pod["metadata"]["name"], status["image"])
            assert status["containerID"].startswith("containerd://")
            assert status["ready"] and status["restartCount"] == 0, status
        # The reconfigure sidecar is a shell loop, not probed (docs/rendered-pods.md).
        for container in pod["spec"]["containers"]:
            assert container["name"] == "reconfigure" or "readinessProbe" in container, (
                pod["metadata"]["name"],
                container["name"],
            )
    events = json.loads(cluster.kubectl("get", "events", "-o", "json"))["items"]
    errored = [e["message"] for e in events if "probe errored" in e.get("message", "")]
    assert not errored, errored  # kubelet ignores a probe that cannot run at all


def test_sinfo_shows_the_cpu_slurmd_pods_idle(cluster: Cluster) -> None:
    states = cluster.node_states()
    assert states["slurm-cpu-0"] == "idle" and states["slurm-cpu-1"] == "idle", states


def test_slurmd_logs_no_error_for_its_probes(cluster: Cluster) -> None:
    log = cluster.kubectl("logs", "slurm-cpu-0", "-c", "slurmd")
    assert "Zero Bytes were transmitted" not in log, log


def test_gpu_nodes_are_idle_with_their_gpus(cluster: Cluster) -> None:
    states = cluster.node_states()
    assert states["slurm-gpu-small-0"] == states["slurm-gpu-small-1"] == "idle", states
    node = cluster.slurm("scontrol", "show", "node", "slurm-gpu-small-0")
    assert "Gres=gpu:quadro_rtx_4000:7" in node, node


def test_srun_on_two_nodes_runs_in_the_slurmd_containers(cluster: Cluster) -> None:
    out = cluster.slurm("srun", "-N2", "-p", "all", "--nodelist=slurm-cpu-[0-1]", "hostname",
                        pod="slurm-login-0", container="sshd")  # fmt: skip
    assert sorted(out.split()) == ["slurm-cpu-0", "slurm-cpu-1"]


def test_an_sbatch_job_writes_its_output_on_the_shared_claim(cluster: Cluster) -> None:
    script = "sbatch --wait -p all -N1 -o /mnt/data/e2e-%j.out --wrap 'hostname; id -un'"
    out = cluster.slurm("sh", "-c", script + " && cat /mnt/data/e2e-*.out",
                        pod="slurm-login-0", container="sshd", timeout=180)  # fmt: skip
    lines = out.split()
    assert lines[0].startswith("Submitted"), out
    assert lines[-2] in ("slurm-cpu-0", "slurm-cpu-1") and lines[-1] == "root", out


def _ssh(cluster: Cluster, host: str, command: str) -> subprocess.CompletedProcess[str]:
    """`ssh root@HOST COMMAND` from inside the cluster's network, with the test's key."""
    return cluster.in_netns(
        "ssh", "-i", str(cluster.ssh_key), "-o", "StrictHostKeyChecking=no", "-o",
        "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20",
        f"root@{host}", command,
    )  # fmt: skip


def test_ssh_into_the_login_pod_runs_sinfo(cluster: Cluster) -> None:
    done = _ssh(cluster, f"slurm-login.{NAMESPACE}.svc.cluster.local", "sinfo -h -N -o '%N %T'")
    assert done.returncode == 0, done.stderr
    assert "slurm-cpu-0 idle" in done.stdout, done.stdout


def test_ssh_into_a_compute_pod_refuses_root(cluster: Cluster) -> None:
    """compute.ssh.enabled (SUNK's "Slurm Workload Manager" page): sshd runs beside slurmd in the
    slurmd container, with host keys made at the Pod's start, and admits only whom Slurm would:
    never root, whose key opens the login Pod (tests/integration/test_sshd_run_dir.py tries the
    others)."""
    address = cluster.pod("slurm-cpu-0")["status"]["podIP"]
    done = _ssh(cluster, address, "true")
    assert done.returncode == 255 and "Permission denied" in done.stderr, done.stderr


def _job_state(cluster: Cluster, job: str) -> str:
    out = cluster.slurm("scontrol", "show", "job", job, "-o")
    return out.split("JobState=", 1)[1].split()[0]


def test_a_running_job_outlives_seed_001s_controller_restart(cluster: Cluster) -> None:
    """SUNK's "Slurm Workload Manager" page, "Restarting the Controller": `kubectl rollout restart`
    of the controller's Deployment "will not cancel active jobs"."""
    job = cluster.slurm("sbatch", "--parsable", "--no-requeue", "-p", "all", "-N1",
                        "-o", "/mnt/data/restart-%j.out", "--wrap", "sleep 30; hostname",
                        pod="slurm-login-0", container="sshd").strip()  # fmt: skip
    wait_for(lambda: _job_state(cluster, job) == "RUNNING", 60, f"job {job} running")
    deployment = cluster.kubectl(
        "get", "deployments", "-l", "app.kubernetes.io/component=controller", "-o", "name"
    ).strip()
    old = {p["metadata"]["name"] for p in cluster.pods() if "controller" in p["metadata"]["name"]}
    cluster.kubectl("rollout", "restart", deployment)
    cluster.kubectl("rollout", "status", deployment, "--timeout=180s", timeout=190)
    new = {p["metadata"]["name"] for p in cluster.pods() if "controller" in p["metadata"]["name"]}
    assert new and not new & old, (old, new)  # a new slurmctld container, not the old one
    wait_for(lambda: _job_state(cluster, job) == "COMPLETED", 120, f"job {job} completed")
    out = cluster.slurm("cat", f"/mnt/data/restart-{job}.out", pod="slurm-login-0",
                        container="sshd")  # fmt: skip
    assert out.strip() in ("slurm-cpu-0", "slurm-cpu-1"), out


def test_a_killed_slurmd_is_restarted_by_the_kubelet_and_its_node_returns(cluster: Cluster) -> None:
    def slurmd(pod: dict[str, Any]) -> dict[str, Any]:
        return next(s for s in pod["status"]["containerStatuses"] if s["name"] == "slurmd")

    container_id = slurmd(cluster.pod("slurm-cpu-1"))["containerID"].split("://", 1)[1]
    procs = next(CGROUP_ROOT.glob(f"pids/k8s.io/{container_id}/cgroup.procs"))
    for pid in procs.read_text().split():
        os.kill(int(pid), signal.SIGKILL)

    def back() -> bool:
        status = slurmd(cluster.pod("slurm-cpu-1"))
        return status["restartCount"] == 1 and status["ready"]

    wait_for(back, 120, "slurm-cpu-1's slurmd restarted once and Ready")
    wait_for(lambda: cluster.node_states().get("slurm-cpu-1") == "idle", 120,
             "slurm-cpu-1 idle again in sinfo")  # fmt: skip


def _set_cpu_replicas(cluster: Cluster, replicas: int) -> str:
    """A repo change of compute.nodes.cpu.replicas, applied."""
    layer = cluster.repo / "values.d" / "90-kubelet.yaml"
    layer.write_text(TEST_LAYER.replace("replicas: 2\n", f"replicas: {replicas}\n", 1))
    return _apply(cluster)


def test_replicas_2_3_2_adds_a_node_and_drains_it_before_removing_it(cluster: Cluster) -> None:
    _set_cpu_replicas(cluster, 3)
    wait_for(lambda: cluster.node_states().get("slurm-cpu-2") == "idle", 180,
             "slurm-cpu-2 idle in sinfo")  # fmt: skip
    assert cluster.slurm("srun", "-w", "slurm-cpu-2", "hostname", pod="slurm-login-0",
                         container="sshd").strip() == "slurm-cpu-2"  # fmt: skip

    lines = _set_cpu_replicas(cluster, 2).splitlines()
    drained = lines.index("apply: drained slurm-cpu-2; waiting for their jobs to finish")
    retired = next(i for i, line in enumerate(lines) if line.startswith("apply: retired "))
    shrunk = lines.index("apply: updated StatefulSet slurm/slurm-cpu")
    assert drained < retired < shrunk, lines
    wait_for(lambda: "slurm-cpu-2" not in {p["metadata"]["name"] for p in cluster.pods()}, 120,
             "Pod slurm-cpu-2 gone")  # fmt: skip
    states = cluster.node_states()
    assert "slurm-cpu-2" not in states and states["slurm-cpu-0"] == "idle", states


# The two example Pods of SUNK's "Schedule Kubernetes Pods with Slurm", for this machine, without
# `user-id: 1001`: that user must exist in the controller's and slurmd's containers, which only a
# directory gives them (slurmctld holds such a job: "slurm_cred_create failure"), so both run as
# root. "A Kubernetes job" asks for a whole H100 node; here it takes half a CPU (a Node has 2, its
# slurmd Pod asks for 1) and no GPU. "A single GPU Pod" keeps its one GPU and exclusive=user, on the
# fixture's RTX 4000 nodes.
def _seed_pod(name: str, comment: str, exclusive: str, resources: dict[str, Any],
              affinity: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": {
            "sunk.coreweave.com/account": "root",
            "sunk.coreweave.com/comment": comment,
            "sunk.coreweave.com/exclusive": exclusive}},
        "spec": {
            "schedulerName": "slurm-slurm-slurm-scheduler", "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "main", "image": "ghcr.io/sunk-reconciler/slurm:24.11.5",
                            "imagePullPolicy": "Never", "command": ["sleep", "infinity"],
                            "resources": resources}],
            **({"affinity": affinity} if affinity else {})},
    }  # fmt: skip


SEED_PODS = [
    _seed_pod("slurm-test", "A Kubernetes job", "none", {
        "requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}}),
    _seed_pod("slurm-test-gpu", "A single GPU Pod", "user", {
        "requests": {"cpu": "500m", "memory": "512Mi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "512Mi", "nvidia.com/gpu": "1"}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{
                "key": "gpu.nvidia.com/model", "operator": "In",
                "values": ["Quadro_RTX_4000"]}]}]}}}),
]  # fmt: skip


def _running(cluster: Cluster, names: list[str]) -> bool:
    return all(cluster.pod(name)["status"].get("phase") == "Running" for name in names)


def test_reconciler_run_schedules_seed_002s_pods_onto_the_nodes_slurm_chose(
    cluster: Cluster,
) -> None:
    log = cluster.work / "run.log"
    with log.open("wb") as out:
        daemon = subprocess.Popen(
            ["ip", "netns", "exec", cluster.netns, sys.executable, "-m", "reconciler", "run",
             "--source-dir", str(cluster.repo), "--kubeconfig", str(cluster.kubeconfig),
             "--slurm-url", SLURM_URL, "--slurm-jwt-key", str(cluster.jwt_key),
             "--listen", "127.0.0.1:18080", "--workdir", str(cluster.work / "run"),
             "--hooks-api-bind-address", f"{CONTROL_PLANE_ADDRESS}:0"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    names = [pod["metadata"]["name"] for pod in SEED_PODS]
    try:
        for pod in SEED_PODS:
            cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
        wait_for(lambda: _running(cluster, names), 180, "the example Pods running")
        # One job per Pod: its nodes, its GRES per node, its comment.
        jobs = [line.split("|") for line in
                cluster.slurm("squeue", "-h", "-o", "%N|%b|%k").splitlines()]  # fmt: skip
        by_comment = {comment: (node, gres) for node, gres, comment in jobs}
        assert len(jobs) == 2 and set(by_comment) == {"A Kubernetes job", "A single GPU Pod"}, jobs
        gpu_node, gpu_gres = by_comment["A single GPU Pod"]
        assert gpu_node.startswith("slurm-gpu-small-") and gpu_gres.endswith("gpu:1"), jobs
        for pod in SEED_PODS:
            slurm_node = by_comment[pod["metadata"]["annotations"]["sunk.coreweave.com/comment"]][0]
            placed = cluster.pod(pod["metadata"]["name"])["spec"]["nodeName"]
            assert placed == cluster.pod(slurm_node)["spec"]["nodeName"], (pod, slurm_node)
    finally:
        stop_cleanly(daemon, log)
