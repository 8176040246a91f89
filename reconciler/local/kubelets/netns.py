"""The kubelet cluster's namespaces: one network namespace for the whole cluster, and one
mount namespace per Node.

Network: `ip netns add sr-<hash>`; inside it a bridge `sr-nodes` holding the control plane's
address (API server, cluster DNS), and per Node a veth pair whose inner end carries the Node's
address (kubelet refuses a loopback node IP, and the API server dials it for logs and exec).
Every Node's Pod bridge is in the same namespace, so Pods of all Nodes route to each other
there; no route leads out of it, so nothing reaches or leaves the machine.

Mounts: a Node's kubelet and containerd must see each other's mounts (Secret volumes are
tmpfs mounts kubelet makes and runc binds into the container), while two Nodes must not share
/var/lib/kubelet, /var/log/pods or /run/containerd (paths kubelet 1.20 and containerd's shims
hard-code). Each Node therefore gets a persistent mount namespace (a bind-mounted nsfs file
under the runtime directory) where its own directories are bound over /var/lib, /var/log and
/run; whatever it mounts later stays inside it and goes away with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import LocalStackError

NETNS_DIR = Path("/run/netns")
# `ip netns exec NAME` binds the files of /etc/netns/NAME over /etc: there, a resolv.conf
# naming the cluster DNS lets tools run inside the namespace resolve Service names.
ETC_NETNS_DIR = Path("/etc/netns")
NODES_BRIDGE = "sr-nodes"
CLONE_NEWNET = 0x40000000


def netns_name(runtime_dir: Path) -> str:
    """One name per runtime directory, short and stable (`down` from another process finds
    it again)."""
    return "sr-" + hashlib.sha256(str(runtime_dir).encode()).hexdigest()[:10]


def _run(argv: Sequence[str]) -> None:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise LocalStackError(f"`{' '.join(argv)}` failed: {done.stderr.strip()[-400:]}")


@dataclass(frozen=True)
class NodeLink:
    """A Node's interface in the cluster's network namespace."""

    name: str  # interface name (at most 15 characters)
    address: str


@dataclass(frozen=True)
class ClusterNetwork:
    name: str
    gateway: str  # the control plane's address on the bridge
    prefix: int

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    @property
    def etc(self) -> Path:
        return ETC_NETNS_DIR / self.name

    def exists(self) -> bool:
        return self.path.exists()

    def create(self, nodes: Sequence[NodeLink], search: Sequence[str] = (),
               services: str | None = None) -> None:  # fmt: skip
        """The namespace, its bridge and Node links; `ip netns exec` there resolves with the
        cluster DNS (the gateway address) and these search domains. `services`: the Service
        range, routed onto the bridge so that a connection made in the namespace itself gets
        past its first route lookup to kube-proxy's NAT (Pods' traffic is NATed before
        routing; a local process's is not)."""
        if self.exists():
            raise LocalStackError(
                f"network namespace {self.name} exists already",
                hint=f"`reconciler local down`, or `ip netns del {self.name}`",
            )
        _run(["ip", "netns", "add", self.name])
        ip = ["ip", "-n", self.name]
        _run([*ip, "link", "set", "lo", "up"])
        _run([*ip, "link", "add", NODES_BRIDGE, "type", "bridge"])
        _run([*ip, "addr", "add", f"{self.gateway}/{self.prefix}", "dev", NODES_BRIDGE])
        _run([*ip, "link", "set", NODES_BRIDGE, "up"])
        if services:
            _run([*ip, "route", "add", services, "dev", NODES_BRIDGE, "src", self.gateway])
        for node in nodes:
            peer = f"{node.name}-br"
            _run([*ip, "link", "add", node.name, "type", "veth", "peer", "name", peer])
            _run([*ip, "link", "set", peer, "master", NODES_BRIDGE, "up"])
            _run([*ip, "addr", "add", f"{node.address}/32", "dev", node.name])
            _run([*ip, "link", "set", node.name, "up"])
        # Routing between the Nodes' Pod bridges; kube-proxy's Service NAT needs the two below.
        for key in ("net.ipv4.ip_forward=1", "net.ipv4.conf.all.route_localnet=1"):
            _run(["ip", "netns", "exec", self.name, "sysctl", "-q", "-w", key])
        self.etc.mkdir(parents=True, exist_ok=True)
        (self.etc / "resolv.conf").write_text(
            f"nameserver {self.gateway}\n" + (f"search {' '.join(search)}\n" if search else "")
            + "options ndots:5\n"
        )  # fmt: skip

    def delete(self) -> bool:
        """Remove the namespace (its interfaces go with it once no process is left in it)."""
        if self.etc.is_dir():
            (self.etc / "resolv.conf").unlink(missing_ok=True)
            self.etc.rmdir()
            with contextlib.suppress(OSError):  # made by create; others' entries keep it
                ETC_NETNS_DIR.rmdir()
        if not self.exists():
            return False
        _run(["ip", "netns", "del", self.name])
        return True


class MountNamespaces:
    """Persistent mount namespaces, one file each under `holder` (made a private mount: a
    namespace can only be bound onto a mount that does not propagate)."""

    def __init__(self, holder: Path) -> None:
        self.holder = holder

    def path(self, name: str) -> Path:
        return self.holder / f"{name}.mnt"

    def create(self, name: str, binds: Mapping[Path, str]) -> Path:
        """A new mount namespace with each host directory of `binds` over its target."""
        self._prepare_holder()
        ns = self.path(name)
        ns.touch()
        script = "set -e\n" + "".join(
            f'mount --bind "{source}" "{target}"\n' for source, target in binds.items()
        )
        for source in binds:
            source.mkdir(parents=True, exist_ok=True)
        _run(["unshare", f"--mount={ns}", "--propagation", "private", "sh", "-c", script])
        return ns

    def delete_all(self) -> list[str]:
        """Unbind every namespace file and the holder; what was removed."""
        removed = []
        for ns in sorted(self.holder.glob("*.mnt")) if self.holder.is_dir() else []:
            if _is_mountpoint(ns):
                _run(["umount", str(ns)])
                removed.append(ns.stem)
            ns.unlink(missing_ok=True)
        if _is_mountpoint(self.holder):
            _run(["umount", str(self.holder)])
        return removed

    def _prepare_holder(self) -> None:
        self.holder.mkdir(parents=True, exist_ok=True)
        if not _is_mountpoint(self.holder):
            _run(["mount", "--bind", str(self.holder), str(self.holder)])
            _run(["mount", "--make-private", str(self.holder)])


def _is_mountpoint(path: Path) -> bool:
    target = os.path.realpath(path)
    with open("/proc/self/mountinfo") as mounts:
        return any(line.split()[4] == target for line in mounts)


def wrapper(network: ClusterNetwork, mount_ns: Path | None = None) -> list[str]:
    """The argv prefix that runs a program inside the cluster's network namespace (and a
    Node's mount namespace). nsenter rather than `ip netns exec`: the latter remounts /sys,
    which hides the cgroup hierarchy kubelet and runc need."""
    argv = ["nsenter", f"--net={network.path}"]
    return [*argv, f"--mount={mount_ns}"] if mount_ns is not None else argv


_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def inside(network: ClusterNetwork) -> Iterator[None]:
    """The calling thread inside the network namespace (sockets it makes belong there) until
    the block ends. Per thread: the rest of the process stays where it was."""
    with open("/proc/thread-self/ns/net") as own, open(network.path) as target:
        _setns(target.fileno())
        try:
            yield
        finally:
            _setns(own.fileno())


def _setns(fd: int) -> None:
    # Python 3.11 has no os.setns.
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise LocalStackError(f"setns: {os.strerror(errno)}")
