"""The daemon's look at compute.topology: it asks for a convergence when the Nodes' labels call
for another topology.conf than the ConfigMap holds, once per text, and never without
compute.topology or before the ConfigMap exists."""

from __future__ import annotations

from typing import Any, cast

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.kube_wire import ObjectList
from reconciler.compile.topology import render_topology
from reconciler.compile.topology_places import TopologyInputs
from reconciler.compile.topology_spec import TopologySet, TopologySpec
from reconciler.daemon.topology_watch import TopologyWatch

RACK = "example.com/nvlink-domain"
SPEC = TopologySpec(plugin="block", block_label=RACK, block_sizes=(1,))
NODES = ["slurm-cpu-0", "slurm-cpu-1"]


class Cluster:
    """What the watch reads: the slurm.conf ConfigMap, slurmd Pods and Nodes."""

    def __init__(self) -> None:
        self.racks = {"n0": "a", "n1": "b"}
        self.topology_conf: str | None = None

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> Any:
        assert (kind, name, namespace) == ("ConfigMap", "slurm-slurm-conf", "slurm")
        if self.topology_conf is None:
            return None
        return {"metadata": {"annotations": {wk.ANNOTATION_SLURM_NODES: "slurm-cpu-[0-1]"}},
                "data": {"topology.conf": self.topology_conf}}  # fmt: skip

    def list(self, api_version: str, kind: str, namespace: str = "", **_: Any) -> ObjectList:
        if kind == "Pod":
            pods = [{"metadata": {"name": f"slurm-cpu-{i}"}, "spec": {"nodeName": f"n{i}"}}
                    for i in range(2)]  # fmt: skip
            return ObjectList(tuple(pods), "1")
        nodes = [{"metadata": {"name": n, "labels": {RACK: r, "other": "x"}}}
                 for n, r in self.racks.items()]  # fmt: skip
        return ObjectList(tuple(nodes), "1")

    def rendered(self) -> str:
        labels = {n: {RACK: r} for n, r in self.racks.items()}
        inputs = TopologyInputs(labels, {"slurm-cpu-0": "n0", "slurm-cpu-1": "n1"})
        return render_topology(SPEC, NODES, inputs).text


def test_a_label_change_asks_for_one_convergence_per_text() -> None:
    cluster = Cluster()
    watch = TopologyWatch(cast(Kube, cluster))
    assert not watch.stale()  # no compute.topology followed yet
    watch.follow(TopologySet((SPEC,)), "slurm", "slurm")
    assert not watch.stale()  # no ConfigMap yet: the convergence under way writes it
    cluster.topology_conf = cluster.rendered()
    assert not watch.stale()
    cluster.racks["n1"] = "a"
    assert watch.stale()
    assert not watch.stale()  # asked once; a failed convergence is retried by the resync
    cluster.topology_conf = cluster.rendered()  # converged
    assert not watch.stale()
    cluster.racks["n1"] = "b"
    assert watch.stale()
    watch.follow(None, "slurm", "slurm")  # compute.topology removed from the repo
    assert not watch.stale()
