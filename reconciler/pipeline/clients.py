"""The typed target a plan and apply go through: the clients of one cluster (Kubernetes,
slurmrestd, scontrol, sacctmgr), connected once by whoever turned the where-flags into them
(cli/where.py) and reused for every plan (a daemon: every convergence)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from reconciler.adapters.kube import Kube
from reconciler.adapters.sacctmgr import Sacctmgr
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.apply.controller import DeploymentRestarter
from reconciler.apply.target import ConfigSink, Target, UpgradeBackup
from reconciler.compile.profile import Profile

# The profile to compile for, given the Slurm nodes a config declares (asked only where the
# profile depends on them: the local stack gives a new node a port of its own).
ProfileOf = Callable[[Callable[[], Sequence[str]]], Profile]


def cluster_profile(_declared: Callable[[], Sequence[str]]) -> Profile:
    return Profile()


@dataclass(frozen=True)
class Clients:
    kube: Kube
    slurm: SlurmRestApi
    scontrol: Scontrol
    answers: Callable[[], bool]  # slurmctld answers (the restarter waits for it)
    sink: ConfigSink | None = None
    sacctmgr: Sacctmgr | None = None  # when the cluster has slurmdbd
    # The Slurm release the target runs where known without asking slurmctld (see Target).
    slurm_release: str = ""
    profile_of: ProfileOf = field(default=cluster_profile)
    backup: UpgradeBackup | None = None  # before a Slurm upgrade (see Target)

    def target(self, namespace: str, release: str = "") -> Target:
        """Where a plan of `namespace` is made and applied; with `release`, a controller
        Deployment of that release is what apply restarts when NodeName lines change (a
        slurmctld outside Kubernetes is never restarted). Asked again at every plan: the
        Deployment may have come up since (a bootstrap)."""
        restarter = (
            DeploymentRestarter.if_ours(self.kube, namespace, release, self.answers)
            if release
            else None
        )
        return Target(
            kube=self.kube, slurm=self.slurm, scontrol=self.scontrol, namespace=namespace,
            sink=self.sink, restarter=restarter, sacctmgr=self.sacctmgr,
            slurm_release=self.slurm_release, backup=self.backup,
        )  # fmt: skip
