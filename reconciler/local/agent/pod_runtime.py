"""What runs in our Pods on the local stack: for each Pod, the real program its image runs
(slurmctld, slurmrestd, slurmdbd, MariaDB, sshd, slurmd), started on this host from the files
its volumes show (volumes.py), under the stack's Supervisor, as named daemons that
`reconciler local status` and `down` know.

The Pod's `app.kubernetes.io/name` label says which program that is, as it does for
`kubectl logs -l app.kubernetes.io/name=slurmctld`. Every Pod also carries a munge sidecar;
on one host those would be one munged on the one socket slurm.conf names, so a single munged
runs while any Pod with a munge container runs.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

from reconciler import wellknown as wk
from reconciler.compile.control_plane import STATE_DIR
from reconciler.compile.directory import SSHD_SNIPPET_PATH, SSSD_CONTAINER
from reconciler.compile.manifests import CONF_MOUNT
from reconciler.compile.munge import MUNGE_CONTAINER, MUNGE_KEY_DIR, MUNGE_SOCKET_DIR
from reconciler.compile.slurmdbd import DB_PASSWORD_DIR, SLURMDBD_CONF_DIR
from reconciler.compile.workloads import JWT_DIR
from reconciler.errors import LocalStackError
from reconciler.local.agent.directory_runtime import LocalSssd, has_sssd
from reconciler.local.agent.login_sshd import host_key, sshd_config
from reconciler.local.agent.pod_cgroups import PodCgroups
from reconciler.local.agent.pod_env import container_env
from reconciler.local.agent.s6_services import LocalS6
from reconciler.local.agent.volumes import HostLayout, Materializer, Reader, pod_mounts
from reconciler.local.ports import is_accepting
from reconciler.local.slurm.cluster import SlurmCluster, SlurmPaths, check_binaries
from reconciler.local.slurm.install import SlurmInstall, installs_by_tag
from reconciler.local.slurm.tags import TAGS_ENV, mapped_install, unmapped_note
from reconciler.objects import Obj

SSHD = Path("/usr/sbin/sshd")
SSHD_PRIVSEP_DIR = Path("/run/sshd")  # Debian's sshd insists on it
READY_SECONDS = 30.0
DB_WAIT_SECONDS = 60.0
MUNGED = "munged"
log = logging.getLogger(__name__)


def host_layout(paths: SlurmPaths, pods_root: Path) -> HostLayout:
    """Where the container paths Slurm's daemons share land: where the local slurm.conf
    (local_site_settings) says its config, keys, munge socket and state are."""
    return HostLayout(
        {
            PurePosixPath(CONF_MOUNT): paths.etc,
            PurePosixPath(JWT_DIR): paths.etc,  # jwt_hs256.key, as AuthAltParameters says
            PurePosixPath(MUNGE_KEY_DIR): paths.munge,  # munge.key
            PurePosixPath(MUNGE_SOCKET_DIR): paths.munge,  # one munged for the host
            PurePosixPath(STATE_DIR): paths.state,  # the controller's claim
        },
        pods_root,
    )


# The daemon (Supervisor name) that a Pod's main container runs, by the Pod's app label.
_DAEMON_OF_APP = {
    "slurmd": "slurmd-{pod}",
    "slurmctld": "slurmctld",
    "slurmrestd": "slurmrestd",
    "slurmdbd": "slurmdbd",
    "mysql": "mariadb",
    "login": "sshd-{pod}",
}


class LocalPodRuntime:
    """Starts and stops the daemons of our Pods; one instance per local stack."""

    def __init__(
        self,
        cluster: SlurmCluster,
        files: Materializer,
        read: Reader,
        tags: Mapping[str, SlurmInstall] | None = None,
    ) -> None:
        self._cluster = cluster
        # Image tag -> the install a Slurm Pod of that tag runs (slurm_tags.py); by default
        # from $SUNK_RECONCILER_SLURM_TAGS. Other tags run the stack's install.
        self._tags = installs_by_tag(os.environ.get(TAGS_ENV, "")) if tags is None else tags
        for install in self._tags.values():
            check_binaries(True, install)  # before any Pod runs, not at its first start
        # Each Pod's daemons, and what they fork (slurmstepd, jobs), in a cgroup of its own.
        self._cgroups = PodCgroups.of_run(cluster.paths.root)
        self._files = files
        self._read = read
        self._lock = threading.Lock()
        self._munge_users: set[str] = set()
        self._sssd = LocalSssd(cluster.supervisor, files, cluster.paths.run / "pod-views")
        self._s6 = LocalS6(cluster.supervisor, files, cluster.paths.run / "s6")
        self._owned: dict[str, list[str]] = {}  # Pod key -> daemons it started
        # Pod key -> the uid of the Pod that started them: a StatefulSet makes a Pod of the
        # same name again, and that Pod is a new one, as kubelet keys Pods by uid.
        self._uids: dict[str, str] = {}
        # Pod key -> container -> (log file, where this start's output begins)
        self._logs: dict[str, dict[str, tuple[Path, int]]] = {}
        self._starters: dict[str, Callable[[Obj], list[str]]] = {
            "slurmd": self._slurmd,
            "slurmctld": self._slurmctld,
            "slurmrestd": self._slurmrestd,
            "slurmdbd": self._slurmdbd,
            "mysql": self._mysql,
            "login": self._login,
        }

    # ---- what the node agent calls --------------------------------------------------------

    def start(self, pod: Obj) -> None:
        """Mount the Pod's volumes and start its daemons; returns once they are ready (the
        readiness probe passes). Raises while something it needs is not there yet."""
        key = _key(pod)
        with self._lock:
            started_by = self._uids.get(key) if key in self._owned else None
        if started_by is not None:
            if started_by == _uid(pod):
                return
            self._stop_key(key, started_by, grace=1.0)  # an earlier Pod still runs: end it
        self._files.mount_all(pod)
        logs = self._log_starts(pod)
        if _has_container(pod, MUNGE_CONTAINER):
            self._join_munge(key)
        starter = self._starters.get(_app(pod))
        try:
            with self._cluster.supervisor.placed(self._cgroups.join_prefix(_cgroup(pod))):
                sidecars = self._directory_view(pod)
                daemons = [*sidecars, *(starter(pod) if starter is not None else [])]
        except BaseException:
            self._leave_munge(key)
            self._cluster.supervisor.stop(LocalSssd.daemon(pod), grace=2.0)
            self._cgroups.end(_cgroup(pod), grace=1.0)
            raise
        with self._lock:
            self._owned[key] = daemons
            self._uids[key] = _uid(pod)
            self._logs[key] = logs

    def log_of(self, namespace: str, pod: str, container: str) -> tuple[Path, int] | None:
        """Where a running container's output is (for `kubectl logs`)."""
        with self._lock:
            return self._logs.get(f"{namespace}/{pod}", {}).get(container)

    def _log_starts(self, pod: Obj) -> dict[str, tuple[Path, int]]:
        """Each container's daemon log, and its size now: what it writes from here on is
        this start's output."""
        containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
        daemons = {MUNGE_CONTAINER: MUNGED}
        if containers and containers[0] != MUNGE_CONTAINER:
            main = _DAEMON_OF_APP.get(_app(pod), "").format(pod=pod["metadata"]["name"])
            if main:
                daemons[containers[0]] = main
        if has_sssd(pod):
            daemons[SSSD_CONTAINER] = LocalSssd.daemon(pod)
        supervisor = self._cluster.supervisor
        return {c: (supervisor.logfile(daemons[c]), _size(supervisor.logfile(daemons[c])))
                for c in containers if c in daemons}  # fmt: skip

    def stop(self, pod: Obj, grace: float) -> None:
        """Stop what this Pod started (SIGTERM, then SIGKILL after `grace`); not what a newer
        Pod of the same name started."""
        key = _key(pod)
        with self._lock:
            if self._uids.get(key, _uid(pod)) != _uid(pod):
                return
        self._stop_key(key, _uid(pod), grace)

    def _stop_key(self, key: str, uid: str, grace: float) -> None:
        """The Pod's daemons in reverse order of start, then whatever is left in its cgroup
        (slurmstepd and the jobs under it, which outlive slurmd), as its containers end."""
        with self._lock:
            daemons = self._owned.pop(key, [])
            self._uids.pop(key, None)
            self._logs.pop(key, None)
        for name in reversed(daemons):
            if name.startswith("slurmd-"):
                self._cluster.stop_slurmd(name.removeprefix("slurmd-"), grace=grace)
            else:
                self._cluster.supervisor.stop(name, grace=grace, whole_tree=True)
        self._cgroups.end(uid or key, grace)
        self._leave_munge(key)

    def exited(self) -> list[str]:
        """Pods (namespace/name) one of whose daemons is no longer running."""
        with self._lock:
            owned = {key: list(names) for key, names in self._owned.items()}
        supervisor = self._cluster.supervisor
        return [key for key, names in owned.items()
                if any(supervisor.running(name) is None for name in names)]  # fmt: skip

    def _directory_view(self, pod: Obj) -> list[str]:
        """A Pod with the sssd sidecar: its sssd runs, and its main daemon starts in its
        container's view of the directory's files (nsswitch.conf, sudoers, the sss sockets).
        Returns the sidecar's daemons."""
        main = _DAEMON_OF_APP.get(_app(pod), "").format(pod=pod["metadata"]["name"])
        if not has_sssd(pod):
            self._cluster.supervisor.wrappers.pop(main, None)
            return []
        sssd = self._sssd.start(pod)
        container = pod["spec"]["containers"][0]["name"]
        self._cluster.supervisor.wrappers[main] = self._sssd.view(pod, container).prefix()
        return [sssd]

    # ---- munge: one munged for every Pod on this host ---------------------------------------

    def _join_munge(self, key: str) -> None:
        with self._lock:
            first = not self._munge_users
            self._munge_users.add(key)
            if first or self._cluster.supervisor.running(MUNGED) is None:
                self._cluster.start_munged()

    def _leave_munge(self, key: str) -> None:
        with self._lock:
            if key not in self._munge_users:
                return
            self._munge_users.discard(key)
            if not self._munge_users:
                self._cluster.supervisor.stop(MUNGED, grace=2.0)

    # ---- one starter per program ------------------------------------------------------------

    def _install(self, pod: Obj) -> SlurmInstall | None:
        """The install the Pod's image tag maps to; None: the stack's."""
        install = mapped_install(pod, self._tags)
        if install is None:
            note = unmapped_note(pod, self._tags, self._cluster.install.version)
            if note:
                log.warning("pod %s: %s", _key(pod), note)
            return None
        log.info("pod %s: runs Slurm %s from %s (its image tag)", _key(pod), install.version,
                 install.prefix)  # fmt: skip
        return install

    def _slurmd(self, pod: Obj) -> list[str]:
        node = pod["metadata"]["name"]  # the Pod name is the Slurm node name
        # s6-overlay brings up the user bundle (compute.s6) before the command, slurmd.
        s6 = self._s6.start(pod, pod["spec"]["containers"][0]["name"])
        # `slurmd -b` (power saving): the container's start is the node's boot, as Slurm needs.
        # (the last arg is the whole command when sshd starts beside slurmd: compute.ssh).
        args = pod["spec"]["containers"][0].get("args") or []
        reboot = "-b" in " ".join(args).split()
        try:
            self._cluster.start_slurmd(node, wait=True, boot_at_start=reboot,
                                       install=self._install(pod))  # fmt: skip
        except BaseException:
            self._cluster.stop_slurmd(node, grace=1.0)
            for daemon in s6:
                self._cluster.supervisor.stop(daemon, grace=2.0, whole_tree=True)
            raise
        return [*s6, self._cluster.slurmd_daemon(node)]

    def _slurmctld(self, pod: Obj) -> list[str]:
        """slurmctld, once the slurmdbd slurm.conf names answers: a first start without its
        database is fatal ("we have no TRES from it"), where a cluster would restart the
        container until slurmdbd is up."""
        settings = _settings(self._cluster.paths.slurm_conf.read_text())
        if settings.get("AccountingStorageType") == "accounting_storage/slurmdbd":
            port = int(settings.get("AccountingStoragePort", "6819"))
            _wait_until(lambda: is_accepting(port), DB_WAIT_SECONDS, f"slurmdbd on port {port}")
        self._cluster.start_slurmctld(self._install(pod))
        return ["slurmctld"]

    def _slurmrestd(self, pod: Obj) -> list[str]:
        self._cluster.start_slurmrestd(self._install(pod))
        return ["slurmrestd"]

    def _mysql(self, pod: Obj) -> list[str]:
        """MariaDB as the official image's entrypoint runs it: a new data directory gets the
        database and user its MARIADB_* variables name."""
        env = container_env(pod, "mysql", self._read)
        datadir = self._files.host_path(pod, "/var/lib/mysql")
        self._cluster.accounting_daemons().start_mariadb(
            datadir,
            database=env.get("MARIADB_DATABASE", ""),
            user=env.get("MARIADB_USER", ""),
            password=env.get("MARIADB_PASSWORD", ""),
        )
        return ["mariadb"]

    def _slurmdbd(self, pod: Obj) -> list[str]:
        """As the Pod's command does: slurmdbd.conf from its ConfigMap plus StoragePass from
        its Secret, private to SlurmUser; then slurmdbd, once its database answers."""
        template = self._files.host_path(pod, f"{SLURMDBD_CONF_DIR}/slurmdbd.conf").read_text()
        password = self._files.host_path(pod, f"{DB_PASSWORD_DIR}/password").read_text()
        settings = _settings(template)
        db_port = int(settings.get("StoragePort", "3306"))
        _wait_until(lambda: is_accepting(db_port), DB_WAIT_SECONDS,
                    f"the accounting database on port {db_port}")  # fmt: skip
        accounting = self._cluster.accounting_daemons(self._install(pod))
        accounting.write_slurmdbd_conf(template + f"StoragePass={password.strip()}\n")
        accounting.start_slurmdbd()
        return ["slurmdbd"]

    def _login(self, pod: Obj) -> list[str]:
        """Debian's sshd on the stack's login port, with the keys the Pod mounts."""
        name = pod["metadata"]["name"]
        port = self._cluster.ports.ssh
        if not port:
            raise LocalStackError(f"pod {name}: this local stack has no login port")
        daemon = f"sshd-{name}"
        directory = self._files.pod_dir(pod) / "sshd"
        env = self._cluster.env(self._install(pod))  # the commands its users run
        config = sshd_config(
            directory, port, self._authorized_keys(pod), env,
            include=SSHD_SNIPPET_PATH if _mounts(pod, SSHD_SNIPPET_PATH) else None,
        )  # fmt: skip
        directory.mkdir(parents=True, exist_ok=True)
        host_key(directory / "ssh_host_ed25519_key")
        (directory / "sshd_config").write_text(config)
        SSHD_PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        supervisor = self._cluster.supervisor
        supervisor.start(daemon, [str(SSHD), "-D", "-e", "-f", str(directory / "sshd_config")],
                         env=env)  # fmt: skip
        supervisor.wait_ready(daemon, lambda: is_accepting(port), timeout=READY_SECONDS)
        return [daemon]

    def _authorized_keys(self, pod: Obj) -> Path | None:
        for mount in pod_mounts(pod):
            if mount.source == "secret" and mount.path.name == "authorized_keys":
                return self._files.host_path(pod, mount.path)
        return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _settings(conf: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in conf.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def _wait_until(probe: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise LocalStackError(f"{what} did not answer within {timeout:g} s")
        time.sleep(0.2)


def _app(pod: Obj) -> str:
    return ((pod.get("metadata") or {}).get("labels") or {}).get(wk.LABEL_NAME, "")


def _mounts(pod: Obj, path: str) -> bool:
    return any(str(m.path) == path for m in pod_mounts(pod))


def _has_container(pod: Obj, name: str) -> bool:
    return any(c["name"] == name for c in (pod.get("spec") or {}).get("containers") or [])


def _key(pod: Obj) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _uid(pod: Obj) -> str:
    return str(pod["metadata"].get("uid") or "")


def _cgroup(pod: Obj) -> str:
    """The Pod's cgroup is named by its uid, as kubelet's are (its key when it has none)."""
    return _uid(pod) or _key(pod)
