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

from reconciler import hostlists
from reconciler.compile.desired import DesiredState
from reconciler.compile.manifests import slurm_conf_map_name
from reconciler.errors import ReconcilerError
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
    """The nodes recorded on a slurm.conf ConfigMap; None when it has no (readable) record.

    A record past the hostlist cap is refused: compile never declares more nodes than that
    (config/limits.MAX_NODES), so it was edited, and a plan that drains and retires nodes
    must not guess which are ours."""
    metadata = (conf_map or {}).get("metadata") or {}
    text = (metadata.get("annotations") or {}).get(ANNOTATION_SLURM_NODES)
    if not isinstance(text, str):
        return None
    try:
        return frozenset(hostlists.expand(text)) if text else frozenset()
    except hostlist.BadHostlist:  # edited by hand: the text is the next best witness
        return None
    except hostlists.HostlistTooLarge as error:
        name = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}".strip("/")
        raise ReconcilerError(
            f"ConfigMap {name or '<release>-slurm-conf'}: annotation {ANNOTATION_SLURM_NODES} "
            f"{error}",
            hint="we write it, and never with more nodes than that: it was edited. Remove it "
            f"(kubectl annotate configmap ... {ANNOTATION_SLURM_NODES}-) and the next apply "
            "records it again",
        ) from None


def legacy_nodes(conf: str) -> frozenset[str]:
    """The nodes declared in our section of a slurm.conf rendered before the record, capped
    in all as any hostlist is (the ConfigMap may have been edited)."""
    lines = conf.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(NODES_SECTION)]
    names: list[str] = []
    for line in lines[starts[-1] + 1 :] if starts else []:
        if not line.strip():
            break
        if line.startswith("NodeName="):
            names += _legacy_line(line, hostlists.MAX_NAMES - len(names))
    return frozenset(names)


def _legacy_line(line: str, left: int) -> list[str]:
    try:
        return hostlists.expand_checked(line.split()[0].removeprefix("NodeName="), left)
    except hostlists.HostlistRefused as error:
        raise ReconcilerError(
            f"the live slurm.conf (recorded before {ANNOTATION_SLURM_NODES}): a NodeName= "
            f"line's hostlist {error} ({hostlists.MAX_NAMES:,} for all its lines)",
            hint="it was edited: restore the NodeName= lines of our `# Nodes:` section",
        ) from None


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
