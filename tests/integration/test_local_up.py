"""`reconciler local up | status | down` end to end, as a user runs them: the fixture repo's
slurmd Pods Running on Ready Nodes, their Slurm nodes IDLE, and nothing left after `down`. The
module's copy of the repo adds a prolog and an epilog that leave proof, and Slurm timeouts of
its own, to see both reach the Slurm that runs."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.adapters.kube import Kube
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import new_temp_runtime_dir
from tests.integration.conftest import require_kube_binaries, require_slurm_binaries
from tests.integration.helpers import unique, wait_for
from tests.integration.local_stack_ops import (
    leftover_processes,
    listening_ports,
    recorded_pids,
    recorded_ports,
)

REPO = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"
SLURM_NODES = ["slurm-cpu-0", "slurm-gpu-small-0", "slurm-gpu-small-1"]


def cli(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


@dataclass(frozen=True)
class RepoCopy:
    """The module's copy of the fixture repo: its prolog and epilog leave proof in `proof`, and
    its Slurm timeouts are not the fixture's (nor Slurm's defaults)."""

    repo: Path
    proof: Path
    token: str  # written only in this copy's scripts: proof that they are what ran


# Slurm's names (as `scontrol show config` gives them) of the values keys of SUNK's "Slurm
# Workload Manager" page, "Configuration": slurmConfig.slurmCtld.timeout, .slurmd.timeout,
# .inactiveLimit, .waitTime; each set to neither the fixture's value nor Slurm's default.
TIMEOUTS = {"SlurmctldTimeout": 77, "SlurmdTimeout": 44, "InactiveLimit": 301, "WaitTime": 7}
FAIL_COMMENT = "make-the-prolog-fail"  # a job with this comment fails the prolog


def job_scripts_values(proof: Path, token: str) -> str:
    """A values.d file: the timeouts above, and a prolog and epilog that record who ran them
    for which job (the epilog also what the job wrote). Only a job whose comment is
    FAIL_COMMENT fails the prolog (slurmd gives the prolog the comment, not the job's name)."""
    return f"""slurmConfig:
  waitTime: {TIMEOUTS["WaitTime"]}
  inactiveLimit: {TIMEOUTS["InactiveLimit"]}
  slurmCtld:
    timeout: {TIMEOUTS["SlurmctldTimeout"]}
  slurmd:
    timeout: {TIMEOUTS["SlurmdTimeout"]}
    prolog: |
      #!/usr/bin/env bash
      echo "{token} prolog uid=$(id -u) job=$SLURM_JOB_ID" > {proof}/prolog-$SLURM_JOB_ID
      [ "$SLURM_JOB_COMMENT" != "{FAIL_COMMENT}" ]
    epilog:
      10-proof.sh: |
        #!/usr/bin/env bash
        job=$(cat {proof}/job-$SLURM_JOB_ID)
        echo "{token} epilog uid=$(id -u) job=$SLURM_JOB_ID saw=$job" > {proof}/epilog-$SLURM_JOB_ID
"""


@pytest.fixture(scope="module")
def repo_copy() -> Iterator[RepoCopy]:
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-up-repo-"))
    work.chmod(0o755)  # the test's job runs as nobody and writes into proof/
    proof = work / "proof"
    proof.mkdir(mode=0o777)
    proof.chmod(0o777)
    copy = RepoCopy(work / "repo", proof, unique("from-the-repo"))
    shutil.copytree(REPO, copy.repo)
    values = job_scripts_values(proof, copy.token)
    (copy.repo / "values.d" / "20-job-scripts.yaml").write_text(values)
    try:
        yield copy
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def local_up(repo_copy: RepoCopy) -> Iterator[tuple[Path, subprocess.Popen[str], float]]:
    require_kube_binaries()
    require_slurm_binaries()
    runtime = new_temp_runtime_dir("sunk-reconciler-up-")
    started = time.monotonic()
    up = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "local", "up", str(repo_copy.repo), "--runtime-dir",
         str(runtime)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for_line(up, "local: ready in", timeout=150)
        yield runtime, up, time.monotonic() - started
    finally:
        if up.poll() is None:
            cli("local", "down", "--runtime-dir", str(runtime))
            up.wait(timeout=60)
        shutil.rmtree(runtime, ignore_errors=True)


def _wait_for_line(process: subprocess.Popen[str], marker: str, *, timeout: float) -> None:
    assert process.stderr is not None
    fd = process.stderr.fileno()
    os.set_blocking(fd, False)
    deadline, seen = time.monotonic() + timeout, b""
    while time.monotonic() < deadline:
        with contextlib.suppress(BlockingIOError):
            seen += os.read(fd, 65536)
        if marker.encode() in seen:
            return
        if process.poll() is not None:
            pytest.fail(f"`local up` exited {process.returncode}:\n{seen.decode()}")
        time.sleep(0.2)
    pytest.fail(f"`local up` not ready after {timeout} s:\n{seen.decode()}")


def test_up_reaches_ready_nodes_running_pods_and_idle_slurm_nodes(
    local_up: tuple[Path, subprocess.Popen[str], float], stack_timings: dict[str, float]
) -> None:
    runtime, _, seconds = local_up
    stack_timings["`reconciler local up` to ready (fixture repo, 3 slurmd Pods)"] = seconds
    stack = LocalStack.open(runtime)
    kube = Kube.from_kubeconfig(stack.kube_paths.kubeconfig)
    plane = stack.kube
    assert plane is not None and all(plane.health().values()), plane.health()  # /readyz ok
    nodes = kube.list("v1", "Node").items
    assert len(nodes) == 3
    for node in nodes:
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"
    gpu_nodes = [n for n in nodes if "nvidia.com/gpu" in n["status"]["capacity"]]
    assert {n["metadata"]["labels"]["gpu.nvidia.com/model"] for n in gpu_nodes} == {
        "Quadro_RTX_4000"
    }

    listed = kube.list("v1", "Pod", "slurm", label_selector="app.kubernetes.io/name=slurmd")
    pods = {p["metadata"]["name"]: p for p in listed.items}
    assert sorted(pods) == SLURM_NODES
    assert {p["status"]["phase"] for p in pods.values()} == {"Running"}
    assert len({p["spec"]["nodeName"] for p in pods.values()}) == 3  # spread, one per Node

    slurm = stack.slurm
    assert slurm is not None
    for name in SLURM_NODES:
        assert "IDLE" in slurm.node_state(name), name
    out = slurm.run("srun", "-p", "gpu", "--gres=gpu:2", "-N1", "printenv", "CUDA_VISIBLE_DEVICES")
    assert out.strip() == "0,1"


def test_prolog_from_the_repo_is_materialized(
    local_up: tuple[Path, subprocess.Popen[str], float],
) -> None:
    runtime, _, _ = local_up
    stack = LocalStack.open(runtime)
    etc = stack.slurm_paths.etc
    prolog = etc / "prolog.d" / "00-prolog.sh"
    assert prolog.exists() and os.access(prolog, os.X_OK)
    assert f"Prolog={etc}/prolog.d/*" in (etc / "slurm.conf").read_text().splitlines()


def kubectl(runtime: Path, *args: str, timeout: float = 60) -> str:
    """kubectl as a user runs it against the stack (Debian's 1.20 client, as CI installs)."""
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.fail("kubectl is not installed: run .ci/run's setup")
    env = {**os.environ, "KUBECONFIG": str(LocalStack.open(runtime).kube_paths.kubeconfig)}
    done = subprocess.run([binary, "-n", "slurm", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)  # fmt: skip
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


# The `kubectl get pods` of SUNK's "Slurm Workload Manager" page: the control plane as Deployments
# and StatefulSets beside the compute StatefulSets (a Deployment's Pod is <name>-<ReplicaSet
# hash>-<suffix>).
PAGE_PODS = [
    r"slurm-accounting-[a-z0-9]+-[a-z0-9]{5}", r"slurm-controller-[a-z0-9]+-[a-z0-9]{5}",
    "slurm-cpu-0", "slurm-gpu-small-0", "slurm-gpu-small-1", "slurm-login-0", "slurm-mysql-0",
    r"slurm-rest-[a-z0-9]+-[a-z0-9]{5}",
]  # fmt: skip


def test_kubectl_shows_the_whole_cluster_as_the_slurm_page_lists_it(
    local_up: tuple[Path, subprocess.Popen[str], float],
) -> None:
    runtime, _, _ = local_up
    rows = [line.split() for line in kubectl(runtime, "get", "pods", "--no-headers").splitlines()]
    assert len(rows) == len(PAGE_PODS), rows
    for (name, ready, status, *_), pattern in zip(sorted(rows), PAGE_PODS, strict=True):
        assert re.fullmatch(pattern, name), name
        done, total = ready.split("/")
        assert status == "Running" and done == total, (name, ready, status)
    # SUNK's "Slurm Workload Manager" page, "Restarting the Controller" and "Logging", as written
    # there.
    deployments = kubectl(runtime, "get", "deployments", "-l",
                          "app.kubernetes.io/component=controller", "-o", "name")  # fmt: skip
    assert deployments.split() == ["deployment.apps/slurm-controller"]
    logs = kubectl(runtime, "logs", "-l", "app.kubernetes.io/name=slurmctld", "-c", "slurmctld")
    assert "Running as primary controller" in logs
    claims = kubectl(runtime, "get", "pvc", "--no-headers").splitlines()
    assert {line.split()[0]: line.split()[1] for line in claims} == {
        "data-slurm-mysql-0": "Bound", "slurm-controller-state": "Bound"
    }  # fmt: skip


def test_the_login_pod_takes_ssh_with_the_key_of_the_secret_values_name(
    local_up: tuple[Path, subprocess.Popen[str], float], tmp_path: Path
) -> None:
    runtime, _, _ = local_up
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    # As the fixture's values.yaml tells a user: the Secret login.authorizedKeysSecret names,
    # then a new login Pod (a subPath mount is read when the Pod starts).
    kubectl(runtime, "create", "secret", "generic", "slurm-login-keys",
            f"--from-file=authorized_keys={key}.pub")  # fmt: skip
    kubectl(runtime, "delete", "pod", "slurm-login-0")
    # kubectl wait fails at once (NotFound) until the StatefulSet has made the Pod again.
    kube = Kube.from_kubeconfig(LocalStack.open(runtime).kube_paths.kubeconfig)
    wait_for(lambda: kube.get("v1", "Pod", "slurm-login-0", "slurm"), 60, "a new slurm-login-0")
    kubectl(runtime, "wait", "--for=condition=Ready", "pod/slurm-login-0", "--timeout=60s")
    slurm = LocalStack.open(runtime).slurm
    assert slurm is not None
    port = slurm.ports.ssh
    ssh = ["ssh", "-i", str(key), "-p", str(port), "-o", "BatchMode=yes",
           "-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={tmp_path}/known",
           "root@127.0.0.1"]  # fmt: skip
    done = subprocess.run([*ssh, "sinfo", "-h", "-o", "%P"], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["all*", "gpu"]
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)],
                   check=True)  # fmt: skip
    refused = subprocess.run([*ssh[:2], str(stranger), *ssh[3:], "true"], capture_output=True,
                             text=True, timeout=60, check=False)  # fmt: skip
    assert refused.returncode == 255 and "Permission denied" in refused.stderr


def test_a_rollout_restart_of_the_controller_keeps_a_running_job(
    local_up: tuple[Path, subprocess.Popen[str], float],
    tmp_path: Path,
    stack_timings: dict[str, float],
) -> None:
    runtime, _, _ = local_up
    slurm = LocalStack.open(runtime).slurm
    assert slurm is not None
    tmp_path.chmod(0o777)
    out = tmp_path / "job.out"
    job = slurm.run("sbatch", "--parsable", "-p", "all", "-o", str(out),
                    "--wrap", "sleep 6; echo finished").strip()  # fmt: skip
    wait_for(lambda: slurm.run("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING", 30,
             f"job {job} RUNNING")  # fmt: skip
    before = slurm.supervisor.running("slurmctld")
    assert before is not None
    started = time.monotonic()
    # SUNK's "Slurm Workload Manager" page: kubectl rollout restart deployment <controller
    # deployment name>
    kubectl(runtime, "rollout", "restart", "deployment", "slurm-controller")
    kubectl(runtime, "rollout", "status", "deployment", "slurm-controller", "--timeout=60s")
    wait_for(slurm.controller_up, 30, "slurmctld to answer again")
    stack_timings["kubectl rollout restart of the controller: to slurmctld answering"] = (
        time.monotonic() - started
    )
    after = slurm.supervisor.running("slurmctld")
    assert after is not None and after.pid != before.pid
    assert slurm.run("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING"
    wait_for(lambda: out.exists() and "finished" in out.read_text(), 60, f"job {job} to finish")
    wait_for(lambda: slurm.run("sacct", "-n", "-X", "-j", job, "-o", "State").split()
             == ["COMPLETED"], 30, f"accounting to record job {job} COMPLETED")  # fmt: skip


# SUNK's "Run Workloads", "Prolog and Epilog Scripts": the prolog and the epilog run as root on
# the compute nodes, before and after jobs; a prolog that exits non-zero drains the node.


def test_the_repos_prolog_runs_as_root_before_the_job_and_its_epilog_after(
    local_up: tuple[Path, subprocess.Popen[str], float], repo_copy: RepoCopy
) -> None:
    slurm = LocalStack.open(local_up[0]).slurm
    assert slurm is not None
    proof, token = repo_copy.proof, repo_copy.token
    job = slurm.run("sbatch", "--parsable", "--uid=65534", "--gid=65534", "-p", "all",
                    "--chdir=/tmp", "-o", "/dev/null",
                    "--wrap", f"echo uid=$(id -u) > {proof}/job-$SLURM_JOB_ID").strip()  # fmt: skip
    prolog, ran, epilog = (proof / f"{what}-{job}" for what in ("prolog", "job", "epilog"))
    wait_for(lambda: epilog.exists() and epilog.read_text().strip(), 30, f"job {job}'s epilog")
    # The scripts of this repo copy (its token), as root, for this job, though the job ran as
    # nobody; the epilog read what the job wrote, so it ran after it.
    assert prolog.read_text().split() == [token, "prolog", "uid=0", f"job={job}"]
    assert ran.read_text().strip() == "uid=65534"
    assert epilog.read_text().split() == [token, "epilog", "uid=0", f"job={job}", "saw=uid=65534"]
    assert prolog.stat().st_mtime_ns <= ran.stat().st_mtime_ns


def test_a_failing_prolog_drains_the_node_and_holds_the_job(
    local_up: tuple[Path, subprocess.Popen[str], float], repo_copy: RepoCopy
) -> None:
    slurm = LocalStack.open(local_up[0]).slurm
    assert slurm is not None
    node = "slurm-cpu-0"
    job = slurm.run("sbatch", "--parsable", "-p", "all", "-w", node, "--comment", FAIL_COMMENT,
                    "--chdir=/tmp", "-o", "/dev/null", "--wrap", "true").strip()  # fmt: skip
    try:
        wait_for(lambda: "DRAIN" in slurm.node_state(node), 30, f"{node} to drain")
        assert slurm.run("sinfo", "-h", "-N", "-n", node, "-o", "%E").split("\n")[0] == (
            "Prolog error"
        )
        # Requeued and held, not lost: it waits for an admin (scontrol release) once fixed.
        wait_for(lambda: slurm.run("squeue", "-h", "-j", job, "-o", "%T: %r").strip()
                 == "PENDING: launch failed requeued held", 30,
                 f"job {job} requeued and held")  # fmt: skip
        assert (repo_copy.proof / f"prolog-{job}").exists()  # it ran, and refused the job
    finally:
        slurm.run("scancel", job, check=False)
        slurm.run("scontrol", "update", f"nodename={node}", "state=resume", check=False)
        wait_for(lambda: slurm.node_state(node) == {"IDLE"}, 30, f"{node} to be IDLE again")


def test_the_repos_timeouts_are_the_ones_slurm_runs_with(
    local_up: tuple[Path, subprocess.Popen[str], float],
) -> None:
    slurm = LocalStack.open(local_up[0]).slurm
    assert slurm is not None
    config = slurm.run("scontrol", "show", "config")
    shown = dict(re.findall(r"^(\w+)\s*= (\d+) sec$", config, re.M))
    assert {key: int(shown[key]) for key in TIMEOUTS if key in shown} == TIMEOUTS


def test_scale_down_stops_that_slurmd(local_up: tuple[Path, subprocess.Popen[str], float]) -> None:
    runtime, _, _ = local_up
    stack = LocalStack.open(runtime)
    kube = Kube.from_kubeconfig(stack.kube_paths.kubeconfig)
    sts = kube.get("apps/v1", "StatefulSet", "slurm-gpu-small", "slurm")
    assert sts is not None
    kube.apply(
        {"apiVersion": "apps/v1", "kind": "StatefulSet",
         "metadata": {"name": "slurm-gpu-small", "namespace": "slurm"}, "spec": {"replicas": 1}},
        field_manager="test-scaler", force=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if kube.get("v1", "Pod", "slurm-gpu-small-1", "slurm") is None:
            break
        time.sleep(0.2)
    else:
        pytest.fail("pod slurm-gpu-small-1 still exists 60 s after scale-down")
    assert stack.supervisor.running("slurmd-slurm-gpu-small-1") is None


def test_status_then_down_leaves_nothing(
    local_up: tuple[Path, subprocess.Popen[str], float],
) -> None:
    runtime, up, _ = local_up
    status = cli("local", "status", "--runtime-dir", str(runtime))
    assert status.returncode == 0, status.stdout + status.stderr
    for component in ("etcd", "kube-apiserver", "slurmctld", "slurmrestd", "slurmd-slurm-cpu-0"):
        assert any(
            line.startswith(component) and line.endswith("healthy")
            for line in status.stdout.splitlines()
        ), component
    stack = LocalStack.open(runtime)
    pids, ports = recorded_pids(stack), recorded_ports(stack)
    # As the README has users do: SLURM_CONF exported in the shell that runs `down`.
    exported = {**os.environ, "SLURM_CONF": str(stack.slurm_paths.slurm_conf)}
    down = cli("local", "down", "--runtime-dir", str(runtime), env=exported)
    assert down.returncode == 0, down.stderr
    assert up.wait(timeout=60) == 0
    assert leftover_processes(stack, pids) == []
    assert not ports & listening_ports()


def test_up_again_in_the_same_runtime_dir_is_a_new_cluster(
    local_up: tuple[Path, subprocess.Popen[str], float],
) -> None:
    """As a user runs the quick start twice (the default runtime dir): the new cluster's keys
    are its new Secrets', never the last one's left on disk."""
    runtime, _, _ = local_up
    again = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "local", "up", str(REPO), "--runtime-dir",
         str(runtime)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for_line(again, "local: ready in", timeout=150)
        slurm = LocalStack.open(runtime).slurm
        assert slurm is not None and slurm.rest_ready()
    finally:
        cli("local", "down", "--runtime-dir", str(runtime))
        again.wait(timeout=60)
    assert again.returncode == 0
