"""LocalStack: the local Kubernetes control plane and Slurm cluster in one runtime directory.

Layout of a runtime directory:

    state.json      what a later process needs for status/down: ports, paths, timings
    pids/NAME.pid   one per daemon (see processes.py for the format)
    logs/NAME.log   each daemon's stdout/stderr
    kube/           pki/, etcd-data/, kubeconfig
    slurm/          etc/ (slurm.conf, gres.conf, keys), state/, spool/, log/, run/, dev/,
                    bin/ (argv[0] symlinks), munge/, mariadb/

state.json and the runtime directory's location are stack_record.py's; what status reports is
stack_status.py's; this module starts and stops the stack.

The process that runs `up` is the daemons' parent and should stay alive until `down`: where PID 1
does not reap, daemons whose parent has exited turn into zombies when they stop.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from reconciler.errors import LocalStackError
from reconciler.local.agent.placement import NodeTemplate
from reconciler.local.agent.pod_cgroups import PodCgroups
from reconciler.local.foreground import ForegroundUp
from reconciler.local.kube import control_plane as kube_module
from reconciler.local.kube.control_plane import KubeControlPlane, KubePaths, KubePorts, RealNodes
from reconciler.local.kubelets.cluster import SECTION as KUBELET_SECTION
from reconciler.local.kubelets.cluster import KubeletCluster
from reconciler.local.orphans import OrphanReaper, start_orphan_reaper
from reconciler.local.ports import free_ports
from reconciler.local.processes import Supervisor
from reconciler.local.slurm.cluster import (
    SlurmCluster,
    SlurmPaths,
    SlurmPorts,
    SlurmSite,
    local_site_settings,
)
from reconciler.local.slurm.install import recorded_install, slurm_install
from reconciler.local.slurm.prepare import check_binaries
from reconciler.local.slurm.tags import TAGS_ENV
from reconciler.local.stack_record import StackRecord
from reconciler.local.stack_status import ComponentStatus, component_statuses

# The foreground `up` stops its node agent and daemons before it exits.


class LocalStack:
    def __init__(self, runtime_dir: Path, *, cluster_name: str = "local") -> None:
        self.runtime_dir = Path(runtime_dir).absolute()
        self.cluster_name = cluster_name
        self.supervisor = Supervisor(self.runtime_dir / "pids", self.runtime_dir / "logs")
        self.kube_paths = KubePaths(self.runtime_dir / "kube")
        self.slurm_paths = SlurmPaths(self.runtime_dir / "slurm")
        self.record = StackRecord(self.runtime_dir, cluster_name)
        self._reaper: OrphanReaper | None = None
        self._kubelets: KubeletCluster | None = None
        self.foreground = ForegroundUp(self.record, self.supervisor)

    @classmethod
    def open(cls, runtime_dir: Path) -> LocalStack:
        """A stack brought up earlier, possibly by another process (for status/down)."""
        return cls(Path(runtime_dir), cluster_name=StackRecord.recorded_cluster_name(runtime_dir))

    # ---- state file ---------------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.record.file

    def state(self) -> dict[str, object]:
        """A copy of what state.json records (no secrets are ever stored there)."""
        return self.record.copy()

    # ---- components ---------------------------------------------------------------------

    @property
    def kube(self) -> KubeControlPlane | None:
        section = self.record.section("kube")
        if section is None:
            return None
        ports = KubePorts(**{key: int(port) for key, port in section["ports"].items()})
        return KubeControlPlane(self.supervisor, self.kube_paths, ports)

    @property
    def slurm(self) -> SlurmCluster | None:
        section = self.record.section("slurm")
        if section is None:
            return None
        return SlurmCluster(
            self.supervisor,
            self.slurm_paths,
            SlurmPorts.from_json(section["ports"]),
            accounting=bool(section["accounting"]),
            cluster_name=self.cluster_name,
            install=recorded_install(section),
        )

    @property
    def slurm_tags(self) -> str:
        """$SUNK_RECONCILER_SLURM_TAGS as `up` read it ("": every Pod runs the stack's)."""
        return str((self.record.section("slurm") or {}).get("tags") or "")

    def _slurmd_names(self) -> list[str]:
        return [name for name in self.supervisor.names() if name.startswith("slurmd-")]

    def _all_daemon_names(self) -> list[str]:
        return [*KubeControlPlane.DAEMONS, *SlurmCluster.DAEMONS, *self._slurmd_names()]

    def _refuse_if_running(self, names: Sequence[str]) -> None:
        running = [name for name in names if self.supervisor.running(name) is not None]
        if running:
            raise LocalStackError(
                f"already running in {self.runtime_dir}: {', '.join(running)}",
                hint="run `down` first",
            )

    # ---- up -----------------------------------------------------------------------------

    def up(
        self,
        node_names: Sequence[str],
        render: Callable[[SlurmSite], tuple[str, str]],
        *,
        start_nodes: Sequence[str] | None = None,
        accounting: bool = False,
        kube: bool = True,
        release: str | None = None,
        prefix: Path | None = None,
    ) -> dict[str, dict[str, float]]:
        """Bring up Kubernetes (unless kube=False) and Slurm; all or nothing.

        `node_names` are every node slurm.conf declares (FUTURE ones included, they need ports);
        `render(site)` returns (slurm.conf, gres.conf) text; `start_nodes` (default: all of
        node_names) get a slurmd now; `release` or `prefix` chooses the Slurm (slurm_install).
        Returns seconds-to-ready per daemon, per half.
        """
        # Checks first, outside the try: failing them must not `down` a stack that is running.
        self._refuse_if_running(self._all_daemon_names())
        if kube:
            kube_module.find_binaries()
        else:
            self.record.data.pop("kube", None)  # status must not report a previous run's kube
        check_binaries(accounting, slurm_install(release, prefix))
        timings: dict[str, dict[str, float]] = {}
        try:
            if kube:
                timings["kube"] = self.up_kube()
            site = self.allocate_slurm(
                node_names, accounting=accounting, release=release, prefix=prefix
            )
            slurm_conf, gres_conf = render(site)
            nodes = list(node_names) if start_nodes is None else list(start_nodes)
            timings["slurm"] = self.up_slurm(slurm_conf, gres_conf, nodes)
        except BaseException:
            self.down()
            raise
        return timings

    def up_kube(
        self,
        placement: RealNodes | None = None,
        before_start: Callable[[KubePorts], None] | None = None,
    ) -> dict[str, float]:
        """Start etcd, kube-apiserver, kube-controller-manager; seconds to ready per daemon.
        `placement` and `before_start` (given the ports chosen): `up_kubelets`'s."""
        kube_module.find_binaries()  # fail before anything starts if setup has not run
        self._refuse_if_running(KubeControlPlane.DAEMONS)
        # Fresh ports on every up: the previous run's may have been taken since.
        etcd_client, etcd_peer, apiserver = free_ports(3, avoid=self.record.taken_ports("slurm"))
        ports = KubePorts(etcd_client=etcd_client, etcd_peer=etcd_peer, apiserver=apiserver)
        self.record.data["kube"] = {
            "ports": asdict(ports),
            "server": kube_module.server_url(ports),
            "kubeconfig": str(self.kube_paths.kubeconfig),
        }
        self.record.save()
        plane = KubeControlPlane(self.supervisor, self.kube_paths, ports, placement=placement)
        if before_start is not None:
            before_start(ports)
        started = time.monotonic()
        try:
            timings = plane.start()
        except BaseException:
            plane.stop()
            raise
        timings["total"] = time.monotonic() - started
        self.record.record_timings("kube", timings)
        return timings

    def allocate_slurm(
        self,
        node_names: Sequence[str],
        *,
        accounting: bool = False,
        release: str | None = None,
        prefix: Path | None = None,
        pods: bool = False,
    ) -> SlurmSite:
        """Choose ports for the daemons and for every declared node (FUTURE ones included),
        and the Slurm install (by `release` or `prefix`; default: slurm_install's). With `pods`,
        the daemons will run as the Pods of a config repo (`local up`), whose values decide on
        accounting.

        Call before rendering slurm.conf: the site settings carry these ports and paths.
        """
        install = slurm_install(release, prefix)
        check_binaries(accounting or pods, install)
        self._refuse_if_running([*SlurmCluster.DAEMONS, *self._slurmd_names()])
        ports_needed = 6 + len(node_names)
        chosen = free_ports(ports_needed, avoid=self.record.taken_ports("kube"))
        ports = SlurmPorts(
            slurmctld=chosen[0],
            slurmd=chosen[1],
            slurmrestd=chosen[2],
            slurmdbd=chosen[3],
            mariadb=chosen[4],
            ssh=chosen[5],
            nodes=dict(zip(node_names, chosen[6:], strict=True)),
        )
        self.record.data["slurm"] = {
            "ports": ports.to_json(),
            "accounting": accounting,
            "pods": pods,
            **install.to_record(),
            # The node agent's map of image tags to installs, read once at start as it is:
            # `--local` commands run the clients of the install slurmctld runs by it.
            "tags": os.environ.get(TAGS_ENV, ""),
            "slurm_conf": str(self.slurm_paths.slurm_conf),
            "jwt_key": str(self.slurm_paths.jwt_key),
            "rest_url": f"http://127.0.0.1:{ports.slurmrestd}",
        }
        self.record.save()
        return self.slurm_site()

    @property
    def runs_pods(self) -> bool:
        """Whether the Slurm daemons run as the Pods of a config repo (`local up`)."""
        section = self.record.section("slurm")
        return bool(section and section.get("pods"))

    def slurm_site(self) -> SlurmSite:
        """The recorded cluster's site: its paths, ports and slurm.conf site settings."""
        cluster = self.slurm
        if cluster is None:
            raise LocalStackError("no Slurm in this stack yet")
        accounting = None if self.runs_pods else cluster.accounting
        settings = local_site_settings(
            cluster.paths, cluster.ports, accounting, cluster_name=self.cluster_name
        )
        client_env = {k: v for k, v in cluster.install.env({}).items()
                      if k in ("PATH", "LD_LIBRARY_PATH")}  # fmt: skip
        return SlurmSite(cluster.paths, cluster.ports, settings, cluster.accounting,
                         self.cluster_name, client_env)  # fmt: skip

    def up_slurm(
        self, slurm_conf: str, gres_conf: str, start_nodes: Sequence[str]
    ) -> dict[str, float]:
        """Start munged, (MariaDB, slurmdbd,) slurmctld, slurmd for `start_nodes`, slurmrestd."""
        cluster = self.slurm
        if cluster is None:
            raise LocalStackError("up_slurm before allocate_slurm: no ports chosen yet")
        self.adopt_orphans()
        started = time.monotonic()
        try:
            timings = cluster.start(slurm_conf, gres_conf, start_nodes)
        except BaseException:
            cluster.stop(grace=3)
            raise
        timings["total"] = time.monotonic() - started
        self.record.record_timings("slurm", timings)
        return timings

    @property
    def pods_dir(self) -> Path:
        """Where the node agent puts what our Pods mount that is not Slurm's shared files."""
        return self.runtime_dir / "pods"

    def prepare_pods(
        self, node_names: Sequence[str], *, release: str | None = None, prefix: Path | None = None
    ) -> SlurmSite:
        """For `local up`: Kubernetes up, ports chosen and directories made for a Slurm
        cluster whose daemons the node agent will run as Pods. All or nothing."""
        self._refuse_if_running(self._all_daemon_names())
        kube_module.find_binaries()
        check_binaries(True, slurm_install(release, prefix))
        try:
            self.up_kube()
            site = self.allocate_slurm(node_names, release=release, prefix=prefix, pods=True)
            cluster = self.slurm
            assert cluster is not None
            cluster.prepare(fresh=True, keys=False)  # the keys come from the Secrets
            shutil.rmtree(self.pods_dir, ignore_errors=True)
            self.adopt_orphans()
        except BaseException:
            self.down()
            raise
        return site

    def up_kubelets(
        self, nodes: int, images: Sequence[Path] = (), shapes: Sequence[NodeTemplate] = ()
    ) -> dict[str, float]:
        """`local up --kubelet`: Kubernetes with `nodes` real kubelets on containerd, the
        OCI archives `images` loaded into each, Nodes labelled and given GPUs as `shapes`
        say (kubelet_cluster.py). All or nothing."""
        self._refuse_if_running(self._all_daemon_names())
        kube_module.find_binaries()
        self.record.data.pop("slurm", None)
        self._kubelets = self._kubelet_cluster()
        try:
            return self._kubelets.up(nodes, self.up_kube, images, shapes)
        except BaseException:
            self.down()
            raise

    def _kubelet_cluster(self) -> KubeletCluster:
        return KubeletCluster(self.runtime_dir, self.supervisor, self.kube_paths, self.record)

    @property
    def kubelets(self) -> KubeletCluster | None:
        """The kubelet cluster of this stack (`local up --kubelet`), if it has one."""
        if self._kubelets is None and self.record.section(KUBELET_SECTION) is not None:
            self._kubelets = self._kubelet_cluster()
        return self._kubelets

    def adopt_orphans(self) -> None:
        # slurmd's job steps get reparented to us instead of to a PID 1 that may not reap.
        if self._reaper is None:
            self._reaper = start_orphan_reaper()

    # ---- down and status ----------------------------------------------------------------

    def down(self, *, purge: bool = False) -> list[str]:
        """Stop every daemon (Slurm first, then Kubernetes); names of those stopped."""
        stopped: list[str] = []
        kubelets = self.kubelets
        if kubelets is not None:
            stopped += kubelets.stop_nodes()
        cluster = self.slurm
        if cluster is not None:
            stopped += cluster.stop()
        # What Pods' daemons forked and the above missed (a job process that left its job).
        PodCgroups.of_run(self.slurm_paths.root).remove_run()
        plane = self.kube
        if plane is not None:
            stopped += plane.stop()
        # Anything else with a pidfile (e.g. a component this version does not know).
        for name in self.supervisor.names():
            if self.supervisor.stop(name):
                stopped.append(name)
        if kubelets is not None:
            stopped += kubelets.remove_namespaces()
        if self._reaper is not None:
            self._reaper.stop()
            self._reaper = None
        if self.state_file.exists():
            self.record.data["up"] = False
            self.record.save()
        if purge:
            shutil.rmtree(self.runtime_dir, ignore_errors=True)
        return stopped

    def ensure_node_ports(self, names: Sequence[str]) -> None:
        """Give every declared Slurm node a port of its own, once: a node keeps its port for
        the life of the stack, whatever else is added or removed (its slurmd listens there)."""
        section = self.record.section("slurm")
        if section is None:
            raise LocalStackError("no Slurm in this stack yet")
        ports = SlurmPorts.from_json(section["ports"])
        missing = [n for n in names if n not in ports.nodes]
        if not missing:
            return
        chosen = free_ports(len(missing), avoid=self.record.taken_ports())
        nodes = {**ports.nodes, **dict(zip(missing, chosen, strict=True))}
        section["ports"] = SlurmPorts(**{**vars(ports), "nodes": nodes}).to_json()
        self.record.save()

    def status(self) -> list[ComponentStatus]:
        """Every component with its PID, port, liveness and health."""
        kubelets = self.kubelets
        more = kubelets.health() if kubelets is not None else None
        return component_statuses(self.supervisor, self.kube, self.slurm, more)
