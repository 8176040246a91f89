"""topology.conf in a plan: a Slurm config file like slurm.conf, shown whole when it changes,
and deleted when compute.topology goes away (pure)."""

from __future__ import annotations

from reconciler.plan.fields import field_changes
from reconciler.plan.model import SLURM, SLURM_CONFIG, Action, Change, ObjectRef

TOPOLOGY_CONF = "topology.conf"
REF = ObjectRef(SLURM, SLURM_CONFIG, "", TOPOLOGY_CONF)


def topology_changes(want: str | None, have: str | None) -> list[Change]:
    """Nothing when neither has one or both hold the same text."""
    if want is None and have is None:
        return []
    if want is None:
        note = "compute.topology is no longer set: slurm.conf names no TopologyPlugin"
        return [Change(REF, Action.DELETE, have, None, notes=(note,))]
    if have is None:
        return [Change(REF, Action.CREATE, None, want)]
    fields = tuple(field_changes(have, want))
    return [Change(REF, Action.UPDATE, have, want, fields)] if fields else []
