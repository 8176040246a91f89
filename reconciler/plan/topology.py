"""The topology file in a plan (topology.conf before Slurm 25.05, topology.yaml from 25.05 on):
a Slurm config file like slurm.conf, shown whole when it changes, and deleted when
compute.topology goes away or the other file takes its place (pure)."""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.compile.topology import TOPOLOGY_FILES
from reconciler.plan.fields import field_changes
from reconciler.plan.model import SLURM, SLURM_CONFIG, Action, Change, ObjectRef


def ref(name: str) -> ObjectRef:
    return ObjectRef(SLURM, SLURM_CONFIG, "", name)


def topology_changes(want: Mapping[str, str], have: Mapping[str, str]) -> list[Change]:
    """Per topology file: nothing when neither has one or both hold the same text."""
    changes: list[Change] = []
    for name in TOPOLOGY_FILES:
        changes += _file_changes(name, want.get(name), have.get(name), bool(want))
    return changes


def _file_changes(name: str, want: str | None, have: str | None, topology: bool) -> list[Change]:
    if want is None and have is None:
        return []
    if want is None:
        note = (
            f"the target Slurm release reads the other topology file: {name} is deleted"
            if topology
            else "compute.topology is no longer set: Slurm reads no topology file"
        )
        return [Change(ref(name), Action.DELETE, have, None, notes=(note,))]
    if have is None:
        return [Change(ref(name), Action.CREATE, None, want)]
    fields = tuple(field_changes(have, want))
    return [Change(ref(name), Action.UPDATE, have, want, fields)] if fields else []
