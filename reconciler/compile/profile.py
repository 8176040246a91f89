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
        # slurmctld runs as SlurmUser, who may not write /run: an emptyDir of its own
        # (control_plane.py); never the state claim, where a new slurmctld would read an old
        # PID (its own, 1, in a new container) and kill it.
        "SlurmctldPidFile": "/run/slurmctld/slurmctld.pid",
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
    The control plane's ports (`rest_port` ... `ssh_port`) and `listen_address` go into its
    Pods and Services; on the local stack every daemon has a loopback port of its own.
    `service_host`, when set, is where clients reach a daemon we render (slurmdbd from
    slurmctld, MySQL from slurmdbd) instead of its Service's name.
    """

    name: str = CLUSTER
    controller_host: str | None = None
    slurmctld_port: int = 6817
    slurmd_port: int = 6818
    rest_port: int = 6820
    dbd_port: int = 6819
    mysql_port: int = 3306
    ssh_port: int = 22
    listen_address: str = "0.0.0.0"
    service_host: str | None = None
    node_hostname: str | None = None
    node_addr: str | None = None
    node_ports: Mapping[str, int] = field(default_factory=dict)
    node_port_base: int | None = None
    gres_device_dir: str | None = None
    conf_dir: str = "/etc/slurm"
    site: Mapping[str, str] = field(default_factory=lambda: dict(CLUSTER_SITE))
    dbd_site: Mapping[str, str] = field(default_factory=dict)  # slurmdbd.conf overrides
    # Environment for the scripts slurmctld runs to find its clients (scontrol), where they
    # are not on the default PATH (the local stack's own Slurm build).
    client_env: Mapping[str, str] = field(default_factory=dict)

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
        control_ports: Mapping[str, int] | None = None,
        client_env: Mapping[str, str] | None = None,
    ) -> Profile:
        """`control_ports`: rest, dbd, mysql and ssh ports (the cluster's where missing)."""
        ports = dict(control_ports or {})
        return cls(
            name=LOCAL,
            controller_host="localhost(127.0.0.1)",
            slurmctld_port=slurmctld_port,
            slurmd_port=slurmd_port,
            rest_port=ports.get("rest", cls.rest_port),
            dbd_port=ports.get("dbd", cls.dbd_port),
            mysql_port=ports.get("mysql", cls.mysql_port),
            ssh_port=ports.get("ssh", cls.ssh_port),
            listen_address="127.0.0.1",
            service_host="127.0.0.1",
            node_hostname="localhost",
            node_addr="127.0.0.1",
            node_ports=dict(node_ports or {}),
            node_port_base=node_port_base,
            gres_device_dir=gres_device_dir,
            conf_dir=conf_dir,
            site=dict(site),
            dbd_site=dict(dbd_site or {}),
            client_env=dict(client_env or {}),
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
