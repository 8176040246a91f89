"""cgroup.conf, and what slurmd needs to use it, when slurm.conf names a cgroup plugin
(`proctrack/cgroup`, `task/cgroup`: the `slurmConfig.slurmCtld.procTrackType` and `taskPlugin` of
SUNK's "Slurm Workload Manager" page, or the same keys in `extraConfig`).

Slurm reads cgroup.conf beside slurm.conf; without it 24.11's cgroup plugins assume systemd made
slurmd's cgroup, which a container has not. `IgnoreSystemd=yes` has slurmd make its own subtree in
the cgroup hierarchy (v1 or v2, `CgroupPlugin=autodetect`), which it can only do where that
hierarchy is writable: in a privileged container, as SUNK runs slurmd (SUNK's "Slurm Workload
Manager" page: proctrack/cgroup "requires special HPC security policy"), and as Slinky's chart does.

`slurmConfig.cgroupConfig` (ours) is cgroup.conf text: a `Key=Value` line replaces our setting
of the same key in place, any other line is added, as `extraConfig` does for slurm.conf.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler.compile.lines import apply_setting_lines, write_lines

HEADER = "# Rendered by reconciler from the config repo; edit the repo, not this file."
CGROUP_CONF = "cgroup.conf"
_PLUGIN_KEYS = ("proctracktype", "taskplugin")
# SUNK's "Slurm Workload Manager" page writes `task/cgroups`; Slurm reads a comma list of plugins.
_CGROUP_PLUGIN = re.compile(r"(proctrack|task)/cgroups?")


def cgroup_plugins(slurm_conf: str) -> tuple[str, ...]:
    """The cgroup plugins the rendered slurm.conf loads (its last ProctrackType and TaskPlugin,
    as Slurm reads them: the last line of a key wins)."""
    found: dict[str, list[str]] = {}
    for line in slurm_conf.splitlines():
        key, _, value = line.partition("=")
        if key.strip().lower() in _PLUGIN_KEYS:
            found[key.strip().lower()] = [p.strip() for p in value.split(",")
                                          if _CGROUP_PLUGIN.fullmatch(p.strip())]  # fmt: skip
    return tuple(p for plugins in found.values() for p in plugins)


def render_cgroup_conf(plugins: tuple[str, ...], values: dict[str, Any]) -> str:
    settings = {"CgroupPlugin": "autodetect", "IgnoreSystemd": "yes"}
    if any(p.startswith("task/") for p in plugins):
        # task/cgroup confines each step to the cores, memory and devices Slurm gave it: a
        # GPU gres.conf lists (File=, or found by AutoDetect) and the job was not given is
        # denied (a devices cgroup on v1, an eBPF program on v2: the privileged slurmd's).
        settings.update({"ConstrainCores": "yes", "ConstrainRAMSpace": "yes",
                         "ConstrainDevices": "yes"})  # fmt: skip
    # write_lines refuses a control character in the added lines (checked when loaded too).
    extra = apply_setting_lines(settings, cgroup_config(values))
    return write_lines(CGROUP_CONF, [HEADER, *(f"{k}={v}" for k, v in settings.items()), *extra])


def cgroup_config(values: dict[str, Any]) -> str:
    return str((values.get("slurmConfig") or {}).get("cgroupConfig") or "")
