"""`reconciler local up --kubelet`, as a user runs it: two real kubelets on containerd run Pods
from an image built here, with probes, cluster DNS, Services, logs, exec and restarts; `local
down` leaves no process, mount, namespace or cgroup behind.

The image is the debootstrapped Debian base of tests/integration/image.py (perl-base serves
TCP, bash's /dev/tcp connects), saved as an OCI archive and loaded into every Node.
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

from reconciler.local.kubelets.cluster import CGROUP_ROOT
from reconciler.local.kubelets.nodes import extra_binaries
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import new_temp_runtime_dir
from tests.integration.conftest import require_kube_binaries, unavailable
from tests.integration.helpers import wait_for
from tests.integration.image import BASE_TAG, ImageError, Podman, build_lock, ensure_base
from tests.integration.local_stack_ops import leftover_processes, mounts_under, recorded_pids

# Sorted with the image tests, last: it needs the debootstrapped base that CI's early image
# build makes (under a lock this test would otherwise wait on while the suite stands still).
pytestmark = pytest.mark.image

NAMESPACE = "kt"
IMAGE = BASE_TAG  # localhost/debian:bookworm
UP_TIMEOUT = 240
# Answers each connection with the Pod's hostname; says so on stdout first (kubectl logs).
SERVER = (
    "use IO::Socket::INET; $|=1; my $s = IO::Socket::INET->new(LocalPort => 8080, Listen => 5,"
    ' ReuseAddr => 1) or die $!; chomp(my $h = `hostname`); print "listening as $h\\n";'
    ' while (my $c = $s->accept) { print $c "$h\\n"; close $c }'
)


@dataclass
class Cluster:
    runtime: Path
    kubeconfig: Path
    netns: str
    up_seconds: float

    def kubectl(self, *args: str, ok: bool = True, timeout: float = 60) -> str:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if ok:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def get(self, kind: str, name: str = "", namespace: str | None = NAMESPACE) -> Any:
        ns = ["-n", namespace] if namespace else []
        return json.loads(self.kubectl("get", kind, *([name] if name else []), *ns, "-o", "json"))


def _require_kubelet_stack() -> None:
    require_kube_binaries()
    from reconciler.errors import LocalStackError
    from reconciler.local.kube import control_plane as kube_module

    try:
        extra_binaries(kube_module.find_binaries())
    except LocalStackError as exc:
        unavailable(exc.message)
    missing = [p for p in ("containerd", "runc", "dnsmasq", "nsenter", "podman", "gcc")
               if shutil.which(p) is None]  # fmt: skip
    if missing or os.geteuid() != 0:
        unavailable(f"the kubelet cluster needs root and {', '.join(missing) or 'nothing else'}")


def _image_archive(dest: Path) -> Path:
    """The Debian base image as an OCI archive for containerd."""
    podman = Podman.here()
    if not podman.exists(IMAGE):  # the lock waits for any image build (CI starts one early)
        with build_lock():
            ensure_base(podman, dest / "base.log")
    archive = dest / "debian.oci.tar"
    # TODO(i32-images): use tests/integration/image.py's save-as-OCI function once it exists.
    podman.run("save", "--format", "oci-archive", "-o", str(archive), IMAGE)
    return archive


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory,
    stack_timings: dict[str, float],
    figures: dict[str, str],
) -> Iterator[Cluster]:
    _require_kubelet_stack()
    work = tmp_path_factory.mktemp("kubelet-image")
    try:
        archive = _image_archive(work)
    except ImageError as exc:
        pytest.fail(f"cannot make the test image: {exc}")
    runtime = new_temp_runtime_dir("sunk-reconciler-kubelet-")
    log = work / "up.log"
    started = time.monotonic()
    with log.open("wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "local", "up", "--kubelet", "--nodes", "2",
             "--image-archive", str(archive), "--runtime-dir", str(runtime)],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    stack = LocalStack.open(runtime) if (runtime / "state.json").exists() else None
    try:
        _wait_ready(up, log)
        up_seconds = time.monotonic() - started
        stack_timings["kubelet cluster: `local up --kubelet` to 2 Nodes Ready"] = up_seconds
        memory = [line for line in log.read_text().splitlines() if "memory:" in line]
        figures["kubelet cluster memory"] = memory[0].split("memory: ", 1)[1] if memory else "?"
        stack = LocalStack.open(runtime)
        kubelets = stack.kubelets
        assert kubelets is not None
        yield Cluster(runtime, stack.kube_paths.kubeconfig, kubelets.network.name, up_seconds)
    finally:
        _down_leaves_nothing(runtime, up, log, stack)


def _wait_ready(up: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + UP_TIMEOUT
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "local: ready in" in text:
            return
        if up.poll() is not None:
            pytest.fail(f"`local up --kubelet` exited {up.returncode}:\n{text}")
        time.sleep(0.5)
    pytest.fail(f"`local up --kubelet` not ready after {UP_TIMEOUT} s:\n{log.read_text()}")


def _down_leaves_nothing(runtime: Path, up: subprocess.Popen[bytes], log: Path,
                         stack: LocalStack | None) -> None:  # fmt: skip
    stack = stack or (LocalStack.open(runtime) if (runtime / "state.json").exists() else None)
    kubelets = stack.kubelets if stack else None
    tasks = [i for n in (kubelets.nodes if kubelets else []) for i in _task_ids(n.base)]
    pids = recorded_pids(stack) if stack else []
    down = subprocess.run([sys.executable, "-m", "reconciler", "local", "down", "--runtime-dir",
                           str(runtime)], capture_output=True, text=True, timeout=120)  # fmt: skip
    try:
        up.wait(timeout=60)
    except subprocess.TimeoutExpired:
        up.send_signal(signal.SIGKILL)
        up.wait()
    left = leftover_processes(stack, pids) if stack else []
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    mounts = mounts_under(runtime)
    cgroups = [str(p) for i in tasks for p in CGROUP_ROOT.glob(f"*/k8s.io/{i}")]
    text = log.read_text(errors="replace")
    assert down.returncode == 0, down.stdout + down.stderr
    assert up.returncode == 0, f"`local up --kubelet` exited {up.returncode}:\n{text}"
    assert not left, "processes left after down: " + "; ".join(left)
    assert not kubelets or kubelets.network.name not in namespaces, namespaces
    assert not kubelets or not kubelets.network.etc.exists(), kubelets.network.etc
    assert not mounts, f"mounts left after down: {mounts}"
    assert not cgroups, f"cgroups left after down: {cgroups}"
    shutil.rmtree(runtime, ignore_errors=True)


def _task_ids(node_dir: Path) -> list[str]:
    tasks = node_dir / "containerd" / "state" / "io.containerd.runtime.v2.task" / "k8s.io"
    return [p.name for p in tasks.iterdir()] if tasks.is_dir() else []


def _pod(name: str, node: str, command: list[str], **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": IMAGE, "imagePullPolicy": "Never", "command": command}
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": spec.pop("labels", {})},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "containers": [container],
                 "terminationGracePeriodSeconds": 1, **spec},
    }  # fmt: skip


@pytest.fixture(scope="module")
def pods(cluster: Cluster) -> Cluster:
    """A server Pod on node-2 behind a headless Service and a ClusterIP one; a client Pod on
    node-1. Both Ready (the server by its liveness and readiness probes)."""
    probe = {"tcpSocket": {"port": 8080}, "periodSeconds": 2, "failureThreshold": 2}
    server = _pod("server", "node-2", ["perl", "-e", SERVER], hostname="server",
                  subdomain="peers", labels={"app": "peer"},
                  container={"livenessProbe": probe, "readinessProbe": probe})  # fmt: skip
    client = _pod("client", "node-1", ["sleep", "infinity"], container={
        "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 2}})  # fmt: skip
    services = [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "peers", "namespace": NAMESPACE},
         "spec": {"clusterIP": "None", "selector": {"app": "peer"}, "ports": [{"port": 8080}]}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "web", "namespace": NAMESPACE},
         "spec": {"selector": {"app": "peer"}, "ports": [{"port": 80, "targetPort": 8080}]}},
    ]  # fmt: skip
    manifest = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        *services, server, client]}  # fmt: skip
    subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "apply", "-f", "-"],
        input=json.dumps(manifest), text=True, check=True, capture_output=True,
    )  # fmt: skip
    cluster.kubectl("wait", "-n", NAMESPACE, "--for=condition=Ready", "pod/server", "pod/client",
                    "--timeout=120s", timeout=130)  # fmt: skip
    return cluster


def test_two_nodes_are_ready_on_containerd(cluster: Cluster) -> None:
    nodes = cluster.get("nodes", namespace=None)["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == ["node-1", "node-2"]
    for node in nodes:
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"] == "containerd://1.6.20"
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True", ready


def test_pods_run_on_their_nodes_and_pass_their_probes(pods: Cluster) -> None:
    for name, node in (("server", "node-2"), ("client", "node-1")):
        pod = pods.get("pod", name)
        assert pod["spec"]["nodeName"] == node  # placed by kube-scheduler
        assert pod["status"]["podIP"].startswith("10.214.")
        status = pod["status"]["containerStatuses"][0]
        assert status["ready"] and status["restartCount"] == 0


def test_a_pod_reaches_a_pod_on_the_other_node_by_its_headless_service_name(pods: Cluster) -> None:
    name = f"server.peers.{NAMESPACE}.svc.cluster.local"
    answer = pods.kubectl("exec", "-n", NAMESPACE, "client", "--", "bash", "-c",
                          f"exec 3<>/dev/tcp/{name}/8080 && cat <&3")  # fmt: skip
    assert answer.strip() == "server"


def test_a_pod_reaches_a_cluster_ip_service_through_kube_proxy(pods: Cluster) -> None:
    answer = pods.kubectl("exec", "-n", NAMESPACE, "client", "--", "bash", "-c",
                          "exec 3<>/dev/tcp/web/80 && cat <&3")  # fmt: skip
    assert answer.strip() == "server"


def test_a_tool_in_the_namespace_reaches_a_service_by_its_name(pods: Cluster) -> None:
    """`ip netns exec` resolves with the cluster DNS (how `reconciler apply` can reach
    slurmrestd's Service)."""
    done = subprocess.run(
        ["ip", "netns", "exec", pods.netns, "bash", "-c",
         f"exec 3<>/dev/tcp/web.{NAMESPACE}.svc.cluster.local/80 && cat <&3"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.stdout.strip() == "server", done.stderr


def test_logs_show_what_the_container_printed(pods: Cluster) -> None:
    assert "listening as server" in pods.kubectl("logs", "-n", NAMESPACE, "server")


def test_a_killed_container_is_restarted_by_its_kubelet(pods: Cluster) -> None:
    status = pods.get("pod", "server")["status"]["containerStatuses"][0]
    container_id = status["containerID"].split("://", 1)[1]
    procs = next(CGROUP_ROOT.glob(f"pids/k8s.io/{container_id}/cgroup.procs"))
    for pid in procs.read_text().split():
        os.kill(int(pid), signal.SIGKILL)

    def restarted() -> bool:
        status = pods.get("pod", "server")["status"]["containerStatuses"][0]
        return status["restartCount"] == 1 and status["ready"]

    wait_for(restarted, 60, "the server container restarted once and Ready again")
    assert "listening as server" in pods.kubectl("logs", "-n", NAMESPACE, "server")


def test_a_claim_is_bound_to_a_volume_of_the_stack(cluster: Cluster) -> None:
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "scratch", "namespace": NAMESPACE},
             "spec": {"accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "1Gi"}}}}  # fmt: skip
    subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "apply", "-f", "-"],
        input=json.dumps(claim), text=True, check=True, capture_output=True,
    )  # fmt: skip
    wait_for(lambda: cluster.get("pvc", "scratch")["status"].get("phase") == "Bound", 30,
             "the claim to be bound")  # fmt: skip
