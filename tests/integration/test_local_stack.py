"""The local stack against the real daemons: readiness, status, node growth, clean shutdown."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.errors import LocalStackError
from reconciler.local.ports import can_bind, free_ports, is_accepting
from reconciler.local.processes import PidRecord, Supervisor, is_running, process_start_ticks
from reconciler.local.slurm import cluster as slurm_module
from reconciler.local.slurm.install import slurm_install
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import new_temp_runtime_dir
from tests.integration.endpoints import KubeEndpoints, SlurmEndpoints
from tests.integration.local_stack_ops import (
    leftover_processes,
    listening_ports,
    recorded_pids,
    recorded_ports,
    retire_node,
)
from tests.integration.simple_cluster import DYNAMIC_FEATURE, SimpleCluster, simple_renderer


def wait_for(condition, timeout: float, what: str, interval: float = 0.1) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - started


def run(slurm: SlurmEndpoints, *argv: str) -> str:
    return subprocess.run(
        argv, env=slurm.env, capture_output=True, text=True, check=True, timeout=30
    ).stdout


def sinfo_states(slurm: SlurmEndpoints) -> dict[str, set[str]]:
    """node -> states seen across its partitions ("idle", "alloc", ...)."""
    states: dict[str, set[str]] = {}
    for line in run(slurm, "sinfo", "-h", "-N", "-o", "%N %t").splitlines():
        node, state = line.split()
        states.setdefault(node, set()).add(state)
    return states


def zombie_stepds() -> set[int]:
    zombies = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            comm = stat[stat.find("(") + 1 : stat.rfind(")")]
            if comm.startswith("slurmstepd") and stat.rsplit(")", 1)[1].split()[0] == "Z":
                zombies.add(int(entry.name))
    return zombies


# ---- Kubernetes -------------------------------------------------------------------------


def test_kube_apiserver_readyz_ok(kube: KubeEndpoints) -> None:
    kubeconfig = yaml.safe_load(kube.kubeconfig.read_text())
    ca = kubeconfig["clusters"][0]["cluster"]["certificate-authority"]
    assert kubeconfig["clusters"][0]["cluster"]["server"] == kube.server
    request = urllib.request.Request(
        f"{kube.server}/readyz", headers={"Authorization": f"Bearer {kube.token}"}
    )
    context = ssl.create_default_context(cafile=ca)
    with urllib.request.urlopen(request, context=context, timeout=5) as response:
        assert response.status == 200
        assert response.read() == b"ok"


def test_kube_controllers_work(kube: KubeEndpoints, stack_timings: dict[str, float]) -> None:
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(kube.kubeconfig)))
    assert api.read_namespaced_service_account("default", "default").secrets
    name = f"it-ns-{os.getpid()}"
    api.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    api.create_namespaced_config_map(
        name, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="c"), data={"k": "v"})
    )
    api.delete_namespace(name)

    def namespace_gone() -> bool:
        try:
            api.read_namespace(name)
        except ApiException as exc:
            return exc.status == 404
        return False

    # The namespace controller empties the namespace and removes its finalizer.
    took = wait_for(namespace_gone, 60, f"namespace {name} to be deleted")
    stack_timings["namespace deletion by kube-controller-manager"] = took


def test_kube_token_is_not_in_state_or_logs(local_stack: LocalStack, kube: KubeEndpoints) -> None:
    assert kube.token not in local_stack.state_file.read_text()
    assert kube.token not in repr(kube)
    for log in (local_stack.runtime_dir / "logs").glob("*.log"):
        assert kube.token not in log.read_text(errors="replace"), log


# ---- Slurm ------------------------------------------------------------------------------


def test_slurm_nodes_idle_with_gpus(slurm: SlurmEndpoints) -> None:
    rows = run(slurm, "sinfo", "-h", "-N", "-o", "%N %P %t %G").splitlines()
    seen: dict[str, set[tuple[str, str, str]]] = {}
    for row in rows:
        node, partition, state, gres = row.split()
        seen.setdefault(node, set()).add((partition, state, gres))
    assert sorted(seen) == sorted(slurm.node_names)
    for node in slurm.node_names:
        assert seen[node] == {("debug*", "idle", "gpu:4"), ("high", "idle", "gpu:4")}
    assert slurm.partition == "debug"


def test_slurm_rest_answers_with_jwt(slurm: SlurmEndpoints) -> None:
    token = slurm_module.mint_jwt(slurm.jwt_key, slurm.user)
    request = urllib.request.Request(
        f"{slurm.rest_url}/slurm/{slurm_install().rest_probe_version}/ping",
        headers={"X-SLURM-USER-NAME": slurm.user, "X-SLURM-USER-TOKEN": token},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        body = json.loads(response.read())
    assert response.status == 200
    assert not body["errors"]
    ping = body["pings"][0]
    assert ping.get("ping", ping.get("pinged")) == "UP"  # v0.0.38 / v0.0.40+


def test_status_reports_every_component_healthy(
    local_stack: LocalStack, slurm: SlurmEndpoints, kube: KubeEndpoints
) -> None:
    statuses = {status.name: status for status in local_stack.status()}
    expected = {
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "munged",
        "slurmctld",
        "slurmrestd",
        *(f"slurmd-{node}" for node in slurm.node_names),
    }
    assert expected <= statuses.keys()
    for name in expected:
        status = statuses[name]
        assert status.running and status.healthy and status.pid, status
    for name in expected - {"kube-controller-manager", "munged"}:
        port = statuses[name].port
        assert port is not None and is_accepting(port), statuses[name]


def test_future_node_joins_and_retires(
    local_stack: LocalStack,
    slurm: SlurmEndpoints,
    slurm_spare_nodes: list[str],
    stack_timings: dict[str, float],
) -> None:
    cluster = local_stack.slurm
    assert cluster is not None
    node = slurm_spare_nodes[-1]
    zombies_before = zombie_stepds()
    assert node not in sinfo_states(slurm)

    started = time.monotonic()
    cluster.start_slurmd(node)
    wait_for(lambda: sinfo_states(slurm).get(node) == {"idle"}, 30, f"{node} IDLE")
    joined = time.monotonic() - started
    stack_timings[f"FUTURE node {node}: slurmd start to IDLE in sinfo"] = joined
    print(f"{node} joined in {joined:.3f} s")

    # It takes jobs, with its fake GPUs.
    out = slurm.runtime_dir / f"gres-{node}.out"
    job_id = run(
        slurm, "sbatch", "--parsable", "-p", slurm.partition, "-w", node, "--gres=gpu:2",
        "-D", str(slurm.runtime_dir), "-o", str(out), "--wrap", "echo CUDA=$CUDA_VISIBLE_DEVICES",
    ).strip()  # fmt: skip
    wait_for(lambda: not run(slurm, "squeue", "-h", "-j", job_id), 30, f"job {job_id} to end")
    assert out.read_text().strip() == "CUDA=0,1"

    cluster.stop_slurmd(node)
    started = time.monotonic()
    retire_node(cluster, node)
    wait_for(lambda: node not in sinfo_states(slurm), 30, f"{node} to leave sinfo")
    retired = time.monotonic() - started
    stack_timings[f"FUTURE node {node}: state=FUTURE to gone from sinfo"] = retired
    print(f"{node} retired in {retired:.3f} s")

    # ...and a later slurmd start brings it back, still without a slurmctld restart.
    cluster.start_slurmd(node)
    wait_for(lambda: sinfo_states(slurm).get(node) == {"idle"}, 30, f"{node} IDLE again")
    cluster.stop_slurmd(node)
    retire_node(cluster, node)
    wait_for(lambda: node not in sinfo_states(slurm), 30, f"{node} to leave sinfo again")

    # Finished job steps are reaped (this process is their subreaper), not left as zombies.
    wait_for(lambda: not (zombie_stepds() - zombies_before), 5, "slurmstepd zombies reaped")


@pytest.mark.skipif(
    slurm_install().release == "22.05", reason="22.05 registers one dynamic node per host"
)
def test_dynamic_nodes_join_and_leave_without_a_slurmctld_restart(
    local_stack: LocalStack, slurm: SlurmEndpoints, stack_timings: dict[str, float]
) -> None:
    """The evaluation of dynamic nodes against FUTURE pools (docs/slurm-versions.md): two
    `slurmd -Z` on one host join a NodeSet partition slurm.conf names no node of, take jobs,
    and leave through `DELETE /node`, all without restarting slurmctld."""
    cluster = local_stack.slurm
    assert cluster is not None
    controller = local_stack.supervisor.running("slurmctld")
    api = connect(slurm.rest_url, MintedTokens(slurm.jwt_key, slurm.user))
    names = [f"dyn-{i}" for i in range(2)]
    started = time.monotonic()
    for name, port in zip(names, free_ports(2), strict=True):
        conf = f"CPUs=2 RealMemory=1000 Feature={DYNAMIC_FEATURE} Port={port}"
        cluster.start_slurmd(name, wait=False, dynamic_conf=conf)
    try:
        for name in names:
            wait_for(lambda n=name: sinfo_states(slurm).get(n) == {"idle"}, 30, f"{name} IDLE")
        joined = time.monotonic() - started
        stack_timings["2 dynamic nodes: slurmd -Z start to IDLE in sinfo"] = joined
        job_id = run(
            slurm, "sbatch", "--parsable", "-p", DYNAMIC_FEATURE, "-w", names[1],
            "-D", str(slurm.runtime_dir), "-o", "/dev/null", "--wrap", "true",
        ).strip()  # fmt: skip
        wait_for(lambda: not run(slurm, "squeue", "-h", "-j", job_id), 30, f"job {job_id}")
        job = api.job(int(job_id))
        assert job is not None and (job.state, job.nodes) == ("COMPLETED", names[1])
    finally:
        for name in names:
            cluster.stop_slurmd(name)
            api.delete_node(name)
    wait_for(lambda: not set(names) & set(sinfo_states(slurm)), 30, "dynamic nodes gone")
    after = local_stack.supervisor.running("slurmctld")
    assert controller is not None and after is not None and after.pid == controller.pid
    api.close()


def test_cancel_right_after_running_leaves_no_job_process(
    local_stack: LocalStack, slurm: SlurmEndpoints
) -> None:
    # The launch/cancel race that proctrack/linuxproc loses (the batch shell dies first and its
    # `sleep` escapes the process tree); proctrack/pgid kills the whole group.
    marker = f"SLURM_CONF={slurm.slurm_conf}".encode()

    def job_processes() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and is_running(int(entry.name)):
                try:
                    environ = (entry / "environ").read_bytes().split(b"\0")
                    comm = (entry / "comm").read_text().strip()
                except OSError:
                    continue
                if marker in environ and comm == "sleep":
                    found.append(int(entry.name))
        return found

    for _ in range(4):
        job_id = run(
            slurm, "sbatch", "--parsable", "-D", str(slurm.runtime_dir), "-o", "/dev/null",
            "--wrap", "sleep 300",
        ).strip()  # fmt: skip
        wait_for(
            lambda job_id=job_id: (
                run(slurm, "squeue", "-h", "-j", job_id, "-o", "%T").strip() == "RUNNING"
            ),
            30,
            f"job {job_id} RUNNING",
            interval=0.01,
        )
        run(slurm, "scancel", job_id)
    wait_for(lambda: not run(slurm, "squeue", "-h"), 30, "all jobs gone")
    wait_for(lambda: not job_processes(), 10, "job processes gone")


# ---- a second stack, brought down from another process -----------------------------------

UP_SCRIPT = """
import json, sys
from pathlib import Path
from tests.integration.simple_cluster import DYNAMIC_FEATURE, SimpleCluster, simple_renderer
from reconciler.local.stack import LocalStack
from tests.integration.local_stack_ops import wait_until_down

stack = LocalStack(Path(sys.argv[1]), cluster_name="it2")
cluster = SimpleCluster(nodes=2, spares=1)
timings = stack.up(
    cluster.all_names(), simple_renderer(cluster), start_nodes=cluster.node_names(),
    accounting=True,
)
print(json.dumps(timings), flush=True)
wait_until_down(stack)
"""


def read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if selector.select(timeout):
            return proc.stdout.readline()
    return ""


@pytest.mark.usefixtures("full_stack_binaries")
def test_down_from_another_process_leaves_no_process_or_port(
    stack_timings: dict[str, float],
) -> None:
    runtime = new_temp_runtime_dir("sunk-reconciler-it-down-")
    proc = subprocess.Popen(
        [sys.executable, "-c", UP_SCRIPT, str(runtime)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = read_line(proc, 180)
        if not line:
            proc.kill()
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"`up` in a subprocess did not get ready:\n{err[-3000:]}")
        timings = json.loads(line)
        stack_timings["second stack: kube up"] = timings["kube"]["total"]
        stack_timings["second stack: slurm up with MariaDB + slurmdbd"] = timings["slurm"]["total"]

        other = LocalStack.open(runtime)
        statuses = {s.name: s for s in other.status()}
        assert {"etcd", "kube-apiserver", "mariadb", "slurmdbd", "slurmctld"} <= statuses.keys()
        assert all(s.running and s.healthy for s in statuses.values()), statuses
        pids = recorded_pids(other)
        ports = recorded_ports(other)
        assert {s.port for s in statuses.values() if s.port} <= listening_ports()

        stopped = other.down()
        assert set(stopped) == set(statuses)
        assert proc.wait(timeout=30) == 0
        assert leftover_processes(other, pids) == []
        assert not (listening_ports() & ports)
        assert not any(s.running for s in other.status())
    finally:
        if proc.poll() is None:
            LocalStack(runtime).down()
            proc.kill()
        proc.communicate(timeout=30)
        shutil.rmtree(runtime, ignore_errors=True)


FOREGROUND_SCRIPT = """
import json, os, signal, sys
from pathlib import Path
from tests.integration.simple_cluster import DYNAMIC_FEATURE, SimpleCluster, simple_renderer
from reconciler.local.stack import LocalStack
from tests.integration.local_stack_ops import wait_until_down

def on_term(signum, frame):
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, on_term)
stack = LocalStack(Path(sys.argv[1]), cluster_name="it3")
cluster = SimpleCluster(nodes=2, spares=0)
timings = stack.up(cluster.all_names(), simple_renderer(cluster), kube=False)
stack.foreground.remember(os.getpid())
print(json.dumps(timings), flush=True)
try:
    wait_until_down(stack)
except KeyboardInterrupt:
    pass
"""


def test_down_asks_the_foreground_up_process_to_stop_its_stack() -> None:
    if slurm_module.missing_binaries(accounting=False):
        pytest.skip("missing Slurm binaries")
    runtime = new_temp_runtime_dir("sunk-reconciler-it-fg-")
    proc = subprocess.Popen(
        [sys.executable, "-c", FOREGROUND_SCRIPT, str(runtime)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert read_line(proc, 60), proc.stderr.read() if proc.stderr else ""
        other = LocalStack.open(runtime)
        running = {s.name for s in other.status() if s.running}
        pids = recorded_pids(other)
        stopped = other.foreground.stop()
        assert stopped[0] == f"up (pid {proc.pid})"
        assert set(stopped[1:]) == running
        assert proc.wait(timeout=30) == 0
        assert other.down() == []
        assert leftover_processes(other, pids) == []
    finally:
        if proc.poll() is None:
            LocalStack(runtime).down()
            proc.kill()
        proc.communicate(timeout=30)
        shutil.rmtree(runtime, ignore_errors=True)


# ---- the supervisor and ports, with plain commands ----------------------------------------


def test_failed_start_names_the_daemon_and_shows_its_log(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path / "pids", tmp_path / "logs")
    supervisor.start("broken", ["sh", "-c", "echo 'bad key on line 3' >&2; exit 3"])
    with pytest.raises(LocalStackError) as error:
        supervisor.wait_ready("broken", lambda: False, timeout=10)
    text = str(error.value)
    assert "broken exited before it was ready" in text
    assert "bad key on line 3" in text
    supervisor.stop("broken")
    assert supervisor.names() == []


def test_slow_start_times_out_with_the_daemon_named(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path / "pids", tmp_path / "logs")
    supervisor.start("sleepy", ["sleep", "60"])
    with pytest.raises(LocalStackError, match="sleepy not ready after 0 s"):
        supervisor.wait_ready("sleepy", lambda: False, timeout=0.2)
    assert supervisor.stop("sleepy")


def test_another_process_stops_a_daemon_by_its_pidfile(tmp_path: Path) -> None:
    starter = Supervisor(tmp_path / "pids", tmp_path / "logs")
    record = starter.start("sleeper", ["sleep", "60"])
    # A fresh Supervisor knows nothing but the pidfile, as `down` in another process.
    assert Supervisor(tmp_path / "pids", tmp_path / "logs").stop("sleeper", grace=5)
    assert starter.reap_exited() == ["sleeper"]
    assert not Path(f"/proc/{record.pid}").exists()


def test_stopping_a_container_s_first_process_ends_what_it_started(tmp_path: Path) -> None:
    # A supervisor that traps SIGTERM and is killed before it stops its service (grace 0, as
    # `kubectl delete pod --grace-period=0`): in a container the service dies with it.
    supervisor = Supervisor(tmp_path / "pids", tmp_path / "logs")
    script = f"trap '' TERM; sleep 300 & echo $! > {tmp_path / 'child'}; wait"
    supervisor.start("svscan", ["sh", "-c", script])
    # The file exists before `echo` has written to it: wait for the PID itself.
    pid_file = tmp_path / "child"
    supervisor.wait_ready(
        "svscan", lambda: pid_file.exists() and pid_file.read_text().strip() != "", timeout=10
    )
    child = int(pid_file.read_text())
    assert supervisor.stop("svscan", grace=0, whole_tree=True)
    wait_for(lambda: not is_running(child), 5, "the service to end with its supervisor")


def test_a_recycled_pid_is_never_killed(tmp_path: Path) -> None:
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        supervisor = Supervisor(tmp_path / "pids", tmp_path / "logs")
        (tmp_path / "pids").mkdir()
        # The pidfile says etcd, but that PID is now someone else's `sleep`.
        ticks = process_start_ticks(bystander.pid) or 0
        supervisor._write(PidRecord("etcd", bystander.pid, "/usr/bin/etcd", ticks))
        assert supervisor.running("etcd") is None
        assert not supervisor.stop("etcd", grace=1)
        assert is_running(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(20)
    assert len(set(ports)) == 20
    assert all(can_bind(port) for port in ports)


def test_slurmctld_config_error_is_reported_and_cleaned_up() -> None:
    require = slurm_module.missing_binaries(accounting=False)
    if require:
        pytest.skip("missing Slurm binaries: " + ", ".join(require))
    runtime = new_temp_runtime_dir("sunk-reconciler-it-bad-")
    stack = LocalStack(runtime)
    cluster = SimpleCluster(nodes=1, spares=0)

    def broken(site: slurm_module.SlurmSite) -> tuple[str, str]:
        conf, gres = simple_renderer(cluster)(site)
        return conf + "PartitionName=oops Nodes=no-such-node\n", gres

    try:
        with pytest.raises(LocalStackError) as error:
            stack.up(cluster.all_names(), broken, kube=False)
        assert "slurmctld exited before it was ready" in str(error.value)
        assert "no-such-node" in str(error.value)
        assert leftover_processes(stack) == []
    finally:
        stack.down()
        shutil.rmtree(runtime, ignore_errors=True)
