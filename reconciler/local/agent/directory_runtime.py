"""The directory service's side of the local Pod runtime: the sssd sidecar our Pods carry, run
as the real sssd (`sssd-<pod>`, from the sidecar's own start script), and each daemon of such a
Pod started in its container's view of the directory's files (pod_namespace.py).

Each Pod has its own sssd and its own /var/lib/sss (the emptyDir the sidecar shares with the
main container), as in a cluster: a Pod started after a Secret changed reads the new one.
"""

from __future__ import annotations

import subprocess
from pathlib import Path, PurePosixPath

from reconciler.compile.directory import (
    CONF_DIR,
    NSSWITCH_PATH,
    SSHD_SNIPPET_PATH,
    SSS_DIR,
    SSSD_CONTAINER,
    SUDOERS_PATH,
)
from reconciler.local.agent.pod_namespace import ContainerView
from reconciler.local.agent.volumes import Materializer, pod_mounts
from reconciler.local.processes import Supervisor
from reconciler.objects import Obj

DAEMON = "sssd"
SSSD = "/usr/sbin/sssd"
READY_SECONDS = 30.0
_FILES = {PurePosixPath(p) for p in (SSS_DIR, NSSWITCH_PATH, SUDOERS_PATH, SSHD_SNIPPET_PATH)}


def has_sssd(pod: Obj) -> bool:
    return any(c["name"] == SSSD_CONTAINER for c in (pod.get("spec") or {}).get("containers") or [])


class LocalSssd:
    def __init__(self, supervisor: Supervisor, files: Materializer, root: Path) -> None:
        self._supervisor = supervisor
        self._files = files
        self._root = root  # overlays of /etc, one per Pod container

    @staticmethod
    def daemon(pod: Obj) -> str:
        return f"{DAEMON}-{pod['metadata']['name']}"

    def view(self, pod: Obj, container: str) -> ContainerView:
        """The container's directory files where it sees them, /etc an overlay of its own."""
        conf = PurePosixPath(CONF_DIR)
        binds = [(self._files.host_path(pod, m.path), m.path)
                 for m in pod_mounts(pod, [container])
                 if m.path in _FILES or conf in (m.path, *m.path.parents)]  # fmt: skip
        meta = pod["metadata"]
        overlay = self._root / f"{meta['namespace']}_{meta['name']}" / container
        return ContainerView(overlay, binds)

    def start(self, pod: Obj) -> str:
        """The Pod's sssd, ready as its readinessProbe says; returns the daemon's name."""
        sidecar = next(c for c in pod["spec"]["containers"] if c["name"] == SSSD_CONTAINER)
        name = self.daemon(pod)
        view = self.view(pod, SSSD_CONTAINER)
        logs = view.overlay.parent / "sssd-log"
        logs.mkdir(parents=True, exist_ok=True)
        # sssd writes its pidfile in /run and its logs in /var/log/sssd: the host's stay
        # untouched.
        view = ContainerView(view.overlay, [*view.binds, (logs, PurePosixPath("/var/log/sssd"))],
                             tmpfs=[PurePosixPath("/run")])  # fmt: skip
        command = [*(sidecar.get("command") or []), *(sidecar.get("args") or [])]
        socket = self._files.host_path(pod, SSS_DIR) / "pipes" / "nss"
        socket.unlink(missing_ok=True)  # a stale one from an earlier sssd is not readiness
        self._supervisor.start(name, [*view.prefix(), *command], program=SSSD)
        # Ready as the sidecar's readinessProbe says (the canary user resolves), run in the
        # sidecar's view: before that, a daemon's first lookup would miss.
        probe = ((sidecar.get("readinessProbe") or {}).get("exec") or {}).get("command") or []
        checker = ContainerView(view.overlay.parent / f"{SSSD_CONTAINER}-probe", view.binds)
        try:
            self._supervisor.wait_ready(
                name, lambda: socket.is_socket() and _succeeds([*checker.prefix(), *probe]),
                timeout=READY_SECONDS,
            )  # fmt: skip
        except BaseException:
            self._supervisor.stop(name, grace=2.0)
            raise
        return name


def _succeeds(argv: list[str]) -> bool:
    done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    return done.returncode == 0
