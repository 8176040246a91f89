"""The environment a Slurm client command (scontrol, sacctmgr, squeue) runs in.

Usually fixed for a cluster (`SLURM_CONF=...`). Where the install that drives the cluster can
change under a running reconciler (a local stack mid-upgrade runs slurmctld from another
release's install, and a client must parse the slurm.conf rendered for that release: 24.11's
scontrol refuses 25.11's `MetricsType`), it is read again for every command.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping

EnvSource = Mapping[str, str] | Callable[[], Mapping[str, str]]


def current_env(source: EnvSource) -> dict[str, str]:
    """The caller's part of the environment as it is now."""
    return dict(source() if callable(source) else source)


def child_env(
    base: Mapping[str, str], caller: Mapping[str, str], token: str | None
) -> dict[str, str]:
    """The child's environment: inherited SLURM_* dropped (they could aim the command at another
    cluster or user), then the caller's (SLURM_CONF=...), then the token, which travels here and
    never on the command line (`ps` would show it)."""
    env = {k: v for k, v in base.items() if not k.startswith("SLURM_")}
    env.update(caller)
    if token is not None:
        env["SLURM_JWT"] = token
    return env


def find_program(program: str, caller: Mapping[str, str]) -> str | None:
    """Where `program` is on the caller's PATH, else on ours."""
    return shutil.which(program, path=caller.get("PATH", os.environ.get("PATH")))
