"""Memory as Slurm schedules it on the nodes of each node definition: whether memory is a
consumable resource (SelectTypeParameters) and what a job asks for when it names none
(DefMemPerCPU, per allocated CPU), against what a node has (RealMemory).

Read from the rendered slurm.conf, so an extraConfig line that replaces our setting is what is
judged; the warning names the key that wrote it. SUNK's "Schedule Kubernetes Pods with Slurm",
"Oversubscription": "configure memory as a consumable resource by setting SelectTypeParameters to
CR_CPU_Memory, CR_Core_Memory, or CR_Socket_Memory. Setting SelectTypeParameters to CR_CPU, CR_Core,
or CR_Socket is discouraged because these values allow memory oversubscription."
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reconciler.compile.slurm_nodes import SlurmNodeSpec
from reconciler.errors import Warning_

# The values SUNK's "Schedule Kubernetes Pods with Slurm" discourages, each with the value it
# recommends instead.
_WITH_MEMORY = {"CR_CPU": "CR_CPU_Memory", "CR_CORE": "CR_Core_Memory",
                "CR_SOCKET": "CR_Socket_Memory"}  # fmt: skip
_VALUES_KEYS = {"SelectTypeParameters": "selectTypeParameters", "DefMemPerCPU": "defMemPerCPU"}


def memory_warnings(
    values: dict[str, Any], specs: list[SlurmNodeSpec], slurm_conf: str,
    limits_where: Mapping[str, str] | None = None,
) -> list[Warning_]:  # fmt: skip
    """`specs`: the enabled node definitions; `slurm_conf`: the rendered file; `limits_where`:
    node definition -> where its memSpecLimit is written ("file:line")."""
    selected = _select_warnings(values, slurm_conf)
    limits = _mem_spec_warnings(values, specs, slurm_conf, limits_where or {})
    return [*selected, *limits, *_default_memory_warnings(values, specs, slurm_conf)]


def _select_warnings(values: dict[str, Any], slurm_conf: str) -> list[Warning_]:
    key = _written_by(values, "SelectTypeParameters")
    value = conf_setting(slurm_conf, "SelectTypeParameters")
    if key is None or value is None:
        return []  # our default, not the user's choice (docs/values.md says why it stays)
    options = value.split(",")
    if not any(option.upper() in _WITH_MEMORY for option in options):
        return []
    fixed = ",".join(_WITH_MEMORY.get(option.upper(), option) for option in options)
    return [Warning_(key, f"SelectTypeParameters={value} does not make memory a consumable "
                     "resource, so Slurm oversubscribes a node's memory and jobs (and Pods our "
                     "scheduler places) can run it out of memory (SUNK's 'Schedule Kubernetes "
                     "Pods with Slurm' discourages it), and a node definition's memSpecLimit "
                     f"has no effect; set {fixed}")]  # fmt: skip


def _mem_spec_warnings(values: dict[str, Any], specs: list[SlurmNodeSpec], slurm_conf: str,
                       limits_where: Mapping[str, str]) -> list[Warning_]:  # fmt: skip
    """slurm.conf(5), MemSpecLimit: "having the Memory set in SelectTypeParameters as any of the
    options that has it as a consumable resource is needed for this option to work"; our
    default CR_Core does not, so a memSpecLimit is judged whoever set SelectTypeParameters."""
    value = conf_setting(slurm_conf, "SelectTypeParameters")
    if value is None or "MEMORY" in value.upper():
        return []
    written = _written_by(values, "SelectTypeParameters")
    key = written or "slurmConfig.selectTypeParameters"
    by = written or f"{key}, our default"
    fixed = ",".join(_WITH_MEMORY.get(option.upper(), option) for option in value.split(","))
    fix = fixed if fixed != value else "CR_Core_Memory"
    return [
        Warning_(limits_where.get(spec.nodeset, "compute.nodes"),
                 f"node definition {spec.nodeset!r} sets memSpecLimit: "
                 f"{spec.mem_spec_limit_mb} (MiB), which has no effect: "
                 f"SelectTypeParameters={value} ({by}) does not make memory a consumable "
                 "resource, and Slurm keeps MemSpecLimit from jobs only when it is; set "
                 f"{key} to {fix} (CR_Core_Memory or CR_CPU_Memory)")
        for spec in specs if spec.mem_spec_limit_mb
    ]  # fmt: skip


def _default_memory_warnings(
    values: dict[str, Any], specs: list[SlurmNodeSpec], slurm_conf: str
) -> list[Warning_]:
    raw = conf_setting(slurm_conf, "DefMemPerCPU")
    if raw is None or not raw.isdigit() or int(raw) == 0:
        return []  # 0: no default (Slurm's "unlimited")
    per_cpu = int(raw)
    key = _written_by(values, "DefMemPerCPU") or "slurmConfig.defMemPerCPU (default)"
    return [
        _too_much(key, per_cpu, spec)
        for spec in specs
        if spec.max_replicas and per_cpu * spec.cpus > _for_jobs(spec)
    ]


def _too_much(key: str, per_cpu: int, spec: SlurmNodeSpec) -> Warning_:
    asked = per_cpu * spec.cpus
    needed_gi = -(-(asked + (spec.mem_spec_limit_mb or 0)) // 1024)
    return Warning_(key, f"DefMemPerCPU={per_cpu} MiB x {spec.cpus} CPUs of node definition "
                    f"{spec.nodeset!r} is {asked} MiB, more than the {_for_jobs(spec)} MiB it "
                    f"has for jobs{_kept(spec)}: a job that asks for all of a node's CPUs "
                    "without --mem asks for more memory than the node has, and Slurm never "
                    f"schedules it; set DefMemPerCPU to {_for_jobs(spec) // spec.cpus} or less, "
                    f"or give {spec.nodeset!r} {needed_gi}Gi of memory")  # fmt: skip


def _for_jobs(spec: SlurmNodeSpec) -> int:
    """RealMemory less what MemSpecLimit keeps for slurmd and the system."""
    return spec.real_memory_mb - (spec.mem_spec_limit_mb or 0)


def _kept(spec: SlurmNodeSpec) -> str:
    limit = spec.mem_spec_limit_mb
    return f" (RealMemory={spec.real_memory_mb} less MemSpecLimit={limit})" if limit else ""


def conf_setting(slurm_conf: str, key: str) -> str | None:
    """The value slurm.conf text gives `key` (keys compared as Slurm does, ignoring case)."""
    prefix = key.lower() + "="
    for line in slurm_conf.splitlines():
        if line.lower().startswith(prefix):
            return line.split("=", 1)[1].strip()
    return None


def _written_by(values: dict[str, Any], key: str) -> str | None:
    """The values key that set slurm.conf's `key` (None: our default)."""
    slurm = values.get("slurmConfig") or {}
    extra = str(slurm.get("extraConfig") or "")
    if re.search(rf"(?im)^\s*{key}=", extra):
        return "slurmConfig.extraConfig"
    if slurm.get(_VALUES_KEYS[key]) is not None:
        return f"slurmConfig.{_VALUES_KEYS[key]}"
    return None
