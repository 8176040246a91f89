"""What a plan and apply against a running local stack need from it: the stack opened only
when it runs, the profile it compiles for, the files slurmctld reads its config from (the
ones the node agent writes for the controller Pod), the environment its Slurm commands run in,
and its endpoints for a scheduler."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from reconciler import wellknown as wk
from reconciler.adapters.client_env import EnvSource
from reconciler.adapters.kube import Kube
from reconciler.compile.profile import Profile
from reconciler.errors import LocalStackError
from reconciler.local.slurm.install import installs_by_tag
from reconciler.local.slurm.site import SlurmSite, current_user, local_dbd_site
from reconciler.local.slurm.tags import controller_pod, mapped_install
from reconciler.local.stack import LocalStack


def open_stack(runtime_dir: Path) -> LocalStack:
    stack = LocalStack.open(runtime_dir)
    if stack.slurm is None or stack.kube is None or stack.foreground.pid() is None:
        raise LocalStackError(
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
        raise LocalStackError(
            f"{self._files[0]} does not hold the new config after {timeout:g} s",
            hint="is `reconciler local up` (its node agent) still running?",
        )


def client_env(stack: LocalStack, kube: Kube) -> EnvSource:
    """The environment of scontrol and sacctmgr against the stack: its install's, or, where
    `up` mapped image tags to installs ($SUNK_RECONCILER_SLURM_TAGS, as its record keeps it),
    the install slurmctld's Pod runs now, read for each command (an upgrade moves it; a client
    older than slurmctld cannot parse the slurm.conf rendered for it, one newer is refused)."""
    slurm = stack.slurm
    assert slurm is not None
    tags = installs_by_tag(stack.slurm_tags)
    if not tags:
        return slurm.env()

    def now() -> dict[str, str]:
        pods = kube.list("v1", "Pod", label_selector=f"{wk.LABEL_NAME}=slurmctld").items
        pod = controller_pod(pods)
        return slurm.env(mapped_install(pod, tags) if pod is not None else None)

    return now


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def scheduler_endpoints(
    stack: LocalStack, slurm_url: str | None = None
) -> tuple[Path, str, Path, str]:
    """(kubeconfig, slurmrestd URL, JWT key, operator user) for a scheduler on this stack;
    `slurm_url` replaces the stack's slurmrestd URL (a test's fault proxy)."""
    slurm = stack.slurm
    assert slurm is not None
    url = slurm_url or slurm.rest_url()
    return stack.kube_paths.kubeconfig, url, slurm.paths.jwt_key, current_user()
