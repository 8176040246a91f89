"""Render slurm.conf and gres.conf from values, node specs and a site profile (pure text)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler import hostlists
from reconciler.compile.job_scripts import KINDS, script_config_map
from reconciler.compile.lines import apply_setting_lines, write_lines
from reconciler.compile.lua_plugins import lua_settings
from reconciler.compile.power import power_conf
from reconciler.compile.profile import Profile
from reconciler.compile.slurm_nodes import SlurmNodeSpec
from reconciler.compile.slurmdbd import accounting_plan
from reconciler.compile.sshd import slurm_conf_settings as ssh_settings
from reconciler.compile.target_release import DEFAULT_RELEASE
from reconciler.config.control_chars import control_character
from reconciler.config.keys import default_of
from reconciler.config.topology import topology_settings
from reconciler.errors import CompileError, Location, Warning_
from reconciler.slurm_release import GRES_NVIDIA_SINCE, OPENMETRICS_SINCE, SlurmRelease

HEADER = "# Rendered by reconciler from the config repo; edit the repo, not this file."
DEFAULT_PARTITIONS = "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
# Lines that declare objects rather than set one key; extraConfig keeps them as written.
_OBJECT_KEYS = {"nodename", "partitionname", "nodeset", "downnodes", "frontendname", "switchname"}
# Matched whole (fullmatch). A partition token's value holds no whitespace or control
# character (they would end the token or the line in Slurm's reading).
_TOKEN = re.compile(r"([A-Za-z][A-Za-z0-9]*)=([^\s\x00-\x1f\x7f-\x9f]*)")


@dataclass(frozen=True)
class Partition:
    name: str
    options: tuple[tuple[str, str], ...]

    def line(self) -> str:
        return " ".join([f"PartitionName={self.name}", *(f"{k}={v}" for k, v in self.options)])

    def option(self, key: str) -> str | None:
        return next((v for k, v in self.options if k.lower() == key.lower()), None)


def parse_partitions(text: str | None, where: Location | None = None) -> list[Partition]:
    """`compute.partitions` is slurm.conf text, as in SUNK; comments and blank lines skipped."""
    partitions: list[Partition] = []
    for number, raw in enumerate((text or DEFAULT_PARTITIONS).splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if line:
            partitions.append(_parse_partition_line(line, number, where))
    _reject_duplicates(partitions, where)
    return partitions


def _parse_partition_line(line: str, number: int, where: Location | None) -> Partition:
    pairs = []
    for token in line.split():
        match = _TOKEN.fullmatch(token)
        if not match:
            raise CompileError(
                f"compute.partitions line {number}: {token!r} is not KEY=VALUE",
                where=where,
                hint="write partitions as slurm.conf lines: PartitionName=gpu Nodes=h100 State=UP",
            )
        pairs.append((match.group(1), match.group(2)))
    if not pairs or pairs[0][0].lower() != "partitionname" or not pairs[0][1]:
        raise CompileError(
            f"compute.partitions line {number} must start with PartitionName=NAME: {line!r}",
            where=where,
        )
    return Partition(pairs[0][1], tuple(pairs[1:]))


def _reject_duplicates(partitions: list[Partition], where: Location | None) -> None:
    seen: set[str] = set()
    for partition in partitions:
        if partition.name in seen:
            raise CompileError(f"partition {partition.name!r} is defined twice", where=where)
        seen.add(partition.name)


def check_partition_nodes(
    partitions: list[Partition],
    specs: list[SlurmNodeSpec],
    disabled: Iterable[str],
    where: Location | None,
) -> list[tuple[str, str]]:
    """Every name in Nodes= must be ALL, a node definition, or a compiled Slurm node.

    Returns (partition, definition) for each disabled definition a partition names: its
    NodeSet is still rendered, empty, so switching a definition off never breaks slurm.conf.
    """
    nodesets = {s.nodeset for s in specs}
    nodes = {n for s in specs for n in s.node_names()}
    disabled = set(disabled)
    empty: list[tuple[str, str]] = []
    left = hostlists.MAX_NAMES  # for all partitions: a thousand lines under the cap add up
    for partition in partitions:
        value = partition.option("Nodes")
        if not value or value.upper() == "ALL":
            continue
        names = _partition_nodes(partition, value, left, where)
        left -= len(names)
        for name in names:
            if name in disabled:
                empty.append((partition.name, name))
            elif name not in nodesets and name not in nodes:
                raise CompileError(
                    f"partition {partition.name!r} lists {name!r} in Nodes=, which is not a "
                    "node definition or Slurm node of this config",
                    where=where,
                    hint="use a compute.nodes name ("
                    + ", ".join(sorted(nodesets | disabled))
                    + ") or ALL",
                )
    return empty


def _partition_nodes(
    partition: Partition, value: str, left: int, where: Location | None
) -> list[str]:
    try:
        return hostlists.expand_checked(value, left)
    except hostlists.HostlistRefused as error:
        raise CompileError(
            f"partition {partition.name!r}: the hostlist of Nodes= {error} "
            f"({hostlists.MAX_NAMES:,} for all partitions together)",
            where=where,
            hint="name node definitions (Nodes=h100,cpu), not each node; ALL names every node",
        ) from None


def render_slurm_conf(
    release: str,
    values: dict[str, Any],
    specs: list[SlurmNodeSpec],
    partitions: list[Partition],
    profile: Profile,
    empty_nodesets: Iterable[str] = (),
    target: SlurmRelease = DEFAULT_RELEASE,
) -> str:
    """`target`: the Slurm release the file is for (compile/target_release.py)."""
    settings = _settings(release, values, profile, target, has_gpus=any(s.gres for s in specs))
    settings.update(power_conf(values, specs, profile.conf_dir))
    settings.update(lua_settings(values))
    settings.update(ssh_settings(values))  # compute.ssh.pamSlurmAdopt (compile/sshd.py)
    if target >= OPENMETRICS_SINCE:
        settings["MetricsType"] = OPENMETRICS_PLUGIN  # the daemon reads its figures there
    # extraConfig wins: its KEY=VALUE lines replace ours in place; object lines (NodeName=,
    # PartitionName=...) and anything else are kept as written.
    extra_objects = apply_setting_lines(
        settings, values.get("slurmConfig", {}).get("extraConfig"), _OBJECT_KEYS
    )
    if private_data(settings) and settings.get("MetricsType") == OPENMETRICS_PLUGIN:
        del settings["MetricsType"]  # Slurm serves none with PrivateData (plan warns)
    _refuse_line_breaks(settings, extra_objects)
    lines = [HEADER, *(f"{k}={v}" for k, v in settings.items())]
    if extra_objects:
        lines += ["", "# slurmConfig.extraConfig", *extra_objects]
    lines += ["", "# Nodes: one line per node definition (compute.nodes)"]
    lines += _node_lines(specs, profile)
    nodesets = sorted({*(s.nodeset for s in specs), *empty_nodesets})
    lines += [f"NodeSet={name} Feature={name}" for name in nodesets]
    lines += ["", "# Partitions (compute.partitions)", *(p.line() for p in partitions)]
    return write_lines("slurm.conf", lines)


OPENMETRICS_PLUGIN = "metrics/openmetrics"
OPENMETRICS_LINE = f"MetricsType={OPENMETRICS_PLUGIN}"


def openmetrics_warnings(slurm_conf: str, target: SlurmRelease) -> list[Warning_]:
    """Where slurmctld could serve OpenMetrics and the rendered file stops it."""
    if target < OPENMETRICS_SINCE or OPENMETRICS_LINE in slurm_conf.splitlines():
        return []
    return [Warning_("slurmConfig.extraConfig", f"slurm.conf does not keep {OPENMETRICS_LINE} "
                     "(PrivateData or another MetricsType is set): slurmctld serves no "
                     "OpenMetrics, so the daemon reads its Slurm figures through slurmrestd, "
                     "every job on each read (docs/metrics.md)")]  # fmt: skip


def private_data(settings: dict[str, str]) -> bool:
    """slurm.conf sets PrivateData (any case, as Slurm reads keys)."""
    return any(key.lower() == "privatedata" for key in settings)


# slurm.conf's integer keys set straight from slurmConfig, in the order they are rendered.
_INTEGERS = (("DefMemPerCPU", "defMemPerCPU"), ("KillWait", "killWait"),
             ("WaitTime", "waitTime"), ("InactiveLimit", "inactiveLimit"))  # fmt: skip


def _default(key: str) -> Any:
    return default_of(f"slurmConfig.{key}")


def _settings(
    release: str, values: dict[str, Any], profile: Profile, target: SlurmRelease, *, has_gpus: bool
) -> dict[str, str]:
    slurm = values.get("slurmConfig") or {}
    ctld = slurm.get("slurmCtld") or {}
    slurmd = slurm.get("slurmd") or {}
    settings: dict[str, str] = {
        "ClusterName": release,
        "SlurmctldHost": profile.controller_host or f"{release}-controller",
        "SlurmctldPort": str(profile.slurmctld_port),
        "SlurmdPort": str(profile.slurmd_port),
    }
    settings.update(
        {
            "SlurmctldTimeout": str(ctld.get("timeout", _default("slurmCtld.timeout"))),
            "SlurmdTimeout": str(slurmd.get("timeout", _default("slurmd.timeout"))),
            "ProctrackType": ctld.get("procTrackType")
            or ctld.get("prockTrackType")
            or _default("slurmCtld.procTrackType"),
            "TaskPlugin": ctld.get("taskPlugin") or _default("slurmCtld.taskPlugin"),
            "SchedulerType": "sched/backfill",
            "SelectType": "select/cons_tres",
            "SelectTypeParameters": slurm.get("selectTypeParameters")
            or _default("selectTypeParameters"),
            **{word: str(slurm.get(key, _default(key))) for word, key in _INTEGERS},
            "SuspendTime": str(slurmd.get("suspendTime", _default("slurmd.suspendTime"))),
            "ReturnToService": "2",
            "MpiDefault": "none",
        }
    )
    accounting = accounting_plan(release, values, profile)
    if accounting.enabled:
        settings["AccountingStorageType"] = "accounting_storage/slurmdbd"
        settings["AccountingStorageHost"] = accounting.dbd_host
        settings["AccountingStoragePort"] = str(accounting.dbd_port)
    if has_gpus:
        settings["GresTypes"] = "gpu"
    for kind in KINDS:
        if script_config_map(slurmd, kind, release):
            settings[kind.capitalize()] = f"{profile.conf_dir}/{kind}.d/*"
    if profile.is_local:
        settings["SlurmdParameters"] = "config_overrides"  # nodes claim more CPUs than the host has
    settings.update(topology_settings(values, target))  # compute.topology (compile/topology.py)
    settings.update(profile.site)
    return settings


def _refuse_line_breaks(settings: dict[str, str], extra_lines: list[str]) -> None:
    """The last guard, whatever a value's source (values are checked with their file and line
    when loaded; the profile and command-line flags are not): a control character in a
    value would start another line, or another key, of slurm.conf."""
    for key, value in settings.items():
        bad = control_character(value)
        if bad is not None:
            raise CompileError(
                f"slurm.conf setting {key} holds the control character {bad!r}",
                hint="a value must stay on its own line; remove it",
            )
    for line in extra_lines:
        if control_character(line, allowed="\t") is not None:
            raise CompileError(
                "slurmConfig.extraConfig holds a control character",
                hint="slurm.conf text may hold tabs and line breaks, no other control characters",
            )


def _node_lines(specs: list[SlurmNodeSpec], profile: Profile) -> list[str]:
    """Running nodes as plain NodeName lines (they survive a slurmctld restart as they are);
    spares up to maxReplicas as State=FUTURE (hidden until their slurmd registers)."""
    lines: list[str] = []
    index = 0
    for spec in specs:
        shape = _node_shape(spec)
        groups = ((spec.node_names(), ""), (spec.spare_names(), " State=FUTURE"))
        if not spec.max_replicas:
            lines.append(f"# {spec.nodeset}: 0 replicas")
        for names, state in groups:
            if not names:
                continue
            if not profile.is_local:
                lines.append(f"NodeName={_range(spec.statefulset, names)} {shape}{state}")
                continue
            for name in names:
                port = profile.port_for(name, index)
                index += 1
                lines.append(
                    f"NodeName={name} NodeHostname={profile.node_hostname} "
                    f"NodeAddr={profile.node_addr} Port={port} {shape}{state}"
                )
    return lines


def _node_shape(spec: SlurmNodeSpec) -> str:
    parts = [f"CPUs={spec.cpus}", f"RealMemory={spec.real_memory_mb}"]
    if spec.mem_spec_limit_mb:
        parts.append(f"MemSpecLimit={spec.mem_spec_limit_mb}")
    if spec.gres:
        parts.append(f"Gres={spec.gres}")
    parts.append("Feature=" + ",".join(spec.features))
    return " ".join(parts)


def _range(statefulset: str, names: list[str]) -> str:
    """Ordinals are contiguous (<sts>-a..b): write the hostlist without computing it."""
    first, last = names[0].rsplit("-", 1)[1], names[-1].rsplit("-", 1)[1]
    return f"{statefulset}-{first}" if first == last else f"{statefulset}-[{first}-{last}]"


def declared_range(spec: SlurmNodeSpec) -> str:
    return _range(spec.statefulset, [*spec.node_names(), *spec.spare_names()])


# gres.conf's AutoDetect plugins (Slurm 24.11). Our image's Slurm has no NVML (Debian has no
# nvml.h), so its default is gpu/nvidia, which reads the driver's /proc and /dev entries;
# images built with NVML (SUNK's) take `nvml`. A release before GRES_NVIDIA_SINCE has no
# `nvidia`: its default is `nvml`.
GRES_AUTODETECT = ("nvidia", "nvml", "rsmi", "oneapi", "nrt", "off")
DEFAULT_GRES_AUTODETECT = "nvidia"
_GRES_KEY = "slurmConfig.gresAutoDetect"


def gres_autodetect(values: Mapping[str, Any], release: SlurmRelease = DEFAULT_RELEASE) -> str:
    """`slurmConfig.gresAutoDetect`, checked against the plugins Slurm `release` has."""
    chosen = (values.get("slurmConfig") or {}).get("gresAutoDetect")
    if chosen in (None, ""):
        return DEFAULT_GRES_AUTODETECT if release >= GRES_NVIDIA_SINCE else "nvml"
    if chosen not in GRES_AUTODETECT:
        raise CompileError(f"values: {_GRES_KEY} is {chosen!r}; Slurm's gres.conf "
                           f"AutoDetect takes one of {', '.join(GRES_AUTODETECT)}")  # fmt: skip
    _check_autodetect_release(str(chosen), release, f"{_GRES_KEY} is {chosen!r}")
    return str(chosen)


def _check_autodetect_release(chosen: str, release: SlurmRelease, written: str) -> None:
    if chosen.lower() == "nvidia" and release < GRES_NVIDIA_SINCE:
        raise CompileError(
            f"values: {written}, but gres.conf's AutoDetect=nvidia came with Slurm "
            f"{GRES_NVIDIA_SINCE.series} and this render targets Slurm {release}: its slurmd "
            "would find no GPU",
            hint="set slurmConfig.gresAutoDetect: nvml (an image built with NVML), or off and "
            "list the devices in slurmConfig.gresConfig",
        )


def gpu_node_specs(specs: list[SlurmNodeSpec]) -> list[SlurmNodeSpec]:
    """The node definitions that declare Slurm nodes with GPUs."""
    return [s for s in specs if s.gres and s.max_replicas]


def gres_config(values: Mapping[str, Any]) -> str:
    """`slurmConfig.gresConfig` (ours): gres.conf text for what autodetection cannot find."""
    return str((values.get("slurmConfig") or {}).get("gresConfig") or "")


def render_gres_conf(
    specs: list[SlurmNodeSpec],
    profile: Profile,
    values: Mapping[str, Any],
    release: SlurmRelease = DEFAULT_RELEASE,
) -> str:
    """Real clusters autodetect GPUs (`gres_autodetect`, for the Slurm `release` the render
    targets); the local profile points at fake devices. `gresConfig` lines follow ours:
    `AutoDetect=...` replaces ours in place, device lines are added (as `extraConfig` does
    for slurm.conf)."""
    gpu_specs = gpu_node_specs(specs)
    autodetect = gres_autodetect(values, release)  # checked with or without GPU definitions
    lines = ["# Rendered by reconciler from the config repo; edit the repo, not this file."]
    if not gpu_specs and not profile.is_local:
        return write_lines("gres.conf", [*lines, "# no GPU node definitions"])
    settings = {"AutoDetect": "off" if profile.is_local else autodetect}
    extra = apply_setting_lines(settings, gres_config(values))
    if settings["AutoDetect"] not in ("off", autodetect):  # gresConfig's line replaced ours
        written = f"slurmConfig.gresConfig sets AutoDetect={settings['AutoDetect']}"
        _check_autodetect_release(settings["AutoDetect"], release, written)
    lines += [f"{k}={v}" for k, v in settings.items()]
    for spec in gpu_specs if profile.is_local else []:
        assert spec.gres is not None
        devices = f"{profile.gres_device_dir}/gpu[0-{spec.gres.count - 1}]"
        if spec.gres.count == 1:
            devices = f"{profile.gres_device_dir}/gpu0"
        type_part = f" Type={spec.gres.type}" if spec.gres.type else ""
        lines.append(f"NodeName={declared_range(spec)} Name=gpu{type_part} File={devices}")
    return write_lines("gres.conf", [*lines, *extra])


def partitions_in(conf: str) -> list[Partition]:
    """The partitions of a rendered slurm.conf (as `parse_partitions` reads the repo's)."""
    lines = [line for line in conf.splitlines() if line.startswith("PartitionName=")]
    return parse_partitions("\n".join(lines)) if lines else []
