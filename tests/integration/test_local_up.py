"""`reconciler local up | status | down` end to end, as a user runs them: the fixture repo's
slurmd Pods Running on Ready Nodes, their Slurm nodes IDLE, and nothing left after `down`."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.adapters.kube import Kube
from reconciler.local.ports import listening_ports
from reconciler.local.stack import LocalStack, new_temp_runtime_dir
from tests.integration.conftest import require_kube_binaries, require_slurm_binaries

REPO = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"
SLURM_NODES = ["slurm-cpu-0", "slurm-gpu-small-0", "slurm-gpu-small-1"]


def cli(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


@pytest.fixture(scope="module")
def local_up() -> Iterator[tuple[Path, subprocess.Popen[str], float]]:
    require_kube_binaries()
    require_slurm_binaries()
    runtime = new_temp_runtime_dir("sunk-reconciler-up-")
    started = time.monotonic()
    up = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "local", "up", str(REPO), "--runtime-dir",
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
    pids, ports = stack.recorded_pids(), stack.recorded_ports()
    # As the README has users do: SLURM_CONF exported in the shell that runs `down`.
    exported = {**os.environ, "SLURM_CONF": str(stack.slurm_paths.slurm_conf)}
    down = cli("local", "down", "--runtime-dir", str(runtime), env=exported)
    assert down.returncode == 0, down.stderr
    assert up.wait(timeout=60) == 0
    assert stack.leftover_processes(pids) == []
    assert not ports & listening_ports()
