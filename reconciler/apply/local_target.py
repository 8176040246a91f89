"""Plan and apply against a running local stack: its adapters, its profile, and where
slurmctld reads its config (the files the node agent writes for the controller Pod)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from reconciler.adapters.kube import Kube
from reconciler.adapters.sacctmgr import Sacctmgr
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.client import connect_lazily
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.apply.controller import DeploymentRestarter
from reconciler.apply.target import ApplyError, Target
from reconciler.compile.profile import Profile
from reconciler.local.slurm import SlurmSite, current_user
from reconciler.local.slurm_site import local_dbd_site
from reconciler.local.stack import LocalStack


def open_stack(runtime_dir: Path) -> LocalStack:
    stack = LocalStack.open(runtime_dir)
    if stack.slurm is None or stack.kube is None or stack.foreground.pid() is None:
        raise ApplyError(
            f"the local stack in {runtime_dir} is not running",
            hint="start it with `reconciler local up` (it stays in the foreground)",
        )
    return stack


def local_profile_of(stack: LocalStack, nodes: Sequence[str] = ()) -> Profile:
    """The stack's local profile; `nodes` (all declared ones) get ports first if new."""
    stack.ensure_node_ports(nodes)
    return site_profile(stack.slurm_site())


def site_profile(site: SlurmSite) -> Profile:
    ports = site.ports
    return Profile.local(
        site=site.settings,
        slurmctld_port=ports.slurmctld,
        slurmd_port=ports.slurmd,
        node_port_base=max(ports.nodes.values(), default=ports.slurmd) + 1,
        node_ports=ports.nodes,
        gres_device_dir=str(site.paths.dev),
        conf_dir=str(site.paths.etc),
        dbd_site=local_dbd_site(site.paths),
        client_env=site.client_env,
        control_ports={
            "rest": ports.slurmrestd,
            "dbd": ports.slurmdbd,
            "mysql": ports.mariadb,
            "ssh": ports.ssh,
        },
    )


def local_target(
    stack: LocalStack,
    namespace: str,
    release: str = "",
    *,
    kubeconfig: Path | None = None,
    slurm_url: str | None = None,
) -> Target:
    """The local stack; `kubeconfig` talks to its API server as someone other than admin,
    `slurm_url` to its slurmrestd through something in between (a test's fault proxy).
    slurmctld runs as the controller Pod of `release`: apply restarts it as on any cluster,
    by rolling that Deployment."""
    slurm = stack.slurm
    assert slurm is not None
    tokens = MintedTokens(slurm.paths.jwt_key, current_user())
    kube = Kube.from_kubeconfig(kubeconfig or stack.kube_paths.kubeconfig)
    rest = connect_lazily(slurm_url or slurm.rest_url(), tokens)
    accounting = slurm.accounting or slurm.supervisor.running("slurmdbd") is not None
    return Target(
        kube=kube,
        slurm=rest,
        scontrol=Scontrol(tokens, env=slurm.env()),
        namespace=namespace,
        sink=FileSink(slurm.paths.slurm_conf, slurm.paths.gres_conf, slurm.paths.etc),
        restarter=DeploymentRestarter.if_ours(kube, namespace, release, slurm.controller_up)
        if release
        else None,
        sacctmgr=Sacctmgr(env=slurm.env(), cluster=stack.cluster_name) if accounting else None,
        slurm_release=slurm.install.release,
    )


class FileSink:
    """slurmctld reads the files the node agent writes from the ConfigMap."""

    def __init__(self, slurm_conf: Path, gres_conf: Path, etc: Path) -> None:
        self._files = (slurm_conf, gres_conf)
        self._etc = etc  # where the topology files are, beside slurm.conf

    def wait_for(
        self,
        slurm_conf: str,
        gres_conf: str,
        timeout: float,
        *,
        topology_files: Mapping[str, str] | None = None,
    ) -> None:
        """`topology_files`: their texts too, by file name, when apply writes them."""
        wanted = [*zip(self._files, (slurm_conf, gres_conf), strict=True)]
        wanted += [(self._etc / name, text) for name, text in (topology_files or {}).items()]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(_read(p) == t for p, t in wanted):
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


def scheduler_endpoints(
    stack: LocalStack, slurm_url: str | None = None
) -> tuple[Path, str, Path, str]:
    """(kubeconfig, slurmrestd URL, JWT key, operator user) for a scheduler on this stack;
    `slurm_url` replaces the stack's slurmrestd URL (see local_target)."""
    slurm = stack.slurm
    assert slurm is not None
    url = slurm_url or slurm.rest_url()
    return stack.kube_paths.kubeconfig, url, slurm.paths.jwt_key, current_user()
