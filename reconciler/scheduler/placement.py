"""Where a Pod may go, as the cache (state.py) and the API server have the cluster now: the
Slurm nodes its job must exclude, and whether the Node Slurm chose still suits it at bind time.
The rules themselves are pure (kuberules: node_fit, pod_rules, pod_affinity_spread); this reads
their inputs.
"""

from __future__ import annotations

from reconciler.kuberules.node_fit import NodeFacts, node_fit
from reconciler.kuberules.pod_affinity_spread import PlacedPod, excluded_by_placed_rules
from reconciler.kuberules.pod_affinity_spread import excluded_nodes as topology_excluded
from reconciler.kuberules.pod_rules import (
    needs_placed_pods,
    selector_queries,
    topology_problems,
    unlabelled_keys,
)
from reconciler.objects import Obj
from reconciler.scheduler.placed_pods import PlacedPods
from reconciler.scheduler.state import SchedulerState


class Placement:
    def __init__(self, state: SchedulerState, placed: PlacedPods) -> None:
        self._state = state
        self.placed = placed

    def excluded_nodes(self, pod: Obj) -> list[str]:
        """Slurm nodes on Kubernetes Nodes the Pod's node affinity/selector rules out, whose
        NoSchedule/NoExecute taints (a cordon included) it does not tolerate, or that its pod
        (anti-)affinity and spread rules rule out: exclusions, never a required pool."""
        placed, labels, facts = self._state.nodes()
        ruled_out = {
            slurm
            for slurm, node in placed.items()
            if node_fit(pod, facts.get(node) or NodeFacts(node))
        }
        candidates = {node for slurm, node in placed.items() if slurm not in ruled_out}
        kube_nodes = self._pod_rules_exclude(pod, labels, candidates, set(placed.values()))
        ruled_out |= {slurm for slurm, node in placed.items() if node in kube_nodes}
        return sorted(ruled_out)

    def _pod_rules_exclude(
        self, pod: Obj, labels: dict[str, dict[str, str]], candidates: set[str], hosts: set[str]
    ) -> set[str]:
        """Kubernetes Nodes ruled out by the Pod's own pod (anti-)affinity and spread rules,
        and by the required anti-affinity of the Pods we bound (the symmetric check). Spread
        domains come from `hosts`, the Nodes hosting Slurm nodes: our Pods run nowhere else."""
        state = self._state
        with state.lock:
            ruled = [
                p for uid in state.rule_pods
                if (p := state.pods.get(uid)) is not None and p["spec"].get("nodeName")
            ]  # fmt: skip
        excluded = excluded_by_placed_rules(pod, ruled, labels, candidates) if ruled else set()
        if needs_placed_pods(pod):
            placed = self._placed_pods(pod)
            excluded |= topology_excluded(pod, placed, labels, candidates, hosts)
        return excluded

    def topology_refusal(self, pod: Obj) -> str | None:
        """What in the Pod's pod (anti-)affinity and spread rules cannot be honoured here."""
        problems = topology_problems(pod)
        if not problems and needs_placed_pods(pod):
            with self._state.lock:
                candidates = set(self._state.kube_node_of.values())
                labels = dict(self._state.node_labels)
            problems = unlabelled_keys(pod, labels, candidates)
        return "; ".join(str(p) for p in problems) or None

    def _placed_pods(self, pod: Obj) -> list[PlacedPod]:
        """Bound, unfinished Pods the rules can see, of any scheduler (not our cache: it holds
        only our own Pods), from the namespaces' informers: no request per rule."""
        namespaces = [namespace for namespace, _ in selector_queries(pod)]
        return self.placed.of(namespaces, own=pod["metadata"]["uid"])

    def topology_allows(self, pod: Obj, node: str) -> bool:
        if not self._state.rule_pods and not needs_placed_pods(pod):
            return True
        with self._state.lock:
            labels = dict(self._state.node_labels)
            candidates = set(self._state.kube_node_of.values())
        return node not in self._pod_rules_exclude(pod, labels, candidates, candidates)
