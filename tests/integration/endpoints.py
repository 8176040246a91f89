"""How tests and tools reach a running local stack: plain data, no clients."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SlurmEndpoints:
    rest_url: str  # e.g. "http://127.0.0.1:PORT" (no version path)
    jwt_key: Path  # the HS256 key file slurmctld and slurmrestd use
    slurm_conf: Path
    env: dict[str, str]  # environment for scontrol/sbatch/sinfo on this cluster (SLURM_CONF=...)
    runtime_dir: Path
    node_names: list[str]  # nodes that are up (IDLE) at session start
    partition: str  # default partition name
    user: str  # a Slurm user name tokens can be minted for (e.g. "root")


@dataclass(frozen=True)
class KubeEndpoints:
    kubeconfig: Path
    server: str  # https://127.0.0.1:PORT
    token: str

    def __repr__(self) -> str:
        # Keep the token out of pytest failure output and logs.
        return f"KubeEndpoints(kubeconfig={self.kubeconfig!r}, server={self.server!r}, token=***)"
