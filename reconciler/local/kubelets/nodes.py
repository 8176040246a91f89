"""The Nodes of `local up --kubelet`: what each kubelet, and the cluster's one kube-proxy and
kube-scheduler, are started with, and the client identities they present.

Addresses (all inside the cluster's network namespace, netns.py):

    10.213.0.1          the control plane: API server, cluster DNS (dnsmasq)
    10.213.0.(10+i)     Node i's address (kubelet API on :10250)
    10.214.i.0/24       Node i's Pods, on its CNI bridge cni-kn<i>
    10.96.0.0/12        Services (kube-proxy, iptables mode)

Identities are client certificates from the local CA, which the API server already trusts:
`system:node:<name>` in `system:nodes` (the Node authorizer's), `system:kube-proxy` (bound to
system:node-proxier by default), and the API server's own for dialling kubelets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import LocalStackError
from reconciler.local.kube.control_plane import KubeBinaries, KubePaths
from reconciler.local.kube.pki import client_cert

CONTROL_PLANE_ADDRESS = "10.213.0.1"
NODES_PREFIX = 24
POD_CIDR = "10.214.0.0/16"
CLUSTER_DOMAIN = "cluster.local"
KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248


@dataclass(frozen=True)
class KubeletNode:
    index: int  # 1-based
    name: str  # the Node's name
    base: Path  # its directory in the runtime directory

    @property
    def address(self) -> str:
        return f"10.213.0.{10 + self.index}"

    @property
    def link(self) -> str:
        return f"kn{self.index}"

    @property
    def bridge(self) -> str:
        return f"cni-kn{self.index}"

    @property
    def pod_subnet(self) -> str:
        return f"10.214.{self.index}.0/24"

    @property
    def kubeconfig(self) -> Path:
        return self.base / "kubelet.kubeconfig"

    @property
    def config(self) -> Path:
        return self.base / "kubelet.yaml"

    @property
    def resolv_conf(self) -> Path:
        """The 'host' resolver kubelet hands Pods with dnsPolicy Default: none (nothing
        outside the cluster resolves)."""
        return self.base / "resolv.conf"

    def host_dirs(self) -> dict[Path, str]:
        """The Node's own directories, bound over these paths in its mount namespace."""
        return {self.base / "var-lib": "/var/lib", self.base / "var-log": "/var/log",
                self.base / "run": "/run"}  # fmt: skip

    def to_json(self) -> dict[str, object]:
        return {"index": self.index, "name": self.name, "base": str(self.base)}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> KubeletNode:
        return cls(int(str(data["index"])), str(data["name"]), Path(str(data["base"])))


def make_nodes(runtime_dir: Path, count: int) -> list[KubeletNode]:
    if not 1 <= count <= 200:
        raise LocalStackError(f"--nodes {count}: the kubelet cluster takes 1 to 200 Nodes")
    return [KubeletNode(i, f"node-{i}", runtime_dir / "nodes" / f"node-{i}")
            for i in range(1, count + 1)]  # fmt: skip


def write_kubeconfig(dest: Path, server: str, ca: Path, cert: Path, key: Path) -> Path:
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": server,
                                                   "certificate-authority": str(ca)}}],
        "users": [{"name": "me", "user": {"client-certificate": str(cert),
                                          "client-key": str(key)}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "me"}}],
        "current-context": "local",
    }  # fmt: skip
    dest.write_text(json.dumps(config, indent=2) + "\n")
    return dest


def kubelet_config(node: KubeletNode, ca: Path) -> dict[str, object]:
    """KubeletConfiguration: cgroupfs without per-QoS cgroups (runc puts each container in a
    cgroup of its own), no swap check, the cluster DNS, only the API server (by the CA's
    certificate) may call its API; its iptables are kube-proxy's alone."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": node.address, "port": KUBELET_PORT, "readOnlyPort": 0,
        "healthzBindAddress": node.address, "healthzPort": KUBELET_HEALTHZ_PORT,
        "cgroupDriver": "cgroupfs", "cgroupsPerQOS": False, "enforceNodeAllocatable": [],
        "failSwapOn": False,
        "clusterDNS": [CONTROL_PLANE_ADDRESS], "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(node.resolv_conf),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(ca)}},
        "authorization": {"mode": "AlwaysAllow"},
        "makeIPTablesUtilChains": False,
        # A small test bed on a shared disk: don't evict Pods because other work fills it.
        "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "nodeStatusUpdateFrequency": "4s",
        "syncFrequency": "10s",
    }  # fmt: skip


def write_node_files(node: KubeletNode, paths: KubePaths, api_port: int) -> None:
    node.base.mkdir(parents=True, exist_ok=True)
    cert, key = client_cert(paths.pki, f"kubelet-{node.name}", f"system:node:{node.name}",
                            "system:nodes")  # fmt: skip
    server = f"https://{CONTROL_PLANE_ADDRESS}:{api_port}"
    write_kubeconfig(node.kubeconfig, server, paths.ca_cert, cert, key)
    node.config.write_text(json.dumps(kubelet_config(node, paths.ca_cert), indent=2) + "\n")
    node.resolv_conf.write_text("")


def kubelet_argv(
    binary: Path, node: KubeletNode, socket: Path, labels: dict[str, str]
) -> list[str]:
    argv = [
        str(binary), f"--config={node.config}", f"--kubeconfig={node.kubeconfig}",
        "--container-runtime=remote", f"--container-runtime-endpoint=unix://{socket}",
        f"--node-ip={node.address}", f"--hostname-override={node.name}",
        # In the Node's mount namespace, its own directory (netns.py).
        "--root-dir=/var/lib/kubelet", "--cert-dir=/var/lib/kubelet/pki",
        "--v=1",
    ]  # fmt: skip
    if labels:
        argv.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
    return argv


def kube_proxy_argv(binary: Path, kubeconfig: Path, hostname: str) -> list[str]:
    """iptables mode. --masquerade-all: a Pod calling a Service whose endpoint is on its own
    bridge gets the reply back through NAT (no reliance on br_netfilter). The conntrack
    sysctls are left as they are (0 = don't set)."""
    return [
        str(binary), f"--kubeconfig={kubeconfig}", f"--hostname-override={hostname}",
        f"--bind-address={CONTROL_PLANE_ADDRESS}",
        "--proxy-mode=iptables", f"--cluster-cidr={POD_CIDR}", "--masquerade-all",
        "--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0",
        "--conntrack-tcp-timeout-close-wait=0",
        f"--healthz-bind-address={CONTROL_PLANE_ADDRESS}:10256",
        "--metrics-bind-address=127.0.0.1:10249", "--v=1",
    ]  # fmt: skip


def kube_scheduler_argv(binary: Path, kubeconfig: Path) -> list[str]:
    return [str(binary), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
            "--port=0", "--secure-port=0", "--v=1"]  # fmt: skip


def extra_binaries(binaries: KubeBinaries) -> dict[str, Path]:
    """kubelet, kube-proxy and kube-scheduler beside the cached kube-apiserver."""
    built = binaries.apiserver.parent
    found = {name: built / name for name in ("kubelet", "kube-proxy", "kube-scheduler")}
    missing = [str(p) for p in found.values() if not p.exists()]
    if missing:
        raise LocalStackError(
            "missing: " + ", ".join(missing),
            hint="run `bash tools/setup.sh` (it builds kubelet and kube-proxy too)",
        )
    return found
