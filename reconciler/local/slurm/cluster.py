"""The local Slurm daemons: munged, slurmctld, slurmd per node, slurmrestd (JWT), and optionally
MariaDB + slurmdbd for accounting. Slurm 24.11 (built by setup.sh) or Debian's 22.05
(slurm_install.py), all on 127.0.0.1, one runtime directory.

The slurm.conf and gres.conf text comes from the caller (the compiler's local profile); the
site part it must contain comes from `local_site_settings` (slurm_site.py, re-exported here).
What must be on disk first is in slurm_prepare.py (its binary checks re-exported here), what
jobs leave behind in slurm_jobs.py.

Slurm decides whether it is slurmctld, slurmd or slurmstepd from argv[0], and Debian installs
them as `*-wlm`, so every daemon runs through a symlink with the canonical name in <root>/bin.
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.errors import LocalStackError
from reconciler.local.orphans import reap_orphans
from reconciler.local.ports import is_accepting
from reconciler.local.processes import Supervisor
from reconciler.local.slurm.accounting import Accounting
from reconciler.local.slurm.install import SlurmInstall, slurm_install
from reconciler.local.slurm.jobs import kill_job_processes
from reconciler.local.slurm.prepare import (
    MUNGED,
    check_binaries,
    link_daemons,
    missing_binaries,
    prepare_files,
    write_config_files,
)
from reconciler.local.slurm.site import (
    SlurmPaths,
    SlurmPorts,
    SlurmSite,
    accounting_settings,
    current_user,
    fake_gres_conf,
    local_site_settings,
    make_fake_gpus,
    mint_jwt,
    render_settings,
)

__all__ = [
    "SlurmCluster",
    "SlurmPaths",
    "SlurmPorts",
    "SlurmSite",
    "accounting_settings",
    "check_binaries",
    "current_user",
    "fake_gres_conf",
    "local_site_settings",
    "make_fake_gpus",
    "mint_jwt",
    "missing_binaries",
    "render_settings",
]

READY_SECONDS = 30.0
NODE_READY_SECONDS = 30.0
# Node states (scontrol's State= field, split on '+') that mean "not registered yet".
_UNREGISTERED_STATES = {"FUTURE", "DOWN", "UNKNOWN", "NOT_RESPONDING"}


class SlurmCluster:
    """One local Slurm cluster's daemons under a Supervisor."""

    # Besides one `slurmd-<node>` per started node.
    DAEMONS = ("slurmrestd", "slurmctld", "slurmdbd", "mariadb", "munged")

    def __init__(
        self,
        supervisor: Supervisor,
        paths: SlurmPaths,
        ports: SlurmPorts,
        *,
        accounting: bool = False,
        cluster_name: str = "local",
        install: SlurmInstall | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.paths = paths
        self.ports = ports
        self.accounting = accounting
        self.cluster_name = cluster_name
        self.install = install or slurm_install()

    # ---- environment and commands -------------------------------------------------------

    def env(self, install: SlurmInstall | None = None) -> dict[str, str]:
        """Environment for scontrol/sinfo/sbatch against this cluster: of the stack's install,
        or of `install` (a Pod whose image tag maps to another: slurm_tags.py)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
        env["SLURM_CONF"] = str(self.paths.slurm_conf)
        return (install or self.install).env(env)

    def daemon_dir(self, install: SlurmInstall | None = None) -> Path:
        """Where the daemons of the stack's install, or of `install`, are linked by their
        canonical names."""
        if install is None or install.prefix == self.install.prefix:
            return self.paths.bin
        return link_daemons(self.paths.bin / install.version, install)

    def run(
        self, *argv: str, check: bool = True, timeout: float = 30,
        install: SlurmInstall | None = None,
    ) -> str:  # fmt: skip
        """Run a Slurm client command (of `install`, else the stack's) against this cluster;
        its stdout."""
        result = subprocess.run(list(argv), env=self.env(install), capture_output=True,
                                text=True, timeout=timeout, check=False)  # fmt: skip
        if check and result.returncode != 0:
            raise LocalStackError(
                f"`{' '.join(argv)}` failed (exit {result.returncode}): {result.stderr.strip()}"
            )
        return result.stdout

    def accounting_daemons(self, install: SlurmInstall | None = None) -> Accounting:
        return Accounting(self.supervisor, self.paths, self.ports,
                          functools.partial(self.env, install), self.cluster_name,
                          bin_dir=self.daemon_dir(install))  # fmt: skip

    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.slurmrestd}"

    def version(self) -> str:
        """The Slurm release running, as its scontrol says it ("24.11.5")."""
        return self.run("scontrol", "--version").split()[-1]

    def rest_api_version(self) -> str:
        """The OpenAPI version the reconciler speaks to this slurmrestd ("v0.0.42")."""
        client = connect(self.rest_url(), MintedTokens(self.paths.jwt_key, current_user()))
        client.close()
        return client.api_version

    # ---- files --------------------------------------------------------------------------

    def prepare(self, *, fresh: bool = True, keys: bool = True) -> None:
        """Directories, keys and argv[0] symlinks; wipes job state when `fresh`. Without
        `keys`, the JWT and munge keys come from elsewhere (the Secrets our Pods mount)."""
        prepare_files(self.paths, self.install, fresh=fresh, keys=keys)

    def write_config(self, slurm_conf: str, gres_conf: str) -> None:
        write_config_files(self.paths, slurm_conf, gres_conf)

    # ---- lifecycle ----------------------------------------------------------------------

    def start(
        self, slurm_conf: str, gres_conf: str, nodes: Sequence[str], *, fresh: bool = True
    ) -> dict[str, float]:
        """Write the config, start every daemon and the given nodes' slurmd; seconds per step."""
        check_binaries(self.accounting, self.install)
        self.prepare(fresh=fresh)
        self.write_config(slurm_conf, gres_conf)
        timings: dict[str, float] = {}
        timings["munged"] = self.start_munged()
        if self.accounting:
            timings.update(self.accounting_daemons().start(fresh=fresh))
        timings["slurmctld"] = self.start_slurmctld()
        started = time.monotonic()
        for node in nodes:
            self.start_slurmd(node, wait=False)
        for node in nodes:
            self.wait_node_registered(node)
        timings["slurmd"] = time.monotonic() - started
        timings["slurmrestd"] = self.start_slurmrestd()
        return timings

    def stop(self, *, grace: float = 10.0) -> list[str]:
        """Cancel jobs, then stop daemons in reverse dependency order; names stopped."""
        if self.supervisor.running("slurmctld") is not None:
            self.cancel_all_jobs()
        stopped = []
        order = ["slurmrestd", *self.slurmd_daemons(), *self.sshd_daemons(), "slurmctld",
                 "slurmdbd", "mariadb", "munged"]  # fmt: skip
        for name in order:
            if self.supervisor.stop(name, grace=grace):
                stopped.append(name)
        self.kill_leftover_job_processes()
        return stopped

    def start_slurmd(
        self,
        node: str,
        *,
        wait: bool = True,
        timeout: float = NODE_READY_SECONDS,
        dynamic_conf: str | None = None,
        boot_at_start: bool = False,
        install: SlurmInstall | None = None,
    ) -> float:
        """Start `slurmd -N node` (node declared, e.g. State=FUTURE), or with `dynamic_conf`
        ("CPUs=2 RealMemory=1000 Feature=x Port=N") a dynamic node slurm.conf does not name
        (`slurmd -Z`, MaxNodeCount set); seconds until registered. `install`: another than
        the stack's."""
        spool = self.paths.spool / node
        spool.mkdir(parents=True, exist_ok=True)
        daemons = self.daemon_dir(install)
        argv = [
            str(daemons / "slurmd"), "-D", "-N", node,
            # Absolute path to a symlink named slurmstepd: without it GRES is silently dropped.
            "-d", str(daemons / "slurmstepd"),
        ]  # fmt: skip
        if dynamic_conf is not None:
            argv += ["-Z", "--conf", dynamic_conf]
        if boot_at_start:
            argv.append("-b")
        started = time.monotonic()
        self.supervisor.start(self.slurmd_daemon(node), argv, env=self.env(install))
        if wait:
            self.wait_node_registered(node, timeout=timeout, install=install)
        return time.monotonic() - started

    def stop_slurmd(self, node: str, *, grace: float = 10.0) -> bool:
        stopped = self.supervisor.stop(self.slurmd_daemon(node), grace=grace)
        reap_orphans()
        return stopped

    def wait_node_registered(
        self, node: str, *, timeout: float = NODE_READY_SECONDS, install: SlurmInstall | None = None
    ) -> float:
        """Until slurmctld says `node` registered, asked with the scontrol of `install` (the
        slurmd's: a stack mid-upgrade renders a slurm.conf its own scontrol cannot read)."""
        name = self.slurmd_daemon(node)
        return self.supervisor.wait_ready(
            name, lambda: self.node_registered(node, install), timeout=timeout,
            extra_logs=[self.paths.slurmd_log(node), self.paths.log / "slurmctld.log"],
        )  # fmt: skip

    @staticmethod
    def slurmd_daemon(node: str) -> str:
        return f"slurmd-{node}"

    def slurmd_daemons(self) -> list[str]:
        return [name for name in self.supervisor.names() if name.startswith("slurmd-")]

    def sshd_daemons(self) -> list[str]:
        """The login Pods' sshd (`sshd-<pod>`)."""
        return [name for name in self.supervisor.names() if name.startswith("sshd-")]

    # ---- probes -------------------------------------------------------------------------

    def node_state(self, node: str, install: SlurmInstall | None = None) -> set[str]:
        """State flags from scontrol, e.g. {"IDLE"} or {"IDLE", "DRAIN"}; empty if unknown."""
        out = self.run("scontrol", "show", "node", node, "-o", check=False, install=install)
        for token in out.split():
            if token.startswith("State="):
                return set(token.removeprefix("State=").split("+"))
        return set()

    def node_registered(self, node: str, install: SlurmInstall | None = None) -> bool:
        state = self.node_state(node, install)
        return bool(state) and not (state & _UNREGISTERED_STATES)

    def controller_up(self, install: SlurmInstall | None = None) -> bool:
        """`scontrol ping` says UP (the scontrol of `install`, where slurmctld runs another
        than the stack's: a client newer than slurmctld is refused)."""
        result = subprocess.run(
            ["scontrol", "ping"], env=self.env(install), capture_output=True, text=True,
            timeout=10, check=False,
        )  # fmt: skip
        return result.returncode == 0 and "UP" in result.stdout

    def rest_ready(self, install: SlurmInstall | None = None) -> bool:
        """slurmrestd answers an authenticated ping (so JWT and slurmctld are wired up)."""
        token = mint_jwt(self.paths.jwt_key, current_user(), lifetime=60)
        version = (install or self.install).rest_probe_version
        request = urllib.request.Request(
            f"{self.rest_url()}/slurm/{version}/ping",
            headers={"X-SLURM-USER-NAME": current_user(), "X-SLURM-USER-TOKEN": token},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status == 200

    def health(self) -> dict[str, bool]:
        checks: dict[str, Callable[[], bool]] = {
            "munged": self.paths.munge_socket.is_socket,
            "slurmctld": self.controller_up,
            "slurmrestd": self.rest_ready,
        }
        names = self.supervisor.names()
        if self.accounting or "slurmdbd" in names:
            checks["mariadb"] = lambda: is_accepting(self.ports.mariadb)
            checks["slurmdbd"] = lambda: is_accepting(self.ports.slurmdbd)
        for name in self.slurmd_daemons():
            checks[name] = functools.partial(self.node_registered, name.removeprefix("slurmd-"))
        for name in self.sshd_daemons():
            checks[name] = lambda: is_accepting(self.ports.ssh)
        return {name: self._healthy(name, check) for name, check in checks.items()}

    def cancel_all_jobs(self, timeout: float = 10.0) -> None:
        """Cancel every job and wait for them to leave, so no slurmstepd outlives its slurmd."""
        ids = self.run("squeue", "-h", "-o", "%i", check=False).split()
        if not ids:
            return
        self.run("scancel", "--quiet", *ids, check=False)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = self.run("squeue", "-h", "-o", "%T", check=False).split()
            if not states:
                break
            time.sleep(0.2)
        reap_orphans()

    def kill_leftover_job_processes(self) -> list[int]:
        """SIGKILL what jobs of this cluster left behind (slurmstepd, job processes).

        Found by SLURM_CONF=<this cluster's slurm.conf> together with SLURM_JOB_ID in their
        environment, which Slurm sets for steps and jobs. SLURM_CONF alone is not enough: a
        user who exported it (as the README shows) passes it to every command they start,
        `reconciler local down` itself included.
        """
        return kill_job_processes(self.paths.slurm_conf)

    # ---- daemons ------------------------------------------------------------------------

    def start_munged(self) -> float:
        p = self.paths
        argv = [
            str(MUNGED), "-F", "-S", str(p.munge_socket), f"--key-file={p.munge_key}",
            f"--pid-file={p.run / 'munged.pid'}", f"--log-file={p.munge / 'munged.log'}",
            f"--seed-file={p.munge / 'munged.seed'}",
        ]  # fmt: skip
        p.munge_socket.unlink(missing_ok=True)
        self.supervisor.start("munged", argv, env=self.env())
        return self.supervisor.wait_ready(
            "munged", p.munge_socket.is_socket, timeout=READY_SECONDS,
            extra_logs=[p.munge / "munged.log"],
        )  # fmt: skip

    def start_slurmctld(self, install: SlurmInstall | None = None) -> float:
        argv = [str(self.daemon_dir(install) / "slurmctld"), "-D", "-i"]
        self.supervisor.start("slurmctld", argv, env=self.env(install))
        return self.supervisor.wait_ready(
            "slurmctld", functools.partial(self.controller_up, install), timeout=READY_SECONDS,
            extra_logs=[self.paths.log / "slurmctld.log"],
        )  # fmt: skip

    def start_slurmrestd(self, install: SlurmInstall | None = None) -> float:
        install = install or self.install
        argv = [str(install.slurmrestd)]
        if os.getuid() == 0:
            argv += install.rest_identity  # slurmrestd refuses to run as root
        plugins = install.rest_plugins[1 if self.accounting else 0]
        argv += ["-a", "rest_auth/jwt", "-s", plugins, f"127.0.0.1:{self.ports.slurmrestd}"]
        # SLURM_JWT=daemon: slurmrestd itself talks to slurmctld with auth/jwt, otherwise it
        # rejects every request with 401 "Rejecting thread config token".
        env = {**self.env(install), "SLURM_JWT": "daemon"}
        self.supervisor.start("slurmrestd", argv, env=env)
        return self.supervisor.wait_ready("slurmrestd", functools.partial(self.rest_ready, install),
                                          timeout=READY_SECONDS)  # fmt: skip

    def _healthy(self, name: str, check: Callable[[], bool]) -> bool:
        if self.supervisor.running(name) is None:
            return False
        try:
            return bool(check())
        except Exception:
            return False
