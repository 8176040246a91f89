"""Where the compiled cluster runs: the one input that differs between a real cluster and the
embedded local stack. The compiler is the same; only these facts change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

CLUSTER = "cluster"
LOCAL = "local"

# slurm.conf settings of a slurmd/slurmctld image in a Kubernetes cluster (SUNK's layout).
CLUSTER_SITE: Mapping[str, str] = MappingProxyType(
    {
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "AuthAltTypes": "auth/jwt",
        "AuthAltParameters": "jwt_key=/etc/slurm-jwt/jwt_hs256.key",
        "StateSaveLocation": "/var/spool/slurmctld",
        "SlurmdSpoolDir": "/var/spool/slurmd",
        "SlurmctldPidFile": "/run/slurmctld.pid",
        "SlurmdPidFile": "/run/slurmd.pid",
        "SlurmUser": "slurm",
    }
)


@dataclass(frozen=True)
class Profile:
    """Facts about the site the compiled config is for.

    `site` holds slurm.conf keys the site dictates (paths, auth, plugins the host supports);
    they override our defaults and the repo's slurmConfig, but not its `extraConfig`.
    `conf_dir` is where slurmd sees the mounted config (prolog.d/ and epilog.d/ below it).
    In the local profile every Slurm node runs on this host,
    so each gets NodeHostname/NodeAddr and its own Port, taken from `node_ports` (the local
    stack keeps those stable across runs) or counted up from `node_port_base`.
    """

    name: str = CLUSTER
    controller_host: str | None = None
    slurmctld_port: int = 6817
    slurmd_port: int = 6818
    node_hostname: str | None = None
    node_addr: str | None = None
    node_ports: Mapping[str, int] = field(default_factory=dict)
    node_port_base: int | None = None
    gres_device_dir: str | None = None
    conf_dir: str = "/etc/slurm"
    site: Mapping[str, str] = field(default_factory=lambda: dict(CLUSTER_SITE))
    dbd_site: Mapping[str, str] = field(default_factory=dict)  # slurmdbd.conf overrides

    @classmethod
    def local(
        cls,
        *,
        site: Mapping[str, str],
        slurmctld_port: int,
        slurmd_port: int,
        node_port_base: int,
        gres_device_dir: str,
        conf_dir: str,
        node_ports: Mapping[str, int] | None = None,
        dbd_site: Mapping[str, str] | None = None,
    ) -> Profile:
        return cls(
            name=LOCAL,
            controller_host="localhost(127.0.0.1)",
            slurmctld_port=slurmctld_port,
            slurmd_port=slurmd_port,
            node_hostname="localhost",
            node_addr="127.0.0.1",
            node_ports=dict(node_ports or {}),
            node_port_base=node_port_base,
            gres_device_dir=gres_device_dir,
            conf_dir=conf_dir,
            site=dict(site),
            dbd_site=dict(dbd_site or {}),
        )

    @property
    def is_local(self) -> bool:
        return self.name == LOCAL

    def port_for(self, node: str, index: int) -> int | None:
        """The slurmd port of a node in the local profile (None: the cluster-wide SlurmdPort)."""
        if not self.is_local:
            return None
        if node in self.node_ports:
            return self.node_ports[node]
        base = self.node_port_base if self.node_port_base is not None else self.slurmd_port + 1
        return base + index
