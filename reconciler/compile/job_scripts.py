"""Prolog and epilog scripts (slurmConfig.slurmd): which ConfigMap slurmd mounts for each kind.

A kind's scripts come from one place: inline (`prolog`, rendered into our ConfigMap
`<release>-prolog`) or a ConfigMap the user deploys (`prologConfigMap`, the way of SUNK's "Slurm
Workload Manager" page, also spelled `prologConfigmap`). Both set is refused, not settled by
dropping one; so is a user's ConfigMap named as one we render, which apply would overwrite or prune.
"""

from __future__ import annotations

from typing import Any

from reconciler.errors import CompileError

KINDS = ("prolog", "epilog")


def script_map_name(release: str, kind: str) -> str:
    """The ConfigMap we render from slurmConfig.slurmd.<kind>."""
    return f"{release}-{kind}"


def script_config_map(slurmd: dict[str, Any], kind: str, release: str) -> str | None:
    """The ConfigMap slurmd mounts at <conf>/<kind>.d (None: no scripts of this kind)."""
    named = _named_config_map(slurmd, kind)
    if slurmd.get(kind) and named:
        key, name = named
        raise CompileError(
            f"slurmConfig.slurmd.{kind} and slurmConfig.slurmd.{key} ({name!r}) are both set: "
            f"a {kind} comes from one of them",
            hint=f"keep slurmConfig.slurmd.{kind} (its scripts go into our ConfigMap "
            f"{script_map_name(release, kind)!r}), or remove it and keep your ConfigMap "
            f"{name!r}",
        )
    if slurmd.get(kind):
        return script_map_name(release, kind)
    if named is None:
        return None
    key, name = named
    ours = {script_map_name(release, k): k for k in KINDS}
    if name in ours:
        raise CompileError(
            f"slurmConfig.slurmd.{key} is {name!r}, the name of the ConfigMap we render from "
            f"slurmConfig.slurmd.{ours[name]} for release {release!r}: apply would overwrite "
            "or prune the one you deploy",
            hint=f"rename your ConfigMap and this key with it (e.g. {name}-scripts), or move "
            f"its scripts into slurmConfig.slurmd.{kind}",
        )
    return name


def _named_config_map(slurmd: dict[str, Any], kind: str) -> tuple[str, str] | None:
    """(key, name) of the user's ConfigMap for `kind`, as SUNK's "Slurm Workload Manager" page
    spells the key."""
    spellings = (f"{kind}ConfigMap", *(("prologConfigmap",) if kind == "prolog" else ()))
    return next(((key, str(slurmd[key])) for key in spellings if slurmd.get(key)), None)
