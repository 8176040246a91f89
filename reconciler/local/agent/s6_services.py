"""A slurmd Pod's s6 services on the local stack, run by Debian's s6 as s6-overlay runs them.

In the slurmd image, s6-overlay compiles /etc/s6-overlay/s6-rc.d with s6-rc-compile and brings
up the `user` bundle before the container's command: each oneshot's `up` is run by execlineb,
in dependency order, and each longrun's service folder is copied into the scan directory of
s6-svscan, whose s6-supervise runs `run` and runs it again whenever it exits. Debian has s6 and
execline but no s6-rc, so here the same source tree (as the Pod's volumes lay it out) is read
directly: the oneshots run one after the other with the real `execlineb -P up`, then the real
`s6-svscan` supervises the longruns, before slurmd starts. `base` is the image's bundle: on
this host there is nothing in it, so a dependency on it is met.

Every one of them runs in the container's view of /etc (pod_namespace.py): an overlay whose
writes land in the Pod's folder, with the container's mounts under /etc bound where it sees
them, so a script writing /etc/motd writes the Pod's copy, never the host's.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from reconciler.compile.s6_services import BASE_BUNDLE, LONGRUN, ONESHOT, S6_RC_DIR, USER_BUNDLE
from reconciler.errors import LocalStackError
from reconciler.local.agent.pod_namespace import ContainerView
from reconciler.local.agent.volumes import Materializer, pod_mounts
from reconciler.local.processes import Supervisor
from reconciler.objects import Obj

S6_SVSCAN = "s6-svscan"
EXECLINEB = "execlineb"
ONESHOT_SECONDS = 120.0
READY_SECONDS = 15.0
_ETC = PurePosixPath("/etc")
# s6-rc's own files, not a service folder's (s6-rc-compile reads them, s6-supervise does not).
_NOT_COPIED = {"type", "dependencies", "dependencies.d", "timeout-up", "timeout-down",
               "producer-for", "consumer-for", "pipeline-name", "flag-essential"}  # fmt: skip


@dataclass(frozen=True)
class SourceService:
    """One service of an s6-rc source folder."""

    name: str
    type: str
    dependencies: tuple[str, ...]


def user_services(source: Path) -> list[SourceService]:
    """The `user` bundle of an s6-rc source folder, each service after its dependencies."""
    contents = source / USER_BUNDLE / "contents.d"
    names = sorted(p.name for p in contents.iterdir()) if contents.is_dir() else []
    found: dict[str, SourceService] = {}
    for name in names:
        folder = source / name
        try:
            kind = (folder / "type").read_text().strip()
        except FileNotFoundError:
            raise LocalStackError(f"s6 service {name} has no type file in {folder}") from None
        if kind not in (ONESHOT, LONGRUN):
            raise LocalStackError(f"s6 service {name}: type {kind!r} is not oneshot or longrun")
        deps = folder / "dependencies.d"
        needs = sorted(p.name for p in deps.iterdir()) if deps.is_dir() else []
        found[name] = SourceService(name, kind, tuple(n for n in needs if n != BASE_BUNDLE))
    return _in_dependency_order(found)


def _in_dependency_order(services: Mapping[str, SourceService]) -> list[SourceService]:
    ordered: list[SourceService] = []
    placing: set[str] = set()

    def place(service: SourceService) -> None:
        if service in ordered:
            return
        if service.name in placing:
            raise LocalStackError(f"s6 services depend on each other in a loop at {service.name}")
        placing.add(service.name)
        for need in service.dependencies:
            if need not in services:
                raise LocalStackError(f"s6 service {service.name} depends on {need}, which "
                                      "is neither base nor in the user bundle")  # fmt: skip
            place(services[need])
        ordered.append(service)

    for service in services.values():
        place(service)
    return ordered


def pod_s6_dir(root: Path, namespace: str, pod: str) -> Path:
    """The Pod's s6 state: `service` (the scan directory) and `etc` (its overlay of /etc:
    what the scripts wrote to /etc is in etc/upper)."""
    return root / f"{namespace}_{pod}"


class LocalS6:
    """Starts a slurmd Pod's s6 services; `s6-svscan-<pod>` is the daemon that keeps them."""

    def __init__(self, supervisor: Supervisor, files: Materializer, root: Path) -> None:
        self._supervisor = supervisor
        self._files = files
        self._root = root

    @staticmethod
    def daemon(pod: Obj) -> str:
        return f"{S6_SVSCAN}-{pod['metadata']['name']}"

    def start(self, pod: Obj, container: str) -> list[str]:
        """Run the oneshots, then supervise the longruns; the daemons started ([] or the
        s6-svscan). Raises when a oneshot does not finish or a longrun is not supervised."""
        source = self._files.host_path(pod, S6_RC_DIR)
        services = user_services(source)
        if not services:
            return []
        meta = pod["metadata"]
        home = pod_s6_dir(self._root, meta["namespace"], meta["name"])
        view = ContainerView(home / "etc", self._binds(pod, container))
        scandir = home / "service"
        shutil.rmtree(scandir, ignore_errors=True)  # a new container: a new scan directory
        scandir.mkdir(parents=True)
        daemon = self.daemon(pod)
        log = self._supervisor.logfile(daemon)
        log.parent.mkdir(parents=True, exist_ok=True)
        longruns = []
        for service in services:
            if service.type == ONESHOT:
                self._oneshot(view, service, log)
            else:
                _copy_service_folder(source / service.name, scandir / service.name)
                longruns.append(scandir / service.name)
        if not longruns:
            return []
        self._supervisor.start(daemon, [*view.prefix(), S6_SVSCAN, str(scandir)],
                               program=S6_SVSCAN)  # fmt: skip
        try:
            self._supervisor.wait_ready(
                daemon,
                lambda: all((s / "supervise" / "status").exists() for s in longruns),
                timeout=READY_SECONDS,
            )
        except BaseException:
            self._supervisor.stop(daemon, grace=2.0, whole_tree=True)
            raise
        return [daemon]

    def _binds(self, pod: Obj, container: str) -> list[tuple[Path, PurePosixPath]]:
        """The container's mounts under /etc where it sees them: a shared one (slurm.conf's
        folder) as it is; the Pod's own files by their top folder (/etc/s6-overlay), which
        holds every file and folder mounted under it, and nothing of the host's."""
        own = self._files.pod_dir(pod)
        binds: dict[PurePosixPath, Path] = {}
        for mount in pod_mounts(pod, [container]):
            if _ETC not in mount.path.parents:
                continue
            host = self._files.host_path(pod, mount.path)
            if own in host.parents:
                top = _ETC / mount.path.relative_to(_ETC).parts[0]
                binds[top] = self._files.host_path(pod, top)
            else:
                binds[mount.path] = host
        return [(host, path) for path, host in sorted(binds.items())]

    def _oneshot(self, view: ContainerView, service: SourceService, log: Path) -> None:
        """`up` as s6-rc runs it: one execline command line, parsed by execlineb."""
        up = PurePosixPath(S6_RC_DIR) / service.name / "up"
        with log.open("ab") as out:
            out.write(f"s6: oneshot {service.name}: execlineb -P {up}\n".encode())
            out.flush()
            try:
                # In the Pod's cgroup, as in its container: what it leaves running ends
                # with the Pod.
                argv = [*self._supervisor.placement(), *view.prefix(), EXECLINEB, "-P", str(up)]
                done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT, timeout=ONESHOT_SECONDS,
                                      check=False)  # fmt: skip
            except subprocess.TimeoutExpired:
                raise LocalStackError(
                    f"s6 oneshot {service.name} did not finish within {ONESHOT_SECONDS:g} s",
                    hint=f"see {log}",
                ) from None
            # s6-overlay's default (S6_BEHAVIOUR_IF_STAGE2_FAILS=0): carry on, say so here.
            out.write(f"s6: oneshot {service.name} exited {done.returncode}\n".encode())


def _copy_service_folder(source: Path, target: Path) -> None:
    """What s6-rc-init does with a longrun: its folder (run, finish, ...) in the scan dir,
    writable, for s6-supervise's supervise/ and event/."""
    target.mkdir()
    for item in source.iterdir():
        if item.name in _NOT_COPIED:
            continue
        if item.is_dir():
            shutil.copytree(item, target / item.name)
        else:
            shutil.copy2(item, target / item.name)
