"""The daemon's look at compute.topology between convergences: does the topology file, rendered
now from the Nodes' labels and where the slurmd Pods run, differ from the one the slurm.conf
ConfigMap holds? Then the daemon converges, and apply writes it and has slurmctld reread it,
as for any change of slurm.conf. The file is the one the ConfigMap holds (topology.yaml where
the last convergence rendered for Slurm 25.05 or later, topology.conf before).

Level-triggered: what is compared is the file itself, so a label changed while a convergence
ran is seen at the next look. A text asked for once is not asked for again while it stays the
same (a convergence that failed is retried by the resync, not at every look).
"""

from __future__ import annotations

import logging

from reconciler.adapters.kube import Kube
from reconciler.adapters.topology_facts import read_topology_inputs
from reconciler.compile.manifests import slurm_conf_map_name
from reconciler.compile.topology import render_topology_files
from reconciler.compile.topology_spec import TopologySet
from reconciler.compile.topology_yaml import TOPOLOGY_YAML
from reconciler.plan.declared import recorded_nodes

log = logging.getLogger(__name__)


class TopologyWatch:
    def __init__(self, kube: Kube) -> None:
        self._kube = kube
        self._topologies: TopologySet | None = None
        self._where = ("", "")  # namespace, release
        self._asked: str | None = None

    def follow(self, topologies: TopologySet | None, namespace: str, release: str) -> None:
        """What the revision converged last asks for (None: no compute.topology)."""
        self._topologies, self._where = topologies, (namespace, release)

    def stale(self) -> bool:
        """Whether a convergence would change the topology file now."""
        topologies, (namespace, release) = self._topologies, self._where
        if topologies is None:
            return False
        conf_map = self._kube.get("v1", "ConfigMap", slurm_conf_map_name(release), namespace)
        if conf_map is None:  # not applied yet: the convergence under way writes it
            return False
        data = conf_map.get("data") or {}
        # Counted before it is expanded (a user can edit it); unreadable reads as no nodes,
        # which differs from the file and so converges, and apply writes the record again.
        declared = recorded_nodes(conf_map) or frozenset()
        inputs = read_topology_inputs(self._kube, namespace, release, topologies.labels)
        rendered = render_topology_files(topologies, declared, inputs, yaml=TOPOLOGY_YAML in data)
        ((name, want),) = rendered.files.items()
        if want == data.get(name):
            self._asked = None
            return False
        if want == self._asked:
            return False
        self._asked = want
        log.info("topology: the Nodes' labels call for another %s; converging", name)
        return True
