"""A plain slurm.conf/gres.conf for the local stack when no compiled config is at hand.

The project's compiler renders the real thing (its "local profile"); this exists for the
integration fixtures and as a default: N nodes with fake GPUs, spare nodes declared
State=FUTURE (a slurmd start brings one in, no slurmctld restart), and a few partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from reconciler.local.slurm.site import SlurmPaths, SlurmSite, fake_gres_conf, render_settings


@dataclass(frozen=True)
class SimpleCluster:
    nodes: int = 4
    spares: int = 2  # declared State=FUTURE, joined later by starting their slurmd
    cpus: int = 8
    memory_mb: int = 8000
    gpus: int = 4
    partitions: tuple[str, ...] = ("debug", "high")  # the first is the default
    prefix: str = "node"

    def node_names(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(1, self.nodes + 1)]

    def spare_names(self) -> list[str]:
        first = self.nodes + 1
        return [f"{self.prefix}{i}" for i in range(first, first + self.spares)]

    def all_names(self) -> list[str]:
        return self.node_names() + self.spare_names()


def scheduling_settings(accounting: bool) -> dict[str, str]:
    """Scheduling choices for a small, fast test cluster (not site facts)."""
    settings = {
        "SchedulerType": "sched/backfill",
        # Short intervals: tests wait on scheduling decisions.
        "SchedulerParameters": "sched_interval=2,bf_interval=2",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core",
        "MpiDefault": "none",
        "SwitchType": "switch/none",
        "JobCompType": "jobcomp/none",
        "KillWait": "2",
        "MaxNodeCount": "64",  # room for dynamic nodes beside the declared ones
        "MinJobAge": "300",
        "SlurmctldDebug": "info",
        "SlurmdDebug": "info",
        "PreemptMode": "REQUEUE",
    }
    if accounting:
        settings["AccountingStorageEnforce"] = "associations,limits,qos"
        settings["PreemptType"] = "preempt/qos"
    else:
        settings["PreemptType"] = "preempt/partition_prio"
    return settings


def node_line(cluster: SimpleCluster, name: str, port: int, *, future: bool) -> str:
    gres = f" Gres=gpu:{cluster.gpus} Feature=gpu" if cluster.gpus else ""
    state = "FUTURE" if future else "UNKNOWN"
    return (
        f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} "
        f"CPUs={cluster.cpus} RealMemory={cluster.memory_mb}{gres} State={state}"
    )


# Dynamic nodes (`slurmd -Z --conf "... Feature=dynamic"`) join this partition through the
# node set: slurm.conf names none of them (see test_local_stack's dynamic node test).
DYNAMIC_FEATURE = "dynamic"
DYNAMIC_LINES = (
    f"NodeSet={DYNAMIC_FEATURE} Feature={DYNAMIC_FEATURE}",
    f"PartitionName={DYNAMIC_FEATURE} Nodes={DYNAMIC_FEATURE} MaxTime=INFINITE State=UP",
)


def partition_lines(cluster: SimpleCluster) -> list[str]:
    nodes = ",".join(cluster.all_names())
    lines = []
    for index, name in enumerate(cluster.partitions):
        # Later partitions outrank earlier ones, so a job in `high` preempts one in `debug`.
        tier = 1 + 9 * index
        extra = " Default=YES PreemptMode=REQUEUE" if index == 0 else " PreemptMode=OFF"
        lines.append(
            f"PartitionName={name} Nodes={nodes} MaxTime=INFINITE State=UP OverSubscribe=NO "
            f"PriorityTier={tier}{extra}"
        )
    return lines


def render_slurm_conf(
    cluster: SimpleCluster,
    site: Mapping[str, str],
    node_ports: Mapping[str, int],
    *,
    accounting: bool = False,
) -> str:
    """slurm.conf text: site settings, scheduling settings, nodes, partitions."""
    settings = {**site, **scheduling_settings(accounting)}
    nodes = [node_line(cluster, n, node_ports[n], future=False) for n in cluster.node_names()]
    nodes += [node_line(cluster, n, node_ports[n], future=True) for n in cluster.spare_names()]
    body = "\n".join([*nodes, *partition_lines(cluster), *DYNAMIC_LINES])
    return (
        "# Rendered by tests.integration.simple_cluster\n" + render_settings(settings) + body + "\n"
    )


def render_gres_conf(cluster: SimpleCluster, paths: SlurmPaths) -> str:
    return fake_gres_conf(paths, {name: cluster.gpus for name in cluster.all_names()})


def simple_renderer(
    cluster: SimpleCluster,
) -> Callable[[SlurmSite], tuple[str, str]]:
    """A `render` for LocalStack.up: (slurm.conf, gres.conf) text for `cluster`."""

    def render(site: SlurmSite) -> tuple[str, str]:
        conf = render_slurm_conf(
            cluster, site.settings, site.ports.nodes, accounting=site.accounting
        )
        return conf, render_gres_conf(cluster, site.paths)

    return render
