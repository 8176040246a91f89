"""values + layers -> DesiredState: everything apply will make true, as plain data (no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import hostlist

from reconciler import wellknown as wk
from reconciler.compile import directory, manifests
from reconciler.compile.accounting import Accounting, compile_accounting
from reconciler.compile.accounting_off import accounting_off_warnings
from reconciler.compile.cgroup import (
    CGROUP_CONF,
    cgroup_config,
    cgroup_plugins,
    render_cgroup_conf,
)
from reconciler.compile.control_plane import control_plane_objects
from reconciler.compile.images import image_warnings
from reconciler.compile.job_scripts import KINDS, script_map_name
from reconciler.compile.lua_plugins import admin_comment_warnings, check_lua_settings, lua_files
from reconciler.compile.no_nodes import no_nodes_warnings
from reconciler.compile.node_memory import memory_warnings
from reconciler.compile.nodesets import NodeSet, compose_all, last_setter
from reconciler.compile.power import (
    check_power_saving,
    program_files,
    programs_map_name,
)
from reconciler.compile.profile import Profile
from reconciler.compile.pyxis import (
    ENROOT_CONF,
    enroot_map_name,
    plugstack_files,
    pyxis_enabled,
    pyxis_warnings,
    render_enroot_conf,
)
from reconciler.compile.reservations import Reservation, compile_reservations
from reconciler.compile.s6_services import s6_config_map_data, s6_map_name, s6_services
from reconciler.compile.scheduled_gpus import scheduled_gpu_warnings
from reconciler.compile.secrets import GeneratedSecret, generated_secrets
from reconciler.compile.slurm_conf import (
    Partition,
    check_partition_nodes,
    gpu_node_specs,
    gres_config,
    openmetrics_warnings,
    parse_partitions,
    render_gres_conf,
    render_slurm_conf,
)
from reconciler.compile.slurm_keys import release_warnings
from reconciler.compile.slurm_nodes import SlurmNodeSpec, slurm_node_specs
from reconciler.compile.slurmdbd import accounting_plan, render_slurmdbd_conf
from reconciler.compile.sshd import compute_ssh_warnings
from reconciler.compile.target_release import (
    DEFAULT_RELEASE,
    NEWEST_KNOWN,
    TargetRelease,
    target_release,
)
from reconciler.compile.topology import TopologyInputs, compiled_topology
from reconciler.compile.value_secrets import ValueSecret
from reconciler.config.layering import plain
from reconciler.config.repo import Config
from reconciler.errors import Warning_
from reconciler.slurm_release import SlurmRelease

# Apply order: what a workload mounts or claims must exist before it.
KIND_ORDER = {"ConfigMap": 0, "PersistentVolumeClaim": 1, "Service": 1, "Deployment": 2,
              "StatefulSet": 2}  # fmt: skip


@dataclass(frozen=True)
class SlurmNode:
    name: str
    nodeset: str
    cpus: int
    real_memory_mb: int
    gres: str | None
    features: tuple[str, ...]
    gpus: int = 0


@dataclass(frozen=True)
class DesiredState:
    release: str
    namespace: str
    profile: str
    nodesets: tuple[NodeSet, ...]
    kube_objects: tuple[dict[str, Any], ...]
    slurm_nodes: tuple[SlurmNode, ...]
    spare_nodes: tuple[SlurmNode, ...]
    partitions: tuple[Partition, ...]
    slurm_conf: str
    gres_conf: str
    warnings: tuple[Warning_, ...] = field(default=())
    reservations: tuple[Reservation, ...] = field(default=())
    accounting: Accounting = field(default_factory=Accounting)
    secrets: tuple[GeneratedSecret, ...] = field(default=())
    # Secrets whose data values give (shown without it; apply keeps them equal to values).
    value_secrets: tuple[ValueSecret, ...] = field(default=())
    # compute.topology's topology.conf or topology.yaml by file name (none: not set), from
    # the Nodes' labels when read.
    topology_files: Mapping[str, str] = field(default_factory=dict)
    # The Slurm release the files are rendered for, and where that came from.
    slurm_release: TargetRelease = field(
        default_factory=lambda: TargetRelease(DEFAULT_RELEASE, "default")
    )


def compile_desired_state(
    config: Config,
    profile: Profile | None = None,
    topology: TopologyInputs | None = None,
    live_release: SlurmRelease | None = None,
) -> DesiredState:
    """`topology`: what the cluster says of where Slurm nodes run (compute.topology reads it;
    without it every node is unplaced). `live_release`: the Slurm release slurmctld runs, when
    it answered (the files are rendered for it; else for slurmConfig.release or our image's)."""
    profile = profile or Profile()
    release, namespace = config.settings.release, config.settings.namespace
    values = plain(config.values)
    target = target_release(values, live_release)
    nodesets = compose_all(config)
    enabled = [(n, plain(n.definition)) for n in nodesets if n.enabled]
    specs = slurm_node_specs(release, enabled)
    where = config.partitions_where
    partitions = parse_partitions(values.get("compute", {}).get("partitions"), where)
    disabled = (n.name for n in nodesets if not n.enabled)
    empty = check_partition_nodes(partitions, specs, disabled, where)
    declared = [n for s in specs for n in (*s.node_names(), *s.spare_names())]
    topo = compiled_topology(config, values, partitions, declared, topology, target)
    partitions = topo.partitions
    warnings = [
        Warning_(
            str(where),
            f"partition {p!r} names disabled node definition {d!r}: "
            "it contributes no nodes until enabled",
        )
        for p, d in empty
    ]
    warnings += [*no_nodes_warnings(config, nodesets), *image_warnings(config, nodesets)]
    warnings += scheduled_gpu_warnings(config, enabled)
    if config.view.scheduler_enabled:
        warnings += admin_comment_warnings(values)
    warnings += [Warning_(str(config.topology_where), note) for note in topo.notes]
    warnings += [Warning_("slurmConfig.release", note) for note in target.notes]
    warnings += release_warnings(values, target.release, str(where))
    warnings += pyxis_warnings(values, [(n.name, d) for n, d in enabled])
    slurm_conf = render_slurm_conf(
        release, values, specs, partitions, profile, (d for _, d in empty), target.release
    )
    warnings += [*openmetrics_warnings(slurm_conf, target.release),
                 *memory_warnings(values, specs, slurm_conf, _limits_where(config, enabled)),
                 *compute_ssh_warnings(values, slurm_conf)]  # fmt: skip
    check_lua_settings(slurm_conf, values)
    gres_conf = render_gres_conf(specs, profile, values, target.release)
    if gres_config(values) and not gpu_node_specs(specs):
        warnings.append(
            Warning_(
                "values",
                "slurmConfig.gresConfig is not used: no enabled node "
                "definition has GPUs (gresGpu), so gres.conf lists none",
            )
        )
    check_power_saving(config.view, specs)
    conf_files = {"slurm.conf": slurm_conf, "gres.conf": gres_conf, **topo.files,
                  **lua_files(values)}  # fmt: skip
    if plugins := cgroup_plugins(slurm_conf):
        conf_files[CGROUP_CONF] = render_cgroup_conf(plugins, values)
    elif cgroup_config(values):
        # Reported, not dropped: the merged slurm.conf decides, so no file line names it.
        warnings.append(
            Warning_(
                "values",
                "slurmConfig.cgroupConfig is not used: slurm.conf "
                "loads no cgroup plugin (proctrack/cgroup, task/cgroup)",
            )
        )
    objects = _kube_objects(release, namespace, values, enabled, specs, conf_files)
    if config.view.power is not None:
        objects.append(manifests.config_map(programs_map_name(release), namespace, release,
                                            program_files(config.view.power, profile)))  # fmt: skip
    dbd = accounting_plan(release, values, profile)
    slurmdbd_conf = render_slurmdbd_conf(release, dbd, dict(profile.dbd_site))
    objects = sorted(
        [*objects, *control_plane_objects(release, namespace, values, slurmdbd_conf, profile)],
        key=object_sort_key,
    )
    slurm_nodes = _slurm_nodes(specs, spares=False)
    spare_nodes = _slurm_nodes(specs, spares=True)
    # One pass: a scan of all nodes per node set was 2000 x 65,536 steps within the caps.
    running: dict[str, list[str]] = {nodeset.name: [] for nodeset, _ in enabled}
    for node in slurm_nodes:
        running[node.nodeset].append(node.name)
    by_definition = {n.name: running.get(n.name) for n in nodesets}
    reservations = compile_reservations(
        release,
        values,
        config.reservation_locations,
        by_definition,
        (n.name for n in (*slurm_nodes, *spare_nodes)),
    )
    accounting = compile_accounting(release, values, config.accounting_locations)
    warnings += accounting_off_warnings(values, accounting, partitions, str(where), slurm_conf,
                                        config.policies)  # fmt: skip
    return DesiredState(
        release=release,
        namespace=namespace,
        profile=profile.name,
        nodesets=tuple(nodesets),
        kube_objects=tuple(objects),
        slurm_nodes=tuple(slurm_nodes),
        spare_nodes=tuple(spare_nodes),
        partitions=tuple(partitions),
        slurm_conf=slurm_conf,
        gres_conf=gres_conf,
        warnings=(*config.warnings, *warnings),
        reservations=reservations,
        accounting=accounting,
        secrets=generated_secrets(release, namespace, mysql=dbd.render_mysql),
        value_secrets=tuple(directory.value_secrets(release, namespace, values)),
        topology_files=topo.files,
        slurm_release=target,
    )


def _limits_where(config: Config, enabled: list[tuple[NodeSet, dict[str, Any]]]) -> dict[str, str]:
    """Node definition -> where the memSpecLimit it keeps is written."""
    setters = ((n.name, last_setter(config, n, ("memSpecLimit",))) for n, d in enabled
               if d.get("memSpecLimit") is not None)  # fmt: skip
    return {name: setter.where for name, setter in setters if setter is not None}


def declared_nodes(config: Config) -> list[str]:
    """The Slurm nodes a config declares, the running ones then the spares, as a compiled
    state lists them: no profile or Slurm release decides them, so they are known before the
    target is asked for either."""
    enabled = [(n, plain(n.definition)) for n in compose_all(config) if n.enabled]
    specs = slurm_node_specs(config.settings.release, enabled)
    running = [name for spec in specs for name in spec.node_names()]
    return [*running, *(name for spec in specs for name in spec.spare_names())]


def compile_shape(config: Config, profile: Profile | None = None) -> DesiredState:
    """The declared nodes, their shapes and the value Secrets, before the Slurm release of the
    target is known (it is asked of the target these name): rendered for the newest release we
    know, so nothing a release decides (topology.yaml, say) is refused yet. Not for applying."""
    return compile_desired_state(config, profile, live_release=NEWEST_KNOWN)


def _kube_objects(
    release: str,
    namespace: str,
    values: dict[str, Any],
    enabled: list[tuple[NodeSet, dict[str, Any]]],
    specs: list[SlurmNodeSpec],
    conf_files: dict[str, str],
) -> list[dict[str, Any]]:
    declared = [n for s in specs for n in (*s.node_names(), *s.spare_names())]
    objects = [
        manifests.config_map(
            manifests.slurm_conf_map_name(release),
            namespace,
            release,
            {**conf_files, **plugstack_files(values)},
            {wk.ANNOTATION_SLURM_NODES: hostlist.collect_hostlist(declared)},
        ),
        *_script_maps(release, namespace, values),
        manifests.compute_service(release, namespace),
        *(
            manifests.statefulset(
                release, namespace, spec, definition, values, cgroups=CGROUP_CONF in conf_files
            )
            for spec, (_, definition) in zip(specs, enabled, strict=True)
        ),
    ]
    return sorted(objects, key=object_sort_key)


def _script_maps(release: str, namespace: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    maps = []
    slurmd = (values.get("slurmConfig") or {}).get("slurmd") or {}
    for kind in KINDS:
        if slurmd.get(kind):
            data = manifests.script_files(slurmd[kind], kind)
            name = script_map_name(release, kind)
            maps.append(manifests.config_map(name, namespace, release, data))
    if directory.directory_enabled(values):
        maps.append(manifests.config_map(directory.config_map_name(release), namespace, release,
                                         directory.config_map_data(values)))  # fmt: skip
    if services := s6_services(values):
        data = s6_config_map_data(services)
        maps.append(manifests.config_map(s6_map_name(release), namespace, release, data))
    if pyxis_enabled(values):
        data = {ENROOT_CONF: render_enroot_conf(values)}
        maps.append(manifests.config_map(enroot_map_name(release), namespace, release, data))
    return maps


def object_sort_key(obj: dict[str, Any]) -> tuple[int, str, str]:
    meta = obj["metadata"]
    return (KIND_ORDER.get(obj["kind"], 99), meta.get("namespace", ""), meta["name"])


def _slurm_nodes(specs: list[SlurmNodeSpec], *, spares: bool) -> list[SlurmNode]:
    return [
        SlurmNode(
            name=name,
            nodeset=spec.nodeset,
            cpus=spec.cpus,
            real_memory_mb=spec.real_memory_mb,
            gres=str(spec.gres) if spec.gres else None,
            features=spec.features,
            gpus=spec.gres.count if spec.gres else 0,
        )
        for spec in specs
        for name in (spec.spare_names() if spares else spec.node_names())
    ]
