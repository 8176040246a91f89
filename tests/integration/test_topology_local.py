"""compute.topology on the local stack (real slurmctld 24.11 with topology/block, a real
kube-apiserver): blocks come from the labels of the Nodes the slurmd Pods run on, `plan` shows
topology.conf like slurm.conf, a 2-node `--segment=2` job lands inside one block, and a label
changed later reaches slurmctld through `reconciler run` alone.

The racks are laid across the node names (rack-a: slurm-cpu-0 and -2), so Slurm's plain
best fit (slurm-cpu-[0-1]) would cross them: without topology.conf the placement test fails.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import hostlist
import pytest
import yaml

from reconciler.adapters.kube import Kube
from reconciler.compile.topology_places import UNPLACED
from reconciler.compile.topology_yaml import TOPOLOGY_YAML
from reconciler.local.ports import free_port
from reconciler.local.slurm.cluster import SlurmCluster
from reconciler.local.slurm.install import slurm_install
from reconciler.local.stack_record import new_temp_runtime_dir
from reconciler.slurm_release import maybe_release
from tests.integration.conftest import require_kube_binaries
from tests.integration.helpers import stop_cleanly, wait_for
from tests.integration.local_up import RepoStack, local_up, reconciler_cli

ROOT = Path(__file__).resolve().parents[2]
RACK = "example.com/nvlink-domain"  # a label an operator gives Nodes, not one of ours
CPUS = [f"slurm-cpu-{i}" for i in range(4)]
TOPOLOGY = f"""compute:
  topology:
    plugin: block
    blockLabel: {RACK}
    blockSizes: [2]
    exclusivePartitions: [all]
  nodes:
    cpu:
      replicas: 4
"""


@dataclass
class Env:
    stack: RepoStack
    admin: Kube

    @property
    def slurm(self) -> SlurmCluster:
        return self.stack.slurm

    def host_of(self, slurm_node: str) -> str:
        pod = self.admin.get("v1", "Pod", slurm_node, "slurm")
        assert pod is not None and pod["spec"].get("nodeName"), f"slurmd Pod {slurm_node}"
        return str(pod["spec"]["nodeName"])

    def label(self, racks: dict[str, str]) -> None:
        """`kubectl label node --overwrite` the Node each Slurm node runs on."""
        for slurm_node, rack in racks.items():
            self.admin.request_json(
                "PATCH", f"/api/v1/nodes/{self.host_of(slurm_node)}",
                body={"metadata": {"labels": {RACK: rack}}},
                content_type="application/merge-patch+json",
            )  # fmt: skip

    def blocks(self) -> dict[str, list[str]]:
        """`scontrol show topology`: block -> its nodes (aggregated blocks left out)."""
        shown = self.slurm.run("scontrol", "show", "topology")
        out = {}
        for line in shown.splitlines():
            fields = dict(t.split("=", 1) for t in line.split() if "=" in t)
            if "BlockName" in fields:
                out[fields["BlockName"]] = hostlist.expand_hostlist(fields["Nodes"])
        return out

    @property
    def topology_name(self) -> str:
        """The file slurmctld reads: topology.yaml from Slurm 25.05 on, else topology.conf."""
        release = maybe_release(slurm_install().version)
        return TOPOLOGY_YAML if release and release.at_least(25, 5) else "topology.conf"

    def topology_file(self) -> str:
        return (self.slurm.paths.etc / self.topology_name).read_text()


def block_nodes(text: str, block: str) -> str | None:
    """The hostlist a rendered topology.conf or topology.yaml gives `block`."""
    if match := re.search(rf"^BlockName={re.escape(block)} Nodes=(\S+)$", text, re.M):
        return match.group(1)
    for entry in (yaml.safe_load(text) if text.lstrip().startswith(("#", "-")) else None) or []:
        for found in (entry.get("block") or {}).get("blocks") or []:
            if found["block"] == block:
                return str(found["nodes"])
    return None


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-topology-"))
    try:
        repo = work / "repo"
        shutil.copytree(ROOT / "fixtures" / "config-repo", repo)
        (repo / "values.d" / "50-topology.yaml").write_text(TOPOLOGY)
        with local_up(repo, work / "up.log", prefix="sunk-reconciler-topology-",
                      timings=stack_timings, label="topology tests") as running:  # fmt: skip
            admin = Kube.from_kubeconfig(running.stack.kube_paths.kubeconfig, field_manager="test")
            yield Env(RepoStack(repo, work, running), admin)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_blocks_from_node_labels_and_a_segment_job_inside_one(env: Env) -> None:
    # `local up` applied before any Pod was bound: every node unplaced, in one block.
    assert set(env.blocks()) == {UNPLACED}
    env.label({"slurm-cpu-0": "rack-a", "slurm-cpu-2": "rack-a",
               "slurm-cpu-1": "rack-b", "slurm-cpu-3": "rack-b"})  # fmt: skip
    plan = env.stack.plan_json()
    changes = {(c["kind"], c["name"]): c for c in plan["changes"]}
    change = changes[("SlurmConfig", env.topology_name)]
    assert change["action"] == "update", plan
    assert block_nodes(change["after"], "rack-a") == "slurm-cpu-[0,2]", change["after"]
    assert ("ConfigMap", "slurm-slurm-conf") in changes  # the file slurmctld reads is in it
    assert not [c for c in plan["changes"] if c["kind"] in ("StatefulSet", "Deployment")]
    env.stack.apply()
    assert block_nodes(env.topology_file(), "rack-b") == "slurm-cpu-[1,3]"
    blocks = env.blocks()
    assert blocks["rack-a"] == ["slurm-cpu-0", "slurm-cpu-2"]
    assert blocks["rack-b"] == ["slurm-cpu-1", "slurm-cpu-3"]
    shown = env.slurm.run("scontrol", "show", "partition", "all")
    assert "ExclusiveTopo=YES" in shown or "Exclusive=TOPO" in shown, shown  # 26.05 renamed it

    jobs = [
        env.slurm.run("sbatch", "--parsable", "-o", "/dev/null", "-p", "all", "-C", "cpu", "-N2",
                      "--segment=2", "--wrap", "sleep 120").strip()
        for _ in range(2)
    ]  # fmt: skip
    try:
        placed = [wait_for(lambda j=j: _running_on(env, j), 30, f"job {j} running") for j in jobs]
    finally:
        env.slurm.run("scancel", *jobs, check=False)
    racks = [{r for r, nodes in blocks.items() if set(job) <= set(nodes)} for job in placed]
    assert all(len(r) == 1 for r in racks), f"jobs on {placed}, blocks {blocks}"
    # ExclusiveTopo: one job per block, so the two fill both racks.
    assert racks[0] != racks[1], f"jobs on {placed}, blocks {blocks}"


def test_a_label_change_reaches_slurmctld_through_the_daemon(
    env: Env, stack_timings: dict[str, float]
) -> None:
    env.label({"slurm-cpu-0": "rack-a", "slurm-cpu-2": "rack-a",
               "slurm-cpu-1": "rack-b", "slurm-cpu-3": "rack-b"})  # fmt: skip
    env.stack.apply()  # the state the first test left, whether or not it ran
    log = env.stack.work / "run.log"
    with log.open("wb") as out:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "run", "--source-dir", str(env.stack.repo),
             "--runtime-dir", str(env.stack.runtime), "--listen", f"127.0.0.1:{free_port()}",
             "--hooks-api-bind-address", "127.0.0.1:0", "--no-scheduler",
             "--workdir", str(env.stack.work / "w"), "--node-sync-interval", "1"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for(lambda: b"converge:" in log.read_bytes(), 60, "the first convergence")
        moved = time.monotonic()
        env.label({"slurm-cpu-0": "rack-b", "slurm-cpu-1": "rack-a"})  # a swap
        wait_for(lambda: env.blocks().get("rack-a") == ["slurm-cpu-1", "slurm-cpu-2"], 60,
                 f"scontrol show topology to follow the labels:\n{log.read_text()}")  # fmt: skip
        stack_timings["topology: Node label changed -> slurmctld's blocks follow"] = (
            time.monotonic() - moved
        )
        assert env.blocks()["rack-b"] == ["slurm-cpu-0", "slurm-cpu-3"]
        assert block_nodes(env.topology_file(), "rack-a") == "slurm-cpu-[1-2]"
        assert f"the Nodes' labels call for another {env.topology_name}" in log.read_text()
    finally:
        stop_cleanly(daemon, log)
    assert env.stack.plan_json()["changes"] == []  # the daemon left nothing to do


def _running_on(env: Env, job: str) -> list[str] | None:
    state, nodes, reason = env.slurm.run("squeue", "-h", "-j", job, "-o", "%T|%N|%r").split("|")
    if state == "RUNNING":
        return hostlist.expand_hostlist(nodes.strip())
    assert state in ("PENDING", "CONFIGURING"), f"job {job}: {state} ({reason.strip()})"
    return None


def test_block_on_slurm_22_05_is_refused_before_slurmctld_starts(tmp_path: Path) -> None:
    """Debian's 22.05 has no topology/block: `local up` (an apply of a new cluster, before
    slurmctld answers) refuses the repo naming the key, instead of a slurmctld that stops."""
    require_kube_binaries()
    if shutil.which("slurmctld", path="/usr/sbin") is None:
        pytest.skip("Debian's Slurm 22.05 is not installed")
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "fixtures" / "config-repo", repo)
    (repo / "values.d" / "50-topology.yaml").write_text(TOPOLOGY)
    runtime = new_temp_runtime_dir("sunk-reconciler-topology-2205-")
    try:
        done = reconciler_cli("local", "up", str(repo), "--slurm", "22.05", "--runtime-dir",
                              str(runtime), timeout=120)  # fmt: skip
    finally:
        reconciler_cli("local", "down", "--runtime-dir", str(runtime), timeout=90)
        shutil.rmtree(runtime, ignore_errors=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "error: values.d/50-topology.yaml:2 (compute.topology): compute.topology.plugin block "
        "needs Slurm 23.11 or later (topology/block); this render targets Slurm 22.05 (the "
        "release slurmctld runs)"
    ) in done.stderr
