"""Plan and apply against a running local stack: its adapters, profile, and the two things
only it can do — show when slurmctld holds new config, and restart slurmctld."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

from reconciler.adapters.kube import Kube
from reconciler.adapters.sacctmgr import Sacctmgr
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm_client import connect
from reconciler.adapters.slurm_jwt import MintedTokens
from reconciler.apply.executor import ApplyError, Target
from reconciler.compile.profile import Profile
from reconciler.local.slurm import SlurmSite, current_user, local_site_settings
from reconciler.local.stack import LocalStack

# The foreground `up` process restarts slurmctld on SIGHUP (it is slurmctld's parent).
RESTART_SIGNAL = signal.SIGHUP


def open_stack(runtime_dir: Path) -> LocalStack:
    stack = LocalStack.open(runtime_dir)
    if stack.slurm is None or stack.kube is None or stack.foreground_pid() is None:
        raise ApplyError(
            f"the local stack in {runtime_dir} is not running",
            hint="start it with `reconciler local up` (it stays in the foreground)",
        )
    return stack


def local_profile_of(stack: LocalStack, nodes: Sequence[str] = ()) -> Profile:
    """The stack's local profile; `nodes` (all declared ones) get ports first if new."""
    stack.ensure_node_ports(nodes)
    slurm = stack.slurm
    assert slurm is not None
    site = SlurmSite(
        slurm.paths,
        slurm.ports,
        local_site_settings(slurm.paths, slurm.ports, slurm.accounting,
                            cluster_name=stack.cluster_name),
        slurm.accounting,
        stack.cluster_name,
    )  # fmt: skip
    return site_profile(site)


def site_profile(site: SlurmSite) -> Profile:
    return Profile.local(
        site=site.settings,
        slurmctld_port=site.ports.slurmctld,
        slurmd_port=site.ports.slurmd,
        node_port_base=max(site.ports.nodes.values(), default=site.ports.slurmd) + 1,
        node_ports=site.ports.nodes,
        gres_device_dir=str(site.paths.dev),
        conf_dir=str(site.paths.etc),
    )


def local_target(stack: LocalStack, namespace: str, *, kubeconfig: Path | None = None) -> Target:
    """The local stack; `kubeconfig` talks to its API server as someone other than admin."""
    slurm = stack.slurm
    assert slurm is not None
    tokens = MintedTokens(slurm.paths.jwt_key, current_user())
    return Target(
        kube=Kube.from_kubeconfig(kubeconfig or stack.kube_paths.kubeconfig),
        slurm=connect(slurm.rest_url(), tokens),
        scontrol=Scontrol(tokens, env=slurm.env()),
        namespace=namespace,
        sink=FileSink(slurm.paths.slurm_conf, slurm.paths.gres_conf),
        restarter=ForegroundRestarter(stack),
        sacctmgr=Sacctmgr(env=slurm.env(), cluster=stack.cluster_name)
        if slurm.accounting
        else None,
    )


class FileSink:
    """slurmctld reads the files the node agent writes from the ConfigMap."""

    def __init__(self, slurm_conf: Path, gres_conf: Path) -> None:
        self._files = (slurm_conf, gres_conf)

    def wait_for(self, slurm_conf: str, gres_conf: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(
                _read(p) == t for p, t in zip(self._files, (slurm_conf, gres_conf), strict=True)
            ):
                return
            time.sleep(0.1)
        raise ApplyError(
            f"{self._files[0]} does not hold the new config after {timeout:g} s",
            hint="is `reconciler local up` (its node agent) still running?",
        )


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


class ForegroundRestarter:
    """Asks the `up` process (slurmctld's parent) to restart slurmctld, and waits for it."""

    def __init__(self, stack: LocalStack) -> None:
        self._stack = stack

    def restart(self, timeout: float) -> None:
        pid = self._stack.foreground_pid()
        slurm = self._stack.slurm
        if pid is None or slurm is None:
            raise ApplyError("cannot restart slurmctld: the local stack is not running")
        before = self._stack.supervisor.running("slurmctld")
        os.kill(pid, RESTART_SIGNAL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = self._stack.supervisor.running("slurmctld")
            if (
                now is not None
                and (before is None or now.pid != before.pid)
                and slurm.controller_up()
            ):
                return
            time.sleep(0.2)
        raise ApplyError(f"slurmctld did not come back within {timeout:g} s",
                         hint=f"see {slurm.paths.log}/slurmctld.log")  # fmt: skip


def scheduler_endpoints(stack: LocalStack) -> tuple[Path, str, Path, str]:
    """(kubeconfig, slurmrestd URL, JWT key, operator user) for a scheduler on this stack."""
    slurm = stack.slurm
    assert slurm is not None
    return stack.kube_paths.kubeconfig, slurm.rest_url(), slurm.paths.jwt_key, current_user()
