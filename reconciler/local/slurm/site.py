"""The site part of a local Slurm cluster: where its files live, which ports it uses, and the
slurm.conf keys that tie a cluster to this machine (`local_site_settings`).

Plain data and text; nothing here starts a process. The daemons are in slurm.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import pwd
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DB_USER = "slurm"
DB_NAME = "slurm_acct_db"


@dataclass(frozen=True)
class SlurmPaths:
    """Every file and directory of one local Slurm cluster, under `root`."""

    root: Path

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def dev(self) -> Path:
        return self.root / "dev"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def munge(self) -> Path:
        return self.root / "munge"

    @property
    def mariadb(self) -> Path:
        return self.root / "mariadb"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def gres_conf(self) -> Path:
        return self.etc / "gres.conf"

    @property
    def slurmdbd_conf(self) -> Path:
        return self.etc / "slurmdbd.conf"

    @property
    def jwt_key(self) -> Path:
        return self.etc / "jwt_hs256.key"

    @property
    def munge_socket(self) -> Path:
        return self.munge / "munge.sock"

    @property
    def munge_key(self) -> Path:
        return self.munge / "munge.key"

    @property
    def mariadb_socket(self) -> Path:
        return self.mariadb / "mysql.sock"

    def gpu_device(self, index: int) -> Path:
        return self.dev / f"gpu{index}"

    def slurmd_log(self, node: str) -> Path:
        return self.log / f"slurmd-{node}.log"


@dataclass(frozen=True)
class SlurmPorts:
    slurmctld: int
    slurmd: int  # SlurmdPort: the default for node lines without Port=
    slurmrestd: int
    slurmdbd: int
    mariadb: int
    ssh: int = 0  # the login Pod's sshd (0 in a stack recorded before there was one)
    nodes: Mapping[str, int] = field(default_factory=dict)  # Port= of each declared node

    def to_json(self) -> dict[str, object]:
        return {**{k: v for k, v in vars(self).items() if k != "nodes"}, "nodes": dict(self.nodes)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SlurmPorts:
        fields = {k: int(v) for k, v in data.items() if k != "nodes"}
        nodes = {str(k): int(v) for k, v in data.get("nodes", {}).items()}
        return cls(**fields, nodes=nodes)


@dataclass(frozen=True)
class SlurmSite:
    """What a slurm.conf renderer needs before `up_slurm`: paths, ports and the site settings."""

    paths: SlurmPaths
    ports: SlurmPorts
    settings: dict[str, str]
    accounting: bool
    cluster_name: str
    # PATH and LD_LIBRARY_PATH that make its clients (scontrol) the release's own, for the
    # scripts slurmctld runs (their environment has neither).
    client_env: dict[str, str] = field(default_factory=dict)


def current_user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def local_site_settings(
    paths: SlurmPaths, ports: SlurmPorts, accounting: bool | None, *, cluster_name: str = "local"
) -> dict[str, str]:
    """The slurm.conf keys that tie a cluster to this machine's runtime dir and ports;
    `accounting` None leaves accounting to the rendered config (see accounting_settings)."""
    user = current_user()
    settings = {
        "ClusterName": cluster_name,
        "SlurmctldHost": "localhost(127.0.0.1)",
        "SlurmctldPort": str(ports.slurmctld),
        "SlurmdPort": str(ports.slurmd),
        "SlurmUser": user,
        "SlurmdUser": user,
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "AuthInfo": f"socket={paths.munge_socket}",
        "AuthAltTypes": "auth/jwt",
        "AuthAltParameters": f"jwt_key={paths.jwt_key}",
        # Loopback only: several clusters (and other people's) share this host.
        "CommunicationParameters": "NoCtldInAddrAny,NoInAddrAny",
        "StateSaveLocation": str(paths.state),
        "SlurmdSpoolDir": str(paths.spool / "%n"),
        "SlurmctldPidFile": str(paths.run / "slurmctld.pid"),
        "SlurmdPidFile": str(paths.run / "slurmd-%n.pid"),
        "SlurmctldLogFile": str(paths.log / "slurmctld.log"),
        "SlurmdLogFile": str(paths.log / "slurmd-%n.log"),
        # Fake nodes claim more CPUs/memory/GPUs than this machine has.
        "SlurmdParameters": "config_overrides",
        "GresTypes": "gpu",
        # No cgroup hierarchy to manage in a container. pgid, not linuxproc: linuxproc tracks
        # the process tree and loses a job's children when the batch shell dies first (a cancel
        # right after RUNNING left `sleep` processes behind); pgid kills the whole group.
        "ProctrackType": "proctrack/pgid",
        "TaskPlugin": "task/none",
        "JobAcctGatherType": "jobacct_gather/none",
        "MailProg": "/bin/true",  # no mail server
        # All nodes share one host: slurmctld talks to each slurmd directly, no forwarding tree.
        "TreeWidth": "65533",
        # A slurmd the node agent (re)starts must bring its node back without an admin.
        "ReturnToService": "2",
    }
    settings.update(accounting_settings(paths, ports, accounting))
    return settings


def accounting_settings(
    paths: SlurmPaths, ports: SlurmPorts, accounting: bool | None
) -> dict[str, str]:
    if accounting is None:  # the config decides; if it is on, slurmctld finds munge here
        return {"AccountingStoragePass": str(paths.munge_socket)}
    if not accounting:
        return {"AccountingStorageType": "accounting_storage/none"}
    return {
        "AccountingStorageType": "accounting_storage/slurmdbd",
        "AccountingStorageHost": "localhost",
        "AccountingStoragePort": str(ports.slurmdbd),
        # With slurmdbd and munge, this is where the MUNGE socket is.
        "AccountingStoragePass": str(paths.munge_socket),
    }


def local_dbd_site(paths: SlurmPaths) -> dict[str, str]:
    """The slurmdbd.conf keys that tie a rendered slurmdbd to this machine (its ports and
    database host come with the profile's)."""
    return {
        "AuthInfo": f"socket={paths.munge_socket}",
        "AuthAltParameters": f"jwt_key={paths.jwt_key}",
        "DbdHost": "localhost",  # slurmdbd starts only on the host DbdHost names
        "DbdAddr": "127.0.0.1",
        "SlurmUser": current_user(),
        "LogFile": str(paths.log / "slurmdbd.log"),
        "PidFile": str(paths.run / "slurmdbd.pid"),
        "DebugLevel": "info",
    }


def render_settings(settings: Mapping[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def slurmdbd_conf(paths: SlurmPaths, ports: SlurmPorts, db_password: str) -> str:
    return render_settings({
        "AuthType": "auth/munge",
        "AuthInfo": f"socket={paths.munge_socket}",
        "AuthAltTypes": "auth/jwt",
        "AuthAltParameters": f"jwt_key={paths.jwt_key}",
        "DbdHost": "localhost",
        "DbdAddr": "127.0.0.1",
        "DbdPort": str(ports.slurmdbd),
        "SlurmUser": current_user(),
        "LogFile": str(paths.log / "slurmdbd.log"),
        "PidFile": str(paths.run / "slurmdbd.pid"),
        "DebugLevel": "info",
        "StorageType": "accounting_storage/mysql",
        "StorageHost": "127.0.0.1",
        "StoragePort": str(ports.mariadb),
        "StorageUser": DB_USER,
        "StoragePass": db_password,
        "StorageLoc": DB_NAME,
    })  # fmt: skip


def make_fake_gpus(paths: SlurmPaths, count: int) -> list[Path]:
    """Device "files" for gres/gpu: symlinks to /dev/null (File= must be a char device)."""
    paths.dev.mkdir(parents=True, exist_ok=True)
    devices = []
    for index in range(count):
        device = paths.gpu_device(index)
        if not device.is_symlink():
            device.symlink_to("/dev/null")
        devices.append(device)
    return devices


def fake_gres_conf(paths: SlurmPaths, gpus_per_node: Mapping[str, int]) -> str:
    """gres.conf for fake GPUs; creates the device symlinks it names."""
    make_fake_gpus(paths, max(gpus_per_node.values(), default=0))
    lines = ["AutoDetect=off"]
    for node, gpus in gpus_per_node.items():
        if gpus > 0:
            lines.append(f"NodeName={node} Name=gpu File={paths.dev}/gpu[0-{gpus - 1}]")
    return "\n".join(lines) + "\n"


def mint_jwt(key_file: Path, user: str, lifetime: int = 3600) -> str:
    """An HS256 token slurmrestd accepts for `user` (header X-SLURM-USER-TOKEN)."""
    now = int(time.time())

    def encode(part: bytes) -> bytes:
        return base64.urlsafe_b64encode(part).rstrip(b"=")

    header = encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = encode(json.dumps({"exp": now + lifetime, "iat": now, "sun": user}).encode())
    signing_input = header + b"." + payload
    signature = hmac.new(key_file.read_bytes(), signing_input, hashlib.sha256).digest()
    return (signing_input + b"." + encode(signature)).decode()
