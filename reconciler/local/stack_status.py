"""What a local stack reports about itself: each component's PID, port, liveness and health."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from reconciler.local.kube.control_plane import KubeControlPlane
from reconciler.local.processes import Supervisor
from reconciler.local.slurm.cluster import SlurmCluster


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int | None
    port: int | None
    running: bool  # the recorded PID is alive and is still the process we started
    healthy: bool  # its own readiness check passes

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def component_statuses(
    supervisor: Supervisor,
    plane: KubeControlPlane | None,
    cluster: SlurmCluster | None,
    more: Mapping[str, bool] | None = None,
) -> list[ComponentStatus]:
    """Every component of the Kubernetes and Slurm halves recorded, with its PID, port,
    liveness and health; `more`: other daemons' health (the kubelet cluster's)."""
    result: list[ComponentStatus] = []
    if plane is not None:
        ports = {"etcd": plane.ports.etcd_client, "kube-apiserver": plane.ports.apiserver}
        result += _statuses(supervisor, plane.health(), ports)
    if cluster is not None:
        p = cluster.ports
        ports = {
            "slurmctld": p.slurmctld,
            "slurmrestd": p.slurmrestd,
            "slurmdbd": p.slurmdbd,
            "mariadb": p.mariadb,
            **{cluster.slurmd_daemon(node): port for node, port in p.nodes.items()},
            **dict.fromkeys(cluster.sshd_daemons(), p.ssh),
        }
        result += _statuses(supervisor, cluster.health(), ports)
    if more:
        result += _statuses(supervisor, dict(more), {})
    return result


def _statuses(
    supervisor: Supervisor, health: dict[str, bool], ports: dict[str, int]
) -> list[ComponentStatus]:
    statuses = []
    for name, healthy in health.items():
        record = supervisor.running(name)
        statuses.append(
            ComponentStatus(
                name=name,
                pid=record.pid if record else None,
                port=ports.get(name),
                running=record is not None,
                healthy=healthy,
            )
        )
    return statuses
