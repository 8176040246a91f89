"""The product as a user installs it, on real kubelets from our images: `reconciler local up
--kubelet --in-cluster REPO` loads the images, makes the Secrets and claim the repo names,
serves REPO from a git server and applies deploy/local; the two reconciler Pods (deploy/'s
ServiceAccount, leader election) converge the whole cluster from git and schedule Pods. Every
change below is a `git push`. Slurm runs jobs in the slurmd containers; ssh reaches the login
Pod; the kubelet restarts a killed slurmd. One stack for the whole module.

The repo is fixtures/config-repo with one layer of the test's (TEST_LAYER: two CPU nodes, sshd
in the compute Pods); `local up` adds this machine's (2 CPUs, no GPU: fake device files for
the GPU nodes).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.daemon.status import status_name
from reconciler.local.kubelets.cluster import CGROUP_ROOT
from reconciler.local.kubelets.image_build import image_tag
from reconciler.local.kubelets.repo import MACHINE_LAYER
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import new_temp_runtime_dir
from tests.integration.flux_fixture import install_crd
from tests.integration.helpers import wait_for
from tests.integration.test_kubelet_cluster import _down_leaves_nothing, _require_kubelet_stack

pytestmark = pytest.mark.image  # needs the cluster's images: sorted last, after CI's build

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "config-repo"
NAMESPACE = RELEASE = "slurm"
SLURM_IMAGE = "ghcr.io/sunk-reconciler/slurm:24.11.5"
OUR_IMAGES = {SLURM_IMAGE, "ghcr.io/sunk-reconciler/mariadb:10.11", image_tag()}
SCHEDULER = "slurm-slurm-slurm-scheduler"
LEASE = "slurm-reconciler"  # deploy/base's lease: <release>-reconciler
# Images built on a fresh cache first (the slurm image compiles Slurm), then everything Ready.
UP_TIMEOUT = 3600
CONVERGE_TIMEOUT = 300  # a push to its revision recorded (a slurmctld restart included)
# Two CPU nodes, so that `srun -N2` has two nodes to run on; a third declared (State=FUTURE),
# for which `local up --nodes 5` makes a fifth Node, labelled as the first. `local up` adds
# the rest for this machine of 2 CPUs without GPUs (MACHINE_LAYER, reconciler/local/
# kubelet_repo.py).
LAYER = "values.d/90-kubelet.yaml"
# Beside them, what the push of test_deleting_the_leader... changes (every file the render
# writes into /etc/slurm but slurm.conf) and what the jobs' tests read: task/cgroup (cgroup.conf,
# ConstrainDevices), a prolog and an epilog (SUNK's "Slurm Workload Manager" page: scripts in
# ConfigMaps, run as root), a job_submit.lua (it marks a job's Comment only: the scheduler marks
# its placeholder jobs' AdminComment), a tree topology from the Nodes' labels (every Node a leaf
# under one switch: `srun -N2` spans two Nodes), and a registry login on every Pod.
TEST_LAYER = """\
imagePullSecrets:
  - name: registry-login
slurmConfig:
  slurmCtld:
    taskPlugin: task/cgroup
  slurmd:
    prolog: |
      #!/usr/bin/env bash
      echo "$(id -un) $SLURMD_NODENAME" > /mnt/data/prolog-$SLURM_JOB_ID || true
    epilog: |
      #!/usr/bin/env bash
      echo "$(id -un) $SLURMD_NODENAME" > /mnt/data/epilog-$SLURM_JOB_ID || true
  luaPlugins:
    jobSubmit: |
      function slurm_job_submit(job_desc, part_list, submit_uid)
        if job_desc.comment == nil then job_desc.comment = "job_submit v1" end
        return slurm.SUCCESS
      end
      function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
        return slurm.SUCCESS
      end
compute:
  topology:
    plugin: tree
    switchLabels: [kubernetes.io/hostname, kubernetes.io/os]
  ssh:
    enabled: true  # SUNK's "Slurm Workload Manager": SSH to compute nodes
  nodes:
    cpu:
      replicas: 2
      maxReplicas: 3
"""
PULL_SECRET = "registry-login"


@dataclass
class Cluster:
    kubeconfig: Path
    netns: str
    work: Path
    runtime: Path
    clone: Path  # a clone of the git server's repo: what a user edits and pushes
    pod_git_url: str  # the same repo, as Pods fetch it
    figures: dict[str, str]

    @property
    def ssh_key(self) -> Path:
        return self.runtime / "secrets" / "id_ed25519"

    def kubectl(
        self, *args: str, input: str | None = None, timeout: float = 120,
        ns: str | None = NAMESPACE,
    ) -> str:  # fmt: skip
        where = ["-n", ns] if ns else []  # None: the objects' own namespaces (apply -k)
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), *where, *args],
            capture_output=True, text=True, timeout=timeout, input=input,
        )  # fmt: skip
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def pods(self) -> list[dict[str, Any]]:
        return list(self.get("pods")["items"])

    def pod(self, name: str) -> dict[str, Any]:
        return dict(self.get("pod", name))

    def slurm(self, *argv: str, pod: str = "deploy/slurm-controller", container: str = "slurmctld",
              timeout: float = 120) -> str:  # fmt: skip
        return self.kubectl("exec", pod, "-c", container, "--", *argv, timeout=timeout)

    def node_states(self) -> dict[str, str]:
        lines = self.slurm("sinfo", "-h", "-N", "-o", "%N %T").split()
        return dict(zip(lines[::2], lines[1::2], strict=True))

    def in_netns(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", self.netns, *argv], capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip

    # ---- the reconciler, as a user sees it: git, the Lease, its status and logs ------------

    def push(self, edit: Callable[[str], str], file: str, message: str) -> str:
        """Edit a file of the clone, commit and `git push`: the pushed commit's id."""
        return self.push_edits({file: edit}, message)

    def push_edits(self, edits: dict[str, Callable[[str], str]], message: str) -> str:
        """Edit files of the clone, commit them as one and `git push`: the commit's id."""
        for file, edit in edits.items():
            path = self.clone / file
            before = path.read_text()
            path.write_text(edit(before))
            assert path.read_text() != before, f"the edit of {file} changed nothing"
        git(self.clone, "commit", "-q", "-am", message)
        git(self.clone, "push", "-q", "origin", "HEAD:main")
        return git(self.clone, "rev-parse", "HEAD")

    def status(self) -> dict[str, str]:
        found = self.get("configmap", status_name(RELEASE))
        return dict(found.get("data") or {})

    def converged(self, head: str, timeout: float = CONVERGE_TIMEOUT) -> dict[str, str]:
        """The status once the daemon recorded `head` (applied, unchanged or failed)."""
        return wait_for(
            lambda: (s := self.status()).get("revision") == head and s.get("state") and s,
            timeout, f"revision {head[:12]} recorded in the status ConfigMap: {self.status()}",
        )  # fmt: skip

    def leader(self) -> str:
        return str(self.get("lease", LEASE)["spec"].get("holderIdentity") or "")

    def reconcilers(self) -> list[dict[str, Any]]:
        return list(self.get("pods", "-l", "app.kubernetes.io/name=reconciler")["items"])

    def said(self, pod: str) -> list[str]:
        """The messages of a reconciler Pod's JSON log lines."""
        lines = self.kubectl("logs", pod).splitlines()
        return [json.loads(line)["message"] for line in lines if line.startswith("{")]


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=e2e", "-c", "user.email=e2e@localhost", *args], cwd=cwd,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def _repo(dest: Path) -> Path:
    repo = dest / "repo"
    shutil.copytree(FIXTURE, repo)
    (repo / LAYER).write_text(TEST_LAYER)
    return repo


def _wait_ready(up: subprocess.Popen[bytes], log: Path) -> str:
    """What `local up` printed once it said it is ready ("ready in" is its last line)."""
    deadline = time.monotonic() + UP_TIMEOUT
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "local: ready in" in text:
            return text
        if up.poll() is not None:
            pytest.fail(f"`local up --kubelet --in-cluster` exited {up.returncode}:\n{text}")
        time.sleep(0.5)
    pytest.fail(f"`local up --kubelet --in-cluster` not ready after {UP_TIMEOUT} s:\n"
                f"{log.read_text()}")  # fmt: skip


def _container_mib(container_id: str) -> float:
    """A container's resident memory (its memory cgroup's rss), in MiB."""
    stat = next(CGROUP_ROOT.glob(f"memory/k8s.io/{container_id}/memory.stat")).read_text()
    found = re.search(r"^total_rss (\d+)$", stat, re.M)
    return int(found.group(1)) / 2**20 if found else 0.0


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory,
    stack_timings: dict[str, float],
    figures: dict[str, str],
) -> Iterator[Cluster]:
    _require_kubelet_stack()
    work = tmp_path_factory.mktemp("in-cluster")
    repo = _repo(work)
    runtime = new_temp_runtime_dir("sunk-reconciler-e2e-")
    log = work / "up.log"
    started = time.monotonic()
    with log.open("wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "local", "up", "--kubelet", "--in-cluster",
             str(repo), "--nodes", "5", "--runtime-dir", str(runtime)],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    stack = None
    try:
        said = _wait_ready(up, log)
        assert said.rstrip().splitlines()[-1].startswith("local: ready in"), said
        stack = LocalStack.open(runtime)
        kubelets = stack.kubelets
        assert kubelets is not None
        url = re.search(r"^export RECONCILER_GIT_URL=(\S+)$", said, re.M)
        assert url is not None, said
        git(work, "clone", "-q", url.group(1), "clone")
        served = re.search(r"of branch main at (git://\S+)", said)
        assert served is not None, said
        found = Cluster(stack.kube_paths.kubeconfig, kubelets.network.name, work, runtime,
                        work / "clone", served.group(1), figures)  # fmt: skip
        stack_timings["in-cluster: `local up --kubelet --in-cluster REPO` to ready"] = (
            time.monotonic() - started
        )
        memory = kubelets.memory()
        figures["in-cluster memory (MiB resident)"] = (
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
    assert names == ["reconciler", "reconciler", "slurm-accounting", "slurm-controller",
                     "slurm-cpu-0", "slurm-cpu-1", "slurm-gpu-small-0", "slurm-gpu-small-1",
                     "slurm-login-0", "slurm-mysql-0", "slurm-rest"]  # fmt: skip
    leader = cluster.leader()
    for pod in pods:
        name = pod["metadata"]["name"]
        for status in pod["status"]["containerStatuses"]:
            assert status["image"] in OUR_IMAGES, (name, status["image"])
            assert status["containerID"].startswith("containerd://")
            # Only the leader is ready (deploy/base): the Service reaches the replica that acts.
            follower = _workload_pod_name(pod) == "reconciler" and name != leader
            assert status["ready"] != follower and status["restartCount"] == 0, status
        # The reconfigure sidecar is a shell loop, not probed (docs/rendered-pods.md).
        for container in pod["spec"]["containers"]:
            assert container["name"] == "reconfigure" or "readinessProbe" in container, (
                name,
                container["name"],
            )
    events = cluster.get("events")["items"]
    errored = [e["message"] for e in events if "probe errored" in e.get("message", "")]
    assert not errored, errored  # kubelet ignores a probe that cannot run at all
    # values' imagePullSecrets on every Pod we render (deploy/'s reconciler Pods are not ours),
    # naming the registry login `local up` made, and the kubelets ran them all.
    ours = [p for p in pods if _workload_pod_name(p) != "reconciler"]
    assert all(p["spec"].get("imagePullSecrets") == [{"name": PULL_SECRET}] for p in ours), [
        (p["metadata"]["name"], p["spec"].get("imagePullSecrets")) for p in ours
    ]
    assert cluster.get("secret", PULL_SECRET)["type"] == "kubernetes.io/dockerconfigjson"


def test_the_reconciler_runs_as_deploys_service_account_and_says_little(cluster: Cluster) -> None:
    """Each replica as deploy/base makes it: its ServiceAccount, our image, in containerd; the
    leader's log is what it did, not the job runner's lines every few seconds."""
    for pod in cluster.reconcilers():
        assert pod["spec"]["serviceAccountName"] == "reconciler", pod["spec"]
        [status] = pod["status"]["containerStatuses"]
        assert status["image"] == image_tag() and status["state"].get("running"), status
        memory = _container_mib(status["containerID"].split("://", 1)[1])
        cluster.figures[f"in-cluster: reconciler Pod {pod['metadata']['name']} (MiB rss)"] = (
            f"{memory:.0f}"
        )
    said = cluster.said(cluster.leader())
    assert any(m.startswith("converge: ") for m in said), said[-20:]
    assert not [m for m in said if "executed successfully" in m or "maximum number" in m]


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


def _login(cluster: Cluster, command: str, timeout: float = 180) -> str:
    """A shell command in the login Pod (Slurm's commands, the shared claim at /mnt/data)."""
    return cluster.slurm("sh", "-c", command, pod="slurm-login-0", container="sshd",
                         timeout=timeout)  # fmt: skip


def test_an_sbatch_job_writes_its_output_on_the_shared_claim(cluster: Cluster) -> None:
    """The job runs in a slurmd container; the repo's prolog and epilog (our ConfigMaps at
    prolog.d and epilog.d) ran there as root, around it; its job_submit.lua marked it."""
    script = "sbatch --wait -p all -N1 -o /mnt/data/e2e-%j.out --wrap 'hostname; id -un'"
    out = _login(cluster, script + " && cat /mnt/data/e2e-*.out")
    lines = out.split()
    assert lines[0].startswith("Submitted"), out
    assert lines[-2] in ("slurm-cpu-0", "slurm-cpu-1") and lines[-1] == "root", out
    job = lines[3]
    files = f"cat /mnt/data/prolog-{job} /mnt/data/epilog-{job} 2>/dev/null || true"
    ran = wait_for(  # the epilog runs as the job completes: sbatch --wait may return first
        lambda: len(found := _login(cluster, files).splitlines()) == 2 and found,
        30, f"job {job}'s prolog and epilog files on the claim",
    )  # fmt: skip
    assert ran == [f"root {lines[-2]}", f"root {lines[-2]}"], ran
    assert " Comment=job_submit v1 " in cluster.slurm("scontrol", "show", "job", "-o", job)


# Each fake GPU (reconciler/local/kubelets/repo.py) is a device of NVIDIA's major that no driver
# serves: an open the job's devices cgroup allows fails ENXIO, one it denies EPERM.
GPU_PROBE = (
    'echo "$SLURM_JOB_GPUS $CUDA_VISIBLE_DEVICES"; '
    "for i in 0 1 2 3 4 5 6; do head -c0 /dev/fake-gpu/nvidia$i 2>&1; done; "
    "head -c0 /dev/null && echo /dev/null opened; grep ConstrainDevices /etc/slurm/cgroup.conf"
)


def test_a_gpu_job_opens_only_the_gpu_slurm_gave_it(cluster: Cluster) -> None:
    """task/cgroup with the rendered cgroup.conf's ConstrainDevices=yes: a job given one GPU of a
    node's seven can open that one device only."""
    config = cluster.slurm("scontrol", "show", "config")
    assert re.search(r"^ConstrainDevices\s*=\s*yes$", config, re.M), config
    assert re.search(r"^TaskPlugin\s*=\s*task/cgroup$", config, re.M), config
    job = _login(cluster, "sbatch --parsable --wait -p gpu --gres=gpu:1 -N1 "
                 f"-o /mnt/data/gpu-%j.out --wrap '{GPU_PROBE}'").strip()  # fmt: skip
    out = _login(cluster, f"cat /mnt/data/gpu-{job}.out").splitlines()
    given, visible = out[0].split()
    assert visible == "0", out  # CUDA numbers the job's GPUs from 0
    opened = {f"/dev/fake-gpu/nvidia{i}": line for i, line in enumerate(out[1:8])}
    mine = f"/dev/fake-gpu/nvidia{given}"
    assert "No such device or address" in opened.pop(mine), out  # allowed: no driver behind
    assert all("Operation not permitted" in line for line in opened.values()), out
    assert out[8:] == ["/dev/null opened", "ConstrainDevices=yes"], out


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


def test_a_running_job_outlives_a_controller_restart(cluster: Cluster) -> None:
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
    """`git push` of compute.nodes.cpu.replicas: the pushed commit."""
    return cluster.push(
        lambda text: re.sub(r"(?m)^      replicas: \d+$", f"      replicas: {replicas}", text),
        LAYER, f"cpu: {replicas} replicas",
    )  # fmt: skip


def _applying(said: list[str], head: str) -> list[str]:
    """What the leader logged from its convergence of `head` on."""
    start = next(i for i, m in enumerate(said) if m.startswith(f"converge: {head[:12]}"))
    return said[start:]


def test_a_pushed_replica_joins_and_a_removed_one_is_drained_first(cluster: Cluster) -> None:
    pushed = time.monotonic()
    head = _set_cpu_replicas(cluster, 3)
    wait_for(lambda: cluster.node_states().get("slurm-cpu-2") == "idle", CONVERGE_TIMEOUT,
             "slurm-cpu-2 idle in sinfo")  # fmt: skip
    cluster.figures["in-cluster: git push of replicas +1 -> Slurm node idle (s)"] = (
        f"{time.monotonic() - pushed:.1f}"
    )
    assert cluster.converged(head)["state"] == "applied"
    assert cluster.slurm("srun", "-w", "slurm-cpu-2", "hostname", pod="slurm-login-0",
                         container="sshd").strip() == "slurm-cpu-2"  # fmt: skip

    head = _set_cpu_replicas(cluster, 2)
    assert cluster.converged(head)["state"] == "applied"
    lines = _applying(cluster.said(cluster.leader()), head)
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
def _page_pod(name: str, comment: str, exclusive: str, resources: dict[str, Any],
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


PAGE_PODS = [
    _page_pod("slurm-test", "A Kubernetes job", "none", {
        "requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}}),
    _page_pod("slurm-test-gpu", "A single GPU Pod", "user", {
        "requests": {"cpu": "500m", "memory": "512Mi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "512Mi", "nvidia.com/gpu": "1"}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{
                "key": "gpu.nvidia.com/model", "operator": "In",
                "values": ["Quadro_RTX_4000"]}]}]}}}),
]  # fmt: skip


def _running(cluster: Cluster, names: list[str]) -> bool:
    return all(cluster.pod(name)["status"].get("phase") == "Running" for name in names)


def _why_not(cluster: Cluster, pods: list[str]) -> str:
    """What a scheduling failure shows: the Pods' Events, Slurm's queue, the leader's log."""
    described = cluster.kubectl("describe", "pod", *pods)
    queue = cluster.slurm("squeue", "-o", "%i %j %T %r %N")
    return "\n".join([described, queue, *cluster.said(cluster.leader())[-40:]])


def _placeholders(cluster: Cluster) -> list[tuple[str, str, str]]:
    """(job id, Pod uid, state) of each live placeholder job of ours."""
    out = cluster.slurm("squeue", "-h", "-o", "%i|%j|%T")
    jobs = [line.split("|") for line in out.splitlines()]
    pattern = re.compile(rf"^pod:{NAMESPACE}/[^@]+@([0-9a-f-]+):{SCHEDULER}$")
    return [(i, m.group(1), state) for i, name, state in jobs if (m := pattern.match(name))]


def test_the_in_cluster_scheduler_binds_page_pods_and_a_scancel_deletes_one(
    cluster: Cluster,
) -> None:
    """SUNK's two example Pods, scheduled by the reconciler Pod (the leader) onto the Nodes
    whose slurmd Pods run their placeholder jobs; `scancel` of a job deletes its Pod through
    the job's callback to the hooks Service (the leader), well before the 5 s poll would
    matter."""
    names = [pod["metadata"]["name"] for pod in PAGE_PODS]
    created = time.monotonic()
    for pod in PAGE_PODS:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    try:
        wait_for(lambda: _running(cluster, names), 180, "the example Pods running")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_why_not(cluster, names)}") from None
    cluster.figures["in-cluster: Pod create -> Running, 2 example Pods (s)"] = (
        f"{time.monotonic() - created:.1f}"
    )
    # One job per Pod: its nodes, its GRES per node, its comment.
    jobs = [line.split("|") for line in
            cluster.slurm("squeue", "-h", "-o", "%i|%N|%b|%k").splitlines()]  # fmt: skip
    by_comment = {comment: (job, node, gres) for job, node, gres, comment in jobs}
    assert len(jobs) == 2 and set(by_comment) == {"A Kubernetes job", "A single GPU Pod"}, jobs
    _, gpu_node, gpu_gres = by_comment["A single GPU Pod"]
    assert gpu_node.startswith("slurm-gpu-small-") and gpu_gres.endswith("gpu:1"), jobs
    for pod in PAGE_PODS:
        slurm_node = by_comment[pod["metadata"]["annotations"]["sunk.coreweave.com/comment"]][1]
        placed = cluster.pod(pod["metadata"]["name"])["spec"]["nodeName"]
        assert placed == cluster.pod(slurm_node)["spec"]["nodeName"], (pod, slurm_node)

    job = by_comment["A Kubernetes job"][0]
    cancelled = time.monotonic()
    cluster.slurm("scancel", job)
    wait_for(lambda: cluster.pod("slurm-test")["metadata"].get("deletionTimestamp"), 15,
             f"Pod slurm-test deleted after scancel {job}")  # fmt: skip
    cluster.figures["in-cluster: scancel -> Pod deleted (s)"] = (
        f"{time.monotonic() - cancelled:.1f}"
    )
    cluster.kubectl("delete", "pod", "slurm-test-gpu", "--wait=false")
    wait_for(lambda: not _placeholders(cluster), 60, "both placeholder jobs ended")


def test_a_push_a_policy_denies_is_refused_and_nothing_is_applied(cluster: Cluster) -> None:
    """The fixture's policy: a GPU node definition needs a CUDA layer. The push that drops it
    also changes the GPU nodes' environment, which must not reach the StatefulSet."""
    statefulset = "statefulset/slurm-gpu-small"
    before = cluster.get(statefulset)["spec"]["template"]
    head = cluster.push(
        lambda t: t.replace("[rtx4000, cu117,", "[rtx4000,").replace("value: WARN", "value: INFO"),
        "values.yaml", "GPU nodes without CUDA",
    )  # fmt: skip
    status = cluster.converged(head)
    assert status["state"] == "failed" and "CUDA" in status["error"], status
    assert status["appliedRevision"] != head
    events = cluster.get("events", "--field-selector",
                         f"involvedObject.name={status_name(RELEASE)}")["items"]  # fmt: skip
    refused = [e for e in events if e["reason"] == wk.EVENT_REVISION_DENIED]
    assert refused and head[:12] in refused[-1]["message"], events
    assert cluster.get(statefulset)["spec"]["template"] == before
    undone = cluster.push(
        lambda t: t.replace("[rtx4000,", "[rtx4000, cu117,").replace("value: INFO", "value: WARN"),
        "values.yaml", "undo",
    )  # fmt: skip
    assert cluster.converged(undone)["state"] in ("applied", "unchanged")


def test_deleting_the_leader_hands_the_lease_over_and_the_next_push_converges(
    cluster: Cluster,
) -> None:
    old = cluster.leader()
    deleted = time.monotonic()
    cluster.kubectl("delete", "pod", old, "--wait=false")
    new = wait_for(lambda: (h := cluster.leader()) not in ("", old) and h, 60, "a new leader")
    cluster.figures["in-cluster: leader Pod deleted -> Lease held by the other (s)"] = (
        f"{time.monotonic() - deleted:.1f}"
    )
    before = _slurmctld_view(cluster)
    pushed = time.monotonic()
    head = cluster.push_edits(CONFIG_EDITS, "every file beside slurm.conf changes")
    assert cluster.converged(head)["state"] == "applied"
    assert any(m.startswith(f"converge: {head[:12]}") for m in cluster.said(new))
    _the_running_slurmctld_took_every_file(cluster, before)
    cluster.figures["in-cluster: git push of the files beside slurm.conf -> slurmctld took "
                    "them (s)"] = f"{time.monotonic() - pushed:.1f}"  # fmt: skip


# One push changes every file the render writes into /etc/slurm but slurm.conf; the reconfigure
# sidecar of the controller Pod must see each (it hashes every file there), and slurmctld reread.
GRES_NOTE = "# the second revision of gres.conf"


def _more_gres(text: str) -> str:
    """local up's machine layer, its gresConfig (the fake GPUs' lines) with one more line."""
    layer = yaml.safe_load(text)
    layer["slurmConfig"]["gresConfig"] += GRES_NOTE + "\n"
    return yaml.safe_dump(layer, sort_keys=False)


def _layer_v2(text: str) -> str:
    """The test's layer: job_submit.lua, topology.conf and cgroup.conf each changed."""
    text = text.replace("job_submit v1", "job_submit v2")
    text = text.replace("[kubernetes.io/hostname, kubernetes.io/os]", "[kubernetes.io/os]")
    return text.replace("slurmConfig:\n", "slurmConfig:\n  cgroupConfig: AllowedRAMSpace=95\n", 1)


CONFIG_EDITS: dict[str, Callable[[str], str]] = {LAYER: _layer_v2, MACHINE_LAYER: _more_gres}
SLURMCTLD_TOOK = 120  # kubelet updates the volume (syncFrequency 10 s), the sidecar looks every 5 s


def _slurmctld_view(cluster: Cluster) -> dict[str, str]:
    """What the running slurmctld says of its config files, and slurm.conf as rendered."""
    conf_map = cluster.get("configmap", f"{RELEASE}-slurm-conf")["data"]
    return {
        "config": cluster.slurm("scontrol", "show", "config"),
        "topology": cluster.slurm("scontrol", "show", "topology"),
        "slurm.conf": conf_map["slurm.conf"],
        "gres.conf": conf_map["gres.conf"],
    }


def _the_running_slurmctld_took_every_file(cluster: Cluster, before: dict[str, str]) -> None:
    """slurm.conf is the same, so only the other files can have made the sidecar reconfigure:
    slurmctld shows cgroup.conf's new value and the new topology, and its job_submit.lua marks a
    job with the new text (the plugin rereads a changed script itself); the gres.conf its
    container reads is the new one."""
    after = _slurmctld_view(cluster)
    assert after["slurm.conf"] == before["slurm.conf"]
    assert GRES_NOTE in after["gres.conf"] and GRES_NOTE not in before["gres.conf"]
    loaded = re.compile(r"^Configuration data as of (\S+)", re.M)
    # A leaf switch per Node (its hostname) under `linux`, then `linux` alone; the spares,
    # whose Pods do not run, stay under `_unplaced`.
    switches = re.compile(r"^SwitchName=(\S+)", re.M)
    spine = ["linux", "_unplaced"]
    assert set(switches.findall(before["topology"])) > set(spine), before["topology"]

    def reread() -> dict[str, str] | None:
        now = _slurmctld_view(cluster)
        config, topology = now["config"], now["topology"]
        return now if (
            re.search(r"^AllowedRAMSpace\s*=\s*95", config, re.M)
            and sorted(switches.findall(topology), reverse=True) == spine
        ) else None  # fmt: skip

    try:
        now = wait_for(reread, SLURMCTLD_TOOK, "slurmctld's cgroup.conf value and topology")
    except AssertionError as exc:
        sidecar = cluster.kubectl("logs", "deploy/slurm-controller", "-c", "reconfigure")
        raise AssertionError(f"{exc}\n{_slurmctld_view(cluster)}\nsidecar: {sidecar}") from None
    took = loaded.search(now["config"])
    assert took and took.group(1) != loaded.search(before["config"]).group(1), now["config"]  # type: ignore[union-attr]
    held = cluster.slurm("cat", "/etc/slurm/gres.conf", container="reconfigure")
    assert GRES_NOTE in held, held
    job = cluster.slurm("sbatch", "--parsable", "--hold", "-p", "all", "--wrap", "true",
                        pod="slurm-login-0", container="sshd").strip()  # fmt: skip
    try:
        shown = cluster.slurm("scontrol", "show", "job", "-o", job)
        assert " Comment=job_submit v2 " in shown, shown
    finally:
        cluster.slurm("scancel", job)


def _burst_pod(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"burst-{index}", "namespace": NAMESPACE,
                     "labels": {"app": "burst"},
                     "annotations": {"sunk.coreweave.com/account": "root"}},
        "spec": {
            "schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "main", "image": SLURM_IMAGE, "imagePullPolicy": "Never",
                            "command": ["sleep", "infinity"],
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                                          "limits": {"memory": "16Mi"}}}]},
    }  # fmt: skip


def test_a_rollout_restart_during_a_burst_loses_and_duplicates_no_job(cluster: Cluster) -> None:
    """20 Pods, and `kubectl rollout restart` of the reconciler at once: both replicas stop
    (Recreate), one takes the Lease and adopts what the other submitted. Every Pod ends with
    exactly one job; Slurm's accounting shows no second one ever submitted."""
    old = {p["metadata"]["name"] for p in cluster.reconcilers()}
    pods = [_burst_pod(i) for i in range(20)]
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": pods}))  # fmt: skip
    cluster.kubectl("rollout", "restart", "deployment/reconciler")
    wait_for(lambda: cluster.leader() not in old | {""}, 120, "a leader of the new replicas")
    uids = {p["metadata"]["uid"] for p in cluster.get("pods", "-l", "app=burst")["items"]}
    assert len(uids) == 20

    def each_one_job() -> bool:
        held = Counter(uid for _, uid, _ in _placeholders(cluster) if uid in uids)
        assert all(n == 1 for n in held.values()), held  # never two live jobs for a Pod
        return set(held) == uids

    wait_for(each_one_job, 180, "a job for each of the 20 Pods")

    def started_are_bound() -> bool:
        running = {uid for _, uid, state in _placeholders(cluster) if state == "RUNNING"}
        burst = cluster.get("pods", "-l", "app=burst")["items"]
        return running <= {p["metadata"]["uid"] for p in burst if p["spec"].get("nodeName")}

    wait_for(started_are_bound, 60, "every Pod whose job runs bound to its Node")
    cluster.kubectl("delete", "pods", "-l", "app=burst", "--wait=false")
    wait_for(lambda: not _placeholders(cluster), 120, "every burst job ended")
    # Every job ever submitted, cancelled ones too (-D: requeued ones as well).
    accounted = cluster.slurm("sacct", "-a", "-D", "-X", "-n", "-P", "-S", "now-1hours",
                              "-o", "JobID,JobName%300")  # fmt: skip
    submitted = Counter(
        m.group(1)
        for line in accounted.splitlines()
        if (m := re.search(r"@([0-9a-f-]+):", line)) and m.group(1) in uids
    )
    assert set(submitted) == uids and set(submitted.values()) == {1}, (submitted, accounted)


# ---- the sidecar paths: Argo CD's plugin and Flux's artifact, as Pods -----------------------


def _argo_env(cluster: Cluster) -> list[dict[str, str]]:
    """What Argo CD gives a plugin's generate command for the Application of deploy/argocd."""
    app = yaml.safe_load((ROOT / "deploy" / "argocd" / "application.yaml").read_text())
    source = app["spec"]["source"]
    values = {
        "ARGOCD_APP_NAME": app["metadata"]["name"],
        "ARGOCD_APP_NAMESPACE": app["spec"]["destination"]["namespace"],
        "ARGOCD_APP_PROJECT_NAME": app["spec"]["project"],
        "ARGOCD_APP_SOURCE_PATH": source["path"],
        "ARGOCD_APP_SOURCE_REPO_URL": cluster.pod_git_url,  # the stack's, not example.org
        "ARGOCD_APP_SOURCE_TARGET_REVISION": source["targetRevision"],
        "KUBE_VERSION": "1.20",
    }
    return [{"name": k, "value": v} for k, v in values.items()]


def _cmp_pod(cluster: Cluster) -> dict[str, Any]:
    """deploy/argocd's sidecar container as the repo-server patch has it (image, security
    context, limits, mounts), with Argo CD's own volumes, running the stand-in for cmp-server
    (tests/integration/argocd_cmp_standin.py) instead of Argo's binary."""
    patch = yaml.safe_load((ROOT / "deploy" / "argocd" / "repo-server-patch.yaml").read_text())
    spec = patch["spec"]["template"]["spec"]
    [container] = spec["containers"]
    container = {
        **container, "command": ["python", "/standin/cmp.py"], "imagePullPolicy": "Never",
        "env": _argo_env(cluster),
        "volumeMounts": [*container["volumeMounts"], {"name": "standin", "mountPath": "/standin"}],
    }  # fmt: skip
    volumes = [*spec["volumes"], {"name": "var-files", "emptyDir": {}},
               {"name": "plugins", "emptyDir": {}},
               {"name": "standin", "configMap": {"name": "cmp-standin"}}]  # fmt: skip
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "argocd-repo-server-cmp", "namespace": "argocd"},
        "spec": {"restartPolicy": "Never", "containers": [container], "volumes": volumes},
    }  # fmt: skip


def test_the_argo_cd_plugin_renders_in_its_sidecar_what_the_daemon_applied(
    cluster: Cluster,
) -> None:
    """Argo CD itself does not build here: its cmp-server is stood in for (the stand-in's
    docstring says what it does of cmp-server's work). The rest is as deployed: the plugin's
    ConfigMap from `kubectl apply -k deploy/argocd`, the sidecar's container from the patch,
    the repo from the git server; what it prints is what the daemon applied."""
    cluster.kubectl("create", "namespace", "argocd")
    cluster.kubectl("apply", "-k", str(ROOT / "deploy" / "argocd"), ns="argocd")
    standin = Path(__file__).with_name("argocd_cmp_standin.py")
    cluster.kubectl("create", "configmap", "cmp-standin", f"--from-file=cmp.py={standin}",
                    ns="argocd")  # fmt: skip
    cluster.kubectl("apply", "-f", "-", input=json.dumps(_cmp_pod(cluster)), ns="argocd")
    pod = "argocd-repo-server-cmp"

    def done() -> str:
        phase = cluster.get("pod", pod, "-n", "argocd")["status"].get("phase")
        return phase if phase in ("Succeeded", "Failed") else ""

    phase = wait_for(done, 180, "the plugin's generate command to finish")
    printed = cluster.kubectl("logs", pod, ns="argocd")
    assert phase == "Succeeded", printed[-4000:]
    rendered = [doc for doc in yaml.safe_load_all(printed) if doc]
    env = {**os.environ, **{e["name"]: e["value"] for e in _argo_env(cluster)}}
    git(cluster.clone, "pull", "-q", "origin", "main")
    here = subprocess.run([sys.executable, "-m", "reconciler", "render", "."], cwd=cluster.clone,
                          env=env, capture_output=True, text=True, check=True)  # fmt: skip
    assert rendered == [doc for doc in yaml.safe_load_all(here.stdout) if doc]
    assert {"StatefulSet", "Service", "ConfigMap"} <= {obj["kind"] for obj in rendered}
    live = cluster.kubectl("get", "-f", "-", "-o", "name", input=printed)  # each one exists
    assert len(live.split()) == len(rendered), live
    cluster.kubectl("delete", "namespace", "argocd", "--wait=false")


ARTIFACTS = "source-controller"  # the Service name source-controller's artifacts come from


def _artifact_server(directory: Path) -> list[dict[str, Any]]:
    """A Pod and Service shaped as source-controller's storage: tarballs over HTTP at
    /gitrepository/<namespace>/<name>/<file>, here from a directory of this machine."""
    labels = {"app": ARTIFACTS}
    return [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": ARTIFACTS, "namespace": "flux-system", "labels": labels},
         "spec": {"containers": [{
             "name": "storage", "image": image_tag(), "imagePullPolicy": "Never",
             "command": ["python", "-m", "http.server", "9090", "--directory", "/data"],
             "securityContext": {"runAsUser": 0},
             "ports": [{"containerPort": 9090}],
             "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}]}],
             "volumes": [{"name": "data", "hostPath": {"path": str(directory),
                                                       "type": "Directory"}}]}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": ARTIFACTS, "namespace": "flux-system"},
         "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 9090}]}},
    ]  # fmt: skip


def _publish(cluster: Cluster, admin: Kube, directory: Path) -> str:
    """The clone's HEAD as source-controller publishes it: the tarball in storage, its URL,
    digest and revision in the GitRepository's status. The revision."""
    git(cluster.clone, "pull", "-q", "origin", "main")
    sha = git(cluster.clone, "rev-parse", "HEAD")
    body = subprocess.run(["git", "archive", "--format=tar.gz", "HEAD"], cwd=cluster.clone,
                          capture_output=True, check=True).stdout  # fmt: skip
    path = f"gitrepository/flux-system/cluster-config/{sha}.tar.gz"
    (directory / path).parent.mkdir(parents=True, exist_ok=True)
    (directory / path).write_bytes(body)
    revision = f"main@sha1:{sha}"
    admin.apply({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": "cluster-config", "namespace": "flux-system"},
        "status": {"artifact": {
            "url": f"http://{ARTIFACTS}.flux-system.svc.cluster.local./{path}",
            "revision": revision, "digest": f"sha256:{hashlib.sha256(body).hexdigest()}",
        }},
    }, force=True, field_manager="source-controller")  # fmt: skip
    return revision


def test_the_daemon_converges_a_flux_artifact_served_by_a_pod(cluster: Cluster) -> None:
    """deploy/flux over the running install, as a user moves from git to Flux: the daemon reads
    the GitRepository's artifact from a Pod shaped as source-controller's storage (Flux's
    controllers do not run here: the GitRepository's status is written as source-controller
    writes it, the CRD is its v1 shape without Flux's schema), and converges each new one."""
    admin = Kube.from_kubeconfig(cluster.kubeconfig, field_manager="e2e")
    install_crd(admin)
    directory = cluster.runtime / "flux-artifacts"
    directory.mkdir()
    cluster.kubectl("create", "namespace", "flux-system")
    for obj in _artifact_server(directory):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj), ns="flux-system")
    cluster.kubectl("apply", "-k", str(ROOT / "deploy" / "flux"), ns=None)
    first = _publish(cluster, admin, directory)
    cluster.kubectl("rollout", "restart", "deployment/reconciler")  # settings are read at start
    assert cluster.converged(first)["state"] in ("applied", "unchanged")
    cluster.push(lambda t: t + "# published by Flux\n", "values.yaml", "a change for Flux")
    published = time.monotonic()
    second = _publish(cluster, admin, directory)
    assert cluster.converged(second)["state"] in ("applied", "unchanged")
    cluster.figures["in-cluster: Flux artifact published -> converged (s)"] = (
        f"{time.monotonic() - published:.1f}"
    )
    assert cluster.status()["origin"] == "flux GitRepository flux-system/cluster-config"
