"""Which Slurm nodes are ours: those our slurm.conf declares, running and FUTURE.

Only nodes of ours are ever drained, retired or restarted for; declaring other ones changes
the controller's NodeName lines. The desired side is the compiled nodes. The live side is
recorded on the slurm.conf ConfigMap we render (ANNOTATION_SLURM_NODES), never read from the
text: a `# Nodes:` comment written in extraConfig once passed for ours and hid our nodes, so
removing a definition deleted its Pods without draining them.

A cluster applied by an earlier version has no record yet: its slurm.conf is read instead,
from the last `# Nodes:` comment, which is always ours (extraConfig is rendered before it, and
after it come only NodeName, NodeSet and PartitionName lines). The next apply records it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import hostlist

from reconciler.compile.desired import DesiredState
from reconciler.compile.manifests import slurm_conf_map_name
from reconciler.plan.live import LiveState
from reconciler.plan.model import KUBERNETES, SLURM, SLURM_CONFIG, Change, ObjectRef, Plan
from reconciler.wellknown import ANNOTATION_SLURM_NODES

NODES_SECTION = "# Nodes:"


def desired_nodes(state: DesiredState) -> frozenset[str]:
    return frozenset(n.name for n in (*state.slurm_nodes, *state.spare_nodes))


def live_nodes(state: DesiredState, live: LiveState) -> frozenset[str]:
    ref = ObjectRef(KUBERNETES, "ConfigMap", state.namespace, slurm_conf_map_name(state.release))
    recorded = recorded_nodes(live.kube_objects.get(ref))
    return recorded if recorded is not None else legacy_nodes(live.slurm_conf or "")


def recorded_nodes(conf_map: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The nodes recorded on a slurm.conf ConfigMap; None when it has no (readable) record."""
    annotations = ((conf_map or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION_SLURM_NODES)
    if not isinstance(text, str):
        return None
    try:
        return frozenset(hostlist.expand_hostlist(text)) if text else frozenset()
    except hostlist.BadHostlist:  # edited by hand: the text is the next best witness
        return None


def legacy_nodes(conf: str) -> frozenset[str]:
    """The nodes declared in our section of a slurm.conf rendered before the record."""
    lines = conf.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(NODES_SECTION)]
    names: list[str] = []
    for line in lines[starts[-1] + 1 :] if starts else []:
        if not line.strip():
            break
        if line.startswith("NodeName="):
            names += hostlist.expand_hostlist(line.split()[0].removeprefix("NodeName="))
    return frozenset(names)


def nodes_joining(plan: Plan) -> frozenset[str]:
    """Nodes this plan declares that slurmctld did not know: from the slurm.conf ConfigMap's
    record before and after (a saved plan carries both), else from the two texts."""
    conf = _change(plan, ObjectRef(SLURM, SLURM_CONFIG, "", "slurm.conf"))
    if conf is None or conf.before is None or conf.after is None:
        return frozenset()
    ref = ObjectRef(KUBERNETES, "ConfigMap", plan.namespace, slurm_conf_map_name(plan.release))
    conf_map = _change(plan, ref)
    after = recorded_nodes(conf_map.desired) if conf_map is not None else None
    before = recorded_nodes(conf_map.before) if conf_map is not None else None
    if after is None:
        after = legacy_nodes(conf.after)
    if before is None:
        before = legacy_nodes(conf.before)
    return after - before


def _change(plan: Plan, ref: ObjectRef) -> Change | None:
    return next((c for c in plan.changes if c.ref == ref), None)
