"""The local Kubernetes control plane: etcd, kube-apiserver and kube-controller-manager.

etcd comes from Debian (etcd-server); the two Kubernetes binaries are built from Debian's
`kubernetes` source package by setup.sh and cached per version. Everything listens on 127.0.0.1
only, on ports chosen per run. There is no kubelet and no scheduler: a harness plays the node side.

The admin token lives in two files (the apiserver's token file and the kubeconfig), both mode
600; it is never put on a command line, in the state file or in a log message.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import LocalStackError
from reconciler.local import SETUP_COMMAND
from reconciler.local.kube.pki import make_pki
from reconciler.local.processes import DEFAULT_GRACE_SECONDS, Supervisor

KUBE_VERSION = "v1.20.2"
ETCD_BINARY = Path("/usr/bin/etcd")

ADMIN_USER = "local-admin"
# Controllers that make the API behave like a cluster without touching the (fake) node side:
# namespace deletion, owner-reference GC, service accounts with tokens, Pods from StatefulSets
# and Deployments (through ReplicaSets: the controller Pod, slurmrestd, slurmdbd), and claims
# bound to the volumes the node agent makes for them.
CONTROLLERS = (
    "namespace,garbagecollector,serviceaccount,serviceaccount-token,statefulset,deployment,"
    "replicaset,persistentvolume-binder"
)
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/12"
# Service accounts only (the admin, controllers and node agent are not audited): cheap, and
# exactly the requests of a daemon running as a ServiceAccount.
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: [system:serviceaccounts]
  - level: None
"""
ETCD_READY_SECONDS = 30.0
APISERVER_READY_SECONDS = 90.0
# kube-apiserver drains open watches on SIGTERM and outlives any grace while a client
# still holds one (10 s at every `down`); it keeps no state of its own (etcd has it all),
# so it is killed soon after.
STOP_GRACE_SECONDS: dict[str, float] = {"kube-apiserver": 1.0}
CONTROLLER_MANAGER_READY_SECONDS = 60.0


@dataclass(frozen=True)
class KubeBinaries:
    etcd: Path
    apiserver: Path
    controller_manager: Path


@dataclass(frozen=True)
class KubePorts:
    etcd_client: int
    etcd_peer: int
    apiserver: int


@dataclass(frozen=True)
class KubePaths:
    """Where the control plane keeps its files inside one runtime directory."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd-data"

    @property
    def ca_cert(self) -> Path:
        return self.pki / "ca.crt"

    @property
    def token_file(self) -> Path:
        return self.pki / "tokens.csv"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    def serving_cert(self) -> tuple[Path, Path]:
        """The API server's certificate and key: it names 127.0.0.1, so the node agent's
        kubelet API serves with it too."""
        return self.pki / "apiserver.crt", self.pki / "apiserver.key"

    @property
    def audit_policy(self) -> Path:
        return self.root / "audit-policy.yaml"

    @property
    def audit_log(self) -> Path:
        """One JSON line per request a service account made: what the daemon, run as its
        ServiceAccount, really calls (tests check deploy/'s RBAC against it)."""
        return self.root / "audit.log"


def cache_dir() -> Path:
    """Where setup.sh caches built binaries (same rule as the script)."""
    override = os.environ.get("SUNK_RECONCILER_CACHE")
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "sunk-reconciler"


def find_binaries(version: str = KUBE_VERSION) -> KubeBinaries:
    """The etcd and cached Kubernetes binaries, or an error saying how to get them."""
    built = cache_dir() / "kubernetes" / version
    binaries = KubeBinaries(
        etcd=ETCD_BINARY,
        apiserver=built / "kube-apiserver",
        controller_manager=built / "kube-controller-manager",
    )
    missing = [str(p) for p in vars(binaries).values() if not os.access(p, os.X_OK)]
    if missing:
        raise LocalStackError(
            "missing local Kubernetes binaries: " + ", ".join(missing),
            hint=f"run `{SETUP_COMMAND}` (installs etcd-server, builds kube {version})",
        )
    return binaries


def server_url(ports: KubePorts) -> str:
    return f"https://127.0.0.1:{ports.apiserver}"


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def ensure_token(paths: KubePaths) -> str:
    """The admin token (system:masters), created once per runtime directory."""
    if paths.token_file.exists():
        return read_token(paths)
    token = secrets.token_urlsafe(32)
    _write_private(paths.token_file, f'{token},{ADMIN_USER},{ADMIN_USER}-uid,"system:masters"\n')
    return token


def read_token(paths: KubePaths) -> str:
    try:
        return paths.token_file.read_text().split(",", 1)[0].strip()
    except FileNotFoundError as exc:
        raise LocalStackError(f"no token file at {paths.token_file}: is the stack up?") from exc


def write_kubeconfig(paths: KubePaths, ports: KubePorts, token: str) -> Path:
    # JSON is valid YAML, and json.dumps quotes the token safely whatever its characters.
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {
            "server": server_url(ports), "certificate-authority": str(paths.ca_cert)}}],
        "users": [{"name": ADMIN_USER, "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": ADMIN_USER}}],
        "current-context": "local",
    }  # fmt: skip
    _write_private(paths.kubeconfig, json.dumps(config, indent=2) + "\n")
    return paths.kubeconfig


def etcd_argv(binaries: KubeBinaries, paths: KubePaths, ports: KubePorts) -> list[str]:
    client = f"http://127.0.0.1:{ports.etcd_client}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        str(binaries.etcd), "--name", "local", "--data-dir", str(paths.etcd_data),
        "--listen-client-urls", client, "--advertise-client-urls", client,
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", f"local={peer}", "--initial-cluster-state", "new",
        "--log-level", "warn", "--logger", "zap",
        # One member, no peers to wait for: a short election timeout makes it leader in ~0.1 s
        # instead of ~0.5-1 s.
        "--heartbeat-interval", "10", "--election-timeout", "100",
    ]  # fmt: skip


@dataclass(frozen=True)
class RealNodes:
    """The control plane of `local up --kubelet`: the API server inside the cluster's network
    namespace on every address there, dialling real kubelets with a client certificate and
    authorizing them as Nodes. The endpoints controller feeds cluster DNS, the endpoint slice
    controller kube-proxy, and the node lifecycle controller lifts the not-ready taint
    kubelet registers its Node with."""

    advertise_address: str
    kubelet_client: tuple[Path, Path]  # certificate, key
    bind_address: str = "0.0.0.0"
    authorization: str = "Node,RBAC"
    more_controllers: str = "endpoint,endpointslice,nodelifecycle"


def apiserver_argv(
    binaries: KubeBinaries,
    paths: KubePaths,
    ports: KubePorts,
    placement: RealNodes | None = None,
) -> list[str]:
    pki = paths.pki
    bind, advertise = "127.0.0.1", "127.0.0.1"
    authorization, kubelet_client = "RBAC", []
    if placement is not None:
        bind, advertise = placement.bind_address, placement.advertise_address
        authorization = placement.authorization
        cert, key = placement.kubelet_client
        kubelet_client = [f"--kubelet-client-certificate={cert}", f"--kubelet-client-key={key}"]
    return [
        str(binaries.apiserver),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        f"--bind-address={bind}", f"--advertise-address={advertise}",
        *kubelet_client,
        f"--secure-port={ports.apiserver}", "--insecure-port=0",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={paths.ca_cert}",
        # The local Nodes' kubelet API (logs, exec) is the node agent's, on 127.0.0.1.
        "--kubelet-preferred-address-types=InternalIP",
        f"--token-auth-file={paths.token_file}",
        f"--authorization-mode={authorization}",
        f"--audit-policy-file={paths.audit_policy}",
        f"--audit-log-path={paths.audit_log}",
        "--audit-log-format=json", "--audit-log-mode=blocking",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        *_in_cluster_access(placement),
        "--allow-privileged=true",
        f"--cert-dir={pki / 'generated'}",
        "--profiling=false",
        "--v=1",
    ]  # fmt: skip


def _in_cluster_access(placement: RealNodes | None) -> list[str]:
    """How a Pod reaches the API server. Real kubelets: the `kubernetes` Service's endpoint
    (the advertised address) and each Pod's service-account token, as in any cluster (the
    reconciler's own Pods run as their ServiceAccount). The node agent has neither a Service
    network nor a token volume: no endpoint, and no token required of every Pod."""
    if placement is not None:
        return []
    return ["--endpoint-reconciler-type=none", "--disable-admission-plugins=ServiceAccount"]


def controller_manager_argv(
    binaries: KubeBinaries, paths: KubePaths, placement: RealNodes | None = None
) -> list[str]:
    pki = paths.pki
    controllers = CONTROLLERS + (f",{placement.more_controllers}" if placement else "")
    return [
        str(binaries.controller_manager),
        f"--kubeconfig={paths.kubeconfig}",
        f"--controllers={controllers}",
        "--leader-elect=false",
        "--use-service-account-credentials=false",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={paths.ca_cert}",
        # No listening ports at all: health is judged through the API (see controllers_working).
        "--secure-port=0", "--port=0",
        "--v=1",
    ]  # fmt: skip


def _get(url: str, *, token: str | None = None, ca: Path | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context(cafile=str(ca)) if ca else None
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def etcd_healthy(ports: KubePorts) -> bool:
    status, body = _get(f"http://127.0.0.1:{ports.etcd_client}/health")
    return status == 200 and json.loads(body).get("health") == "true"


def apiserver_ready(paths: KubePaths, ports: KubePorts, token: str) -> bool:
    status, body = _get(f"{server_url(ports)}/readyz", token=token, ca=paths.ca_cert)
    return status == 200 and body.strip() == b"ok"


def controllers_working(paths: KubePaths, ports: KubePorts, token: str) -> bool:
    """The `default` service account has its token secret: two controllers have run."""
    url = f"{server_url(ports)}/api/v1/namespaces/default/serviceaccounts/default"
    status, body = _get(url, token=token, ca=paths.ca_cert)
    return status == 200 and bool(json.loads(body).get("secrets"))


class KubeControlPlane:
    """etcd + kube-apiserver + kube-controller-manager under one Supervisor."""

    DAEMONS = ("kube-controller-manager", "kube-apiserver", "etcd")  # stop order

    def __init__(
        self,
        supervisor: Supervisor,
        paths: KubePaths,
        ports: KubePorts,
        binaries: KubeBinaries | None = None,
        placement: RealNodes | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.paths = paths
        self.ports = ports
        self._binaries = binaries
        self.placement = placement

    @property
    def binaries(self) -> KubeBinaries:
        if self._binaries is None:
            self._binaries = find_binaries()
        return self._binaries

    def start(
        self, *, fresh: bool = True, env: Mapping[str, str] | None = None
    ) -> dict[str, float]:
        """Start all three daemons; return seconds-to-ready per daemon."""
        binaries = self.binaries
        self.paths.root.mkdir(parents=True, exist_ok=True)
        placement = self.placement
        make_pki(self.paths.pki, [placement.advertise_address] if placement else [])
        token = ensure_token(self.paths)
        self.paths.audit_policy.write_text(AUDIT_POLICY)
        if fresh:
            shutil.rmtree(self.paths.etcd_data, ignore_errors=True)
        timings: dict[str, float] = {}
        run_env = dict(env if env is not None else os.environ)
        sup = self.supervisor
        sup.start("etcd", etcd_argv(binaries, self.paths, self.ports), env=run_env)
        timings["etcd"] = sup.wait_ready(
            "etcd", lambda: etcd_healthy(self.ports), timeout=ETCD_READY_SECONDS
        )
        sup.start(
            "kube-apiserver",
            apiserver_argv(binaries, self.paths, self.ports, placement),
            env=run_env,
        )
        timings["kube-apiserver"] = sup.wait_ready(
            "kube-apiserver",
            lambda: apiserver_ready(self.paths, self.ports, token),
            timeout=APISERVER_READY_SECONDS,
        )
        write_kubeconfig(self.paths, self.ports, token)
        sup.start(
            "kube-controller-manager",
            controller_manager_argv(binaries, self.paths, placement),
            env=run_env,
        )
        timings["kube-controller-manager"] = sup.wait_ready(
            "kube-controller-manager",
            lambda: controllers_working(self.paths, self.ports, token),
            timeout=CONTROLLER_MANAGER_READY_SECONDS,
        )
        return timings

    def stop(self) -> list[str]:
        """Stop every daemon that is running; return the names stopped."""
        graces = {n: STOP_GRACE_SECONDS.get(n, DEFAULT_GRACE_SECONDS) for n in self.DAEMONS}
        return [name for name, grace in graces.items() if self.supervisor.stop(name, grace=grace)]

    def health(self) -> dict[str, bool]:
        token = read_token(self.paths) if self.paths.token_file.exists() else ""
        checks = {
            "etcd": lambda: etcd_healthy(self.ports),
            "kube-apiserver": lambda: apiserver_ready(self.paths, self.ports, token),
            "kube-controller-manager": lambda: controllers_working(self.paths, self.ports, token),
        }
        return {name: self._healthy(name, check) for name, check in checks.items()}

    def _healthy(self, name: str, check: Callable[[], bool]) -> bool:
        if self.supervisor.running(name) is None:
            return False
        try:
            return check()
        except Exception:
            return False
