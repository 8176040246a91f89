"""`local up --kubelet`: a Kubernetes cluster of real kubelets on containerd, on this machine.

What runs where (all in one network namespace, netns.py; each Node also in a mount namespace
of its own):

    etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, dnsmasq
    per Node: containerd (CRI, runc, CNI bridge) and kubelet

The `up` process relays 127.0.0.1:<api port> (and etcd's) into the namespace (forwarder.py) and
feeds dnsmasq (cluster_dns.py). `down` stops kubelets, then every container of every Node (by
its cgroup), the shims, containerd, the cluster's daemons; after the control plane, it
removes the mount and network namespaces and the containers' cgroups.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from reconciler.adapters.kube import Kube
from reconciler.errors import LocalStackError
from reconciler.local.agent.placement import NodeTemplate
from reconciler.local.kube import control_plane as kube_module
from reconciler.local.kube.control_plane import KubePaths, KubePorts, RealNodes
from reconciler.local.kube.pki import client_cert, make_pki
from reconciler.local.kubelets import containerd as crt
from reconciler.local.kubelets.cluster_dns import DnsFeeder, dnsmasq_argv, wait_dnsmasq_ready
from reconciler.local.kubelets.forwarder import Forwarder
from reconciler.local.kubelets.netns import (
    ClusterNetwork,
    MountNamespaces,
    NodeLink,
    netns_name,
    wrapper,
)
from reconciler.local.kubelets.node_resources import VolumeProvisioner, advertise_gpus
from reconciler.local.kubelets.nodes import (
    CLUSTER_DOMAIN,
    CONTROL_PLANE_ADDRESS,
    NODES_PREFIX,
    KubeletNode,
    extra_binaries,
    kube_proxy_argv,
    kube_scheduler_argv,
    kubelet_argv,
    make_nodes,
    write_kubeconfig,
    write_node_files,
)
from reconciler.local.kubelets.pause_image import PAUSE_IMAGE, pause_archive
from reconciler.local.processes import Supervisor, is_running, processes_referencing
from reconciler.local.stack_record import StackRecord

SECTION = "kubelet"
CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTAINERD_READY_SECONDS = 30.0
NODES_READY_SECONDS = 120.0
KUBELET_GRACE_SECONDS = 10.0

UpKube = Callable[[RealNodes, Callable[[KubePorts], None]], dict[str, float]]


class KubeletCluster:
    def __init__(self, runtime_dir: Path, supervisor: Supervisor, kube_paths: KubePaths,
                 record: StackRecord) -> None:  # fmt: skip
        self.runtime_dir = runtime_dir
        self.supervisor = supervisor
        self.kube_paths = kube_paths
        self.record = record
        self.network = ClusterNetwork(netns_name(runtime_dir), CONTROL_PLANE_ADDRESS, NODES_PREFIX)
        self.mounts = MountNamespaces(runtime_dir / "ns")
        self.forwarder: Forwarder | None = None
        self.dns: DnsFeeder | None = None
        self.volumes: VolumeProvisioner | None = None

    @property
    def nodes(self) -> list[KubeletNode]:
        section = self.record.section(SECTION) or {}
        return [KubeletNode.from_json(n) for n in section.get("nodes", [])]

    @property
    def dns_hosts(self) -> Path:
        return self.runtime_dir / "dns" / "hosts"

    # ---- up -----------------------------------------------------------------------------

    def up(self, count: int, up_kube: UpKube, images: Sequence[Path] = (),
           shapes: Sequence[NodeTemplate] = ()) -> dict[str, float]:  # fmt: skip
        """Namespaces, control plane, Nodes, kube-proxy and DNS; seconds per step. On failure
        the caller's `down` removes whatever was made (it is all recorded first).

        `shapes`: the labels and GPUs of Node i are shapes[i % len(shapes)] (the node agent's
        templates of a repo, so its node definitions' affinity finds Nodes)."""
        started = time.monotonic()
        _check_runtime_dir(self.runtime_dir)
        binaries = extra_binaries(kube_module.find_binaries())
        for archive in images:  # before anything starts
            crt.archive_image_names(archive)
        nodes = make_nodes(self.runtime_dir, count)
        shape = {n.name: shapes[i % len(shapes)] for i, n in enumerate(nodes)} if shapes else {}
        self.record.data[SECTION] = {"netns": self.network.name,
                                     "nodes": [n.to_json() for n in nodes]}  # fmt: skip
        self.record.save()
        timings: dict[str, float] = {}
        self.network.create([NodeLink(n.link, n.address) for n in nodes],
                            search=[f"svc.{CLUSTER_DOMAIN}", CLUSTER_DOMAIN],
                            services=kube_module.SERVICE_CLUSTER_IP_RANGE)  # fmt: skip
        for name in ("etcd", "kube-apiserver", "kube-controller-manager"):
            self.supervisor.wrappers[name] = wrapper(self.network)
        make_pki(self.kube_paths.pki, [CONTROL_PLANE_ADDRESS])
        placement = RealNodes(
            advertise_address=CONTROL_PLANE_ADDRESS,
            kubelet_client=client_cert(self.kube_paths.pki, "apiserver-kubelet-client",
                                       "kube-apiserver-kubelet-client", "system:masters"),
        )  # fmt: skip
        timings["namespaces"] = time.monotonic() - started
        plane = up_kube(placement, self._forward)
        timings["control plane"] = plane["total"]
        api_port = self._api_port()
        step = time.monotonic()
        self._start_cluster_daemons(binaries)
        archives = [pause_archive(self.runtime_dir / "images"), *images]
        for node in nodes:
            self._start_containerd(node)
        # One thread per Node: unpacking is half the time, and the Nodes share no containerd.
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            list(pool.map(lambda node: self._load_images(node, archives), nodes))
        timings["containerd up, images imported"] = time.monotonic() - step
        step = time.monotonic()
        for node in nodes:
            write_node_files(node, self.kube_paths, api_port)
            labels = dict(shape[node.name].labels) if node.name in shape else {}
            self._start("kubelet-" + node.name, kubelet_argv(
                binaries["kubelet"], node, crt.ContainerdPaths(node.base).socket, labels),
                self._node_wrapper(node))  # fmt: skip
        self._start_dns()
        self._wait_nodes_ready(nodes)
        kube = Kube.from_kubeconfig(self.kube_paths.kubeconfig)
        for name, template in shape.items():
            if template.gpus:
                advertise_gpus(kube, name, template.gpus)
        self.volumes = VolumeProvisioner(kube, self.runtime_dir / "volumes")
        self.volumes.start()
        timings["Nodes Ready"] = time.monotonic() - step
        timings["total"] = time.monotonic() - started
        self.record.record_timings(SECTION, timings)
        return timings

    def _forward(self, ports: KubePorts) -> None:
        self.forwarder = Forwarder(self.network, [ports.etcd_client, ports.apiserver])
        self.forwarder.start()

    def _api_port(self) -> int:
        section = self.record.section("kube")
        assert section is not None
        return int(section["ports"]["apiserver"])

    def _start(self, name: str, argv: list[str], prefix: list[str]) -> None:
        self.supervisor.wrappers[name] = prefix
        self.supervisor.start(name, argv)

    def _node_wrapper(self, node: KubeletNode) -> list[str]:
        return wrapper(self.network, self.mounts.path(node.name))

    def _start_cluster_daemons(self, binaries: dict[str, Path]) -> None:
        admin = self.kube_paths.kubeconfig
        self._start("kube-scheduler", kube_scheduler_argv(binaries["kube-scheduler"], admin),
                    wrapper(self.network))  # fmt: skip
        cert, key = client_cert(self.kube_paths.pki, "kube-proxy", "system:kube-proxy")
        proxy_config = write_kubeconfig(
            self.runtime_dir / "kube" / "kube-proxy.kubeconfig",
            f"https://{CONTROL_PLANE_ADDRESS}:{self._api_port()}", self.kube_paths.ca_cert,
            cert, key,
        )  # fmt: skip
        proxy = kube_proxy_argv(binaries["kube-proxy"], proxy_config, "control-plane")
        self._start("kube-proxy", proxy, wrapper(self.network))

    def _start_containerd(self, node: KubeletNode) -> None:
        paths = crt.ContainerdPaths(node.base)
        crt.write_config(paths, node.name, bridge=node.bridge, subnet=node.pod_subnet,
                         sandbox_image=PAUSE_IMAGE)  # fmt: skip
        self.mounts.create(node.name, node.host_dirs())
        self._start("containerd-" + node.name, crt.containerd_argv(paths),
                    self._node_wrapper(node))  # fmt: skip

    def _wait_containerd(self, node: KubeletNode) -> None:
        paths = crt.ContainerdPaths(node.base)
        self.supervisor.wait_ready(
            "containerd-" + node.name,
            lambda: crt.containerd_ready(paths, self._node_wrapper(node)),
            timeout=CONTAINERD_READY_SECONDS,
        )

    def _load_images(self, node: KubeletNode, archives: Sequence[Path]) -> None:
        self._wait_containerd(node)
        for archive in archives:
            crt.import_image(crt.ContainerdPaths(node.base), archive,
                             wrapper=self._node_wrapper(node))  # fmt: skip

    def _start_dns(self) -> None:
        self.dns_hosts.parent.mkdir(parents=True, exist_ok=True)
        self.dns_hosts.parent.chmod(0o755)
        self.dns_hosts.write_text("")
        self.dns_hosts.chmod(0o644)
        pid_file = self.runtime_dir / "dns" / "pid"
        self._start("dnsmasq", dnsmasq_argv(self.dns_hosts, pid_file), wrapper(self.network))
        kube = Kube.from_kubeconfig(self.kube_paths.kubeconfig)

        def dnsmasq_pid() -> int | None:
            record = self.supervisor.running("dnsmasq")
            return record.pid if record else None

        wait_dnsmasq_ready(pid_file, dnsmasq_pid, self.supervisor.logfile("dnsmasq"))

        self.dns = DnsFeeder(lambda kind: list(kube.list("v1", kind).items), self.dns_hosts,
                             dnsmasq_pid)  # fmt: skip
        self.dns.start()

    def _wait_nodes_ready(self, nodes: Sequence[KubeletNode]) -> None:
        kube = Kube.from_kubeconfig(self.kube_paths.kubeconfig)
        wanted = {n.name for n in nodes}
        deadline = time.monotonic() + NODES_READY_SECONDS
        ready: set[str] = set()
        while time.monotonic() < deadline:
            ready = {n["metadata"]["name"] for n in kube.list("v1", "Node").items if _is_ready(n)}
            if wanted <= ready:
                return
            for node in nodes:
                name = "kubelet-" + node.name
                if self.supervisor.running(name) is None:
                    raise self.supervisor._failure(name, "exited before its Node was Ready")
            time.sleep(0.5)
        raise LocalStackError(
            f"Nodes not Ready after {NODES_READY_SECONDS:.0f} s: {sorted(wanted - ready)}",
            hint=f"see the kubelet-*.log and containerd-*.log in {self.supervisor.log_dir}",
        )

    # ---- down ---------------------------------------------------------------------------

    def stop_nodes(self) -> list[str]:
        """Before the control plane stops: the DNS feeder, kubelets, every container,
        containerd (and its shims), kube-proxy, dnsmasq, kube-scheduler."""
        if self.dns is not None:
            self.dns.stop()
        if self.volumes is not None:
            self.volumes.stop()
        stopped = []
        for node in self.nodes:
            if self.supervisor.stop("kubelet-" + node.name, grace=KUBELET_GRACE_SECONDS):
                stopped.append("kubelet-" + node.name)
        for node in self.nodes:
            paths = crt.ContainerdPaths(node.base)
            ids = paths.task_ids()
            _kill_cgroups(ids)
            if self.supervisor.stop("containerd-" + node.name):
                stopped.append("containerd-" + node.name)
            _kill_referencing(node.base)
            _remove_cgroups(ids)
        for name in ("kube-proxy", "dnsmasq", "kube-scheduler"):
            if self.supervisor.stop(name):
                stopped.append(name)
        return stopped

    def remove_namespaces(self) -> list[str]:
        """After every process of the cluster is gone: its mount and network namespaces."""
        if self.forwarder is not None:
            self.forwarder.stop()
            self.forwarder = None
        removed = [f"mount namespace {name}" for name in self.mounts.delete_all()]
        if self.network.delete():
            removed.append(f"network namespace {self.network.name}")
        return removed

    # ---- status and figures -------------------------------------------------------------

    def health(self) -> dict[str, bool]:
        """Each daemon of the cluster beside the control plane: running (its pidfile's
        process is alive); a Node's readiness is the API's to tell (`kubectl get nodes`)."""
        names = [f"{kind}-{node.name}" for node in self.nodes for kind in ("containerd", "kubelet")]
        names += ["kube-scheduler", "kube-proxy", "dnsmasq"]
        return {name: self.supervisor.running(name) is not None for name in names}

    def memory(self) -> dict[str, int]:
        """Resident memory in bytes: each daemon, the containers (their cgroups) and shims."""
        figures: dict[str, int] = {}
        for name in self.supervisor.names():
            record = self.supervisor.running(name)
            if record is not None:
                figures[name] = _rss(record.pid)
        shims = containers = 0
        daemons = {r.pid for r in map(self.supervisor.running, self.supervisor.names()) if r}
        for node in self.nodes:
            shims += sum(_rss(pid) for pid, _ in processes_referencing(node.base)
                         if pid not in daemons)  # fmt: skip
            containers += sum(_cgroup_memory(i) for i in crt.ContainerdPaths(node.base).task_ids())
        figures["containerd shims"] = shims
        figures["containers (cgroups)"] = containers
        return figures


def _check_runtime_dir(runtime_dir: Path) -> None:
    """The Nodes' mount namespaces bind their own directories over these: a runtime directory
    below one would vanish from the Nodes' view."""
    for hidden in {target for n in make_nodes(runtime_dir, 1) for target in n.host_dirs().values()}:
        if Path(os.path.realpath(runtime_dir)).is_relative_to(hidden):
            raise LocalStackError(
                f"runtime directory {runtime_dir} is under {hidden}, which each Node's mount "
                "namespace replaces with its own",
                hint="choose one elsewhere (the default is under /tmp)",
            )


def _is_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _container_cgroups(container_id: str) -> list[Path]:
    """The container's directory in each cgroup v1 hierarchy (runc puts it at
    /k8s.io/<id> when kubelet gives no parent, as with cgroupsPerQOS off)."""
    if not CGROUP_ROOT.is_dir():
        return []
    found = [h / crt.CRI_NAMESPACE / container_id for h in CGROUP_ROOT.iterdir()]
    return [p for p in found if p.is_dir()]


def _kill_cgroups(ids: Sequence[str]) -> None:
    """SIGKILL every process of these containers, and wait (up to 10 s) until they are gone."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = {pid for i in ids for cg in _container_cgroups(i) for pid in _procs(cg)}
        live = [pid for pid in pids if is_running(pid)]
        if not live:
            return
        for pid in live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _procs(cgroup: Path) -> list[int]:
    try:
        return [int(line) for line in (cgroup / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _remove_cgroups(ids: Sequence[str]) -> None:
    for container_id in ids:
        for cgroup in _container_cgroups(container_id):
            with contextlib.suppress(OSError):
                cgroup.rmdir()
    # The shared parent goes when nothing else's container is left in it.
    for hierarchy in CGROUP_ROOT.iterdir() if CGROUP_ROOT.is_dir() else []:
        with contextlib.suppress(OSError):
            (hierarchy / crt.CRI_NAMESPACE).rmdir()


def _kill_referencing(path: Path) -> None:
    """containerd's shims (their command line names the Node's socket) outlive containerd."""
    for pid, _ in processes_referencing(path):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while processes_referencing(path) and time.monotonic() < deadline:
        time.sleep(0.05)


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _cgroup_memory(container_id: str) -> int:
    path = CGROUP_ROOT / "memory" / crt.CRI_NAMESPACE / container_id / "memory.usage_in_bytes"
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return 0
