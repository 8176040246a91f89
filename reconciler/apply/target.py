"""Where apply acts and how: the target's adapters, the options, and the one error apply
raises for a stop it chose (what was done before is in its progress output)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from reconciler.adapters.kube import Kube
from reconciler.adapters.node_control import NodeControl
from reconciler.adapters.sacctmgr import Sacctmgr
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.errors import ReconcilerError

Say = Callable[[str], None]


class ApplyError(ReconcilerError):
    """Apply stopped; what was done before is listed in the progress output."""


class ConfigSink(Protocol):
    """Where slurmctld reads its config: apply waits until it holds the new text."""

    def wait_for(
        self,
        slurm_conf: str,
        gres_conf: str,
        timeout: float,
        *,
        topology_files: Mapping[str, str] | None = None,
    ) -> None: ...


class ControllerRestarter(Protocol):
    """slurmctld as our controller Deployment: rolled to restart it; its Pods nudged to pick
    up a ConfigMap change (kubelet resyncs a Pod's volumes when the Pod changes)."""

    def restart(self, timeout: float) -> None: ...
    def nudge(self) -> None: ...


class UpgradeBackup(Protocol):
    """Before a Slurm upgrade's first stage: StateSaveLocation copied aside and the accounting
    database dumped (apply/upgrade_effects.py's FileBackup where apply sees the files)."""

    def take(self, label: str, say: Say) -> str:
        """Where the backup was put."""
        ...


@dataclass(frozen=True)
class ApplyOptions:
    drain_timeout: float = 600.0
    on_drain_timeout: Literal["fail", "requeue"] = "fail"
    register_timeout: float = 60.0
    config_timeout: float = 90.0
    control_plane_timeout: float = 300.0  # a bootstrap: images pulled, Pods started
    poll: float = 0.5
    # A Slurm upgrade: how long a stage's check may wait for its daemons to answer at the new
    # release (slurmdbd's first start converts the database: hours on a large one), and how
    # often it looks.
    upgrade_timeout: float = 1800.0
    schema_timeout: float = 6 * 3600.0
    upgrade_poll: float = 2.0


@dataclass
class Target:
    kube: Kube
    slurm: SlurmRestApi
    scontrol: Scontrol
    namespace: str
    sink: ConfigSink | None = None
    restarter: ControllerRestarter | None = None
    sacctmgr: Sacctmgr | None = None  # when the cluster has slurmdbd
    # The Slurm release the target runs where known without asking slurmctld ("24.11": the
    # local stack's install), so what it cannot read is refused before slurmctld starts on it.
    slurm_release: str = ""
    backup: UpgradeBackup | None = None  # where apply can back up before a Slurm upgrade

    @property
    def nodes(self) -> NodeControl:
        """Node drains and states: over slurmrestd where it can, scontrol otherwise."""
        return NodeControl(self.slurm, self.scontrol)
