"""One containerd per kubelet Node: Debian's containerd 1.6 with its CRI plugin and runc.

Each runs inside its Node's mount namespace (node_host.py) with its own root, state, socket
and CNI configuration under the Node's directory. The CNI network is a bridge of the Node's
own (`cni-<node>`) with host-local addresses from the Node's Pod subnet, inside the cluster's
network namespace, so Pods of every Node route to each other there.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import LocalStackError

CONTAINERD = Path("/usr/bin/containerd")
CTR = Path("/usr/bin/ctr")
RUNC = Path("/usr/sbin/runc")
CNI_BIN_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
CRI_NAMESPACE = "k8s.io"
OCI_REF_NAME = "org.opencontainers.image.ref.name"


@dataclass(frozen=True)
class ContainerdPaths:
    """A Node's containerd files; `base` is the Node's directory."""

    base: Path

    @property
    def root(self) -> Path:
        return self.base / "containerd" / "root"

    @property
    def state(self) -> Path:
        return self.base / "containerd" / "state"

    @property
    def socket(self) -> Path:
        return self.base / "containerd.sock"

    @property
    def config(self) -> Path:
        return self.base / "containerd.toml"

    @property
    def cni_conf_dir(self) -> Path:
        return self.base / "cni"

    @property
    def cni_data_dir(self) -> Path:
        return self.base / "cni-ipam"

    def task_ids(self) -> list[str]:
        """Ids of containers with a task (running or not yet deleted): containerd keeps a
        directory per task in its state, readable when containerd itself is gone."""
        tasks = self.state / "io.containerd.runtime.v2.task" / CRI_NAMESPACE
        return sorted(p.name for p in tasks.iterdir()) if tasks.is_dir() else []


def config_toml(paths: ContainerdPaths, sandbox_image: str) -> str:
    """containerd's configuration (version 2).

    `restrict_oom_score_adj`: without it runc fails every sandbox here with "can't get final
    child's PID from pipe" (the process may not lower its oom_score_adj). AppArmor is off: the
    profile containerd would load is not on this machine.
    """
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{paths.root}"
state = "{paths.state}"

[grpc]
  address = "{paths.socket}"

[metrics]
  address = ""

[{cri}]
  sandbox_image = "{sandbox_image}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  enable_selinux = false

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "{RUNC}"

[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{paths.cni_conf_dir}"
  max_conf_num = 1

[{cri}.registry]
  config_path = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{paths.base / "containerd" / "opt"}"
"""


def cni_config(paths: ContainerdPaths, node: str, bridge: str, subnet: str) -> dict[str, object]:
    """A bridge network for the Node's Pods: the bridge is their gateway, host-local hands
    out the subnet's addresses (its records kept in the Node's directory). No masquerade:
    nothing leaves the cluster's network namespace."""
    return {
        "cniVersion": "0.4.0",
        "name": f"pods-{node}",
        "plugins": [
            {
                "type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False,
                "hairpinMode": True,
                "ipam": {"type": "host-local", "dataDir": str(paths.cni_data_dir),
                         "ranges": [[{"subnet": subnet}]], "routes": [{"dst": "0.0.0.0/0"}]},
            },
            {"type": "loopback"},
        ],
    }  # fmt: skip


def write_config(paths: ContainerdPaths, node: str, *, bridge: str, subnet: str,
                 sandbox_image: str) -> None:  # fmt: skip
    paths.cni_conf_dir.mkdir(parents=True, exist_ok=True)
    paths.config.write_text(config_toml(paths, sandbox_image))
    conf = paths.cni_conf_dir / "10-pods.conflist"
    conf.write_text(json.dumps(cni_config(paths, node, bridge, subnet), indent=2) + "\n")


def containerd_argv(paths: ContainerdPaths) -> list[str]:
    return [str(CONTAINERD), "--config", str(paths.config), "--log-level", "warn"]


def ctr(paths: ContainerdPaths, *args: str, wrapper: list[str],
        timeout: float = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """`ctr` on the Node's containerd (in the Node's namespaces: snapshots mount there)."""
    argv = [*wrapper, str(CTR), "--address", str(paths.socket), "-n", CRI_NAMESPACE, *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise LocalStackError(f"`ctr {' '.join(args)}` failed: {done.stderr.strip()[-600:]}")
    return done


def archive_image_names(archive: Path) -> list[str]:
    """The image names an OCI archive's index gives (what `ctr images import` will call
    them), or an error when one is a bare tag, which ctr would name `import-<date>:<tag>`."""
    try:
        with tarfile.open(archive) as tar:
            member = tar.extractfile("index.json")
            index = json.load(member) if member else {}
    except (OSError, KeyError, tarfile.TarError, json.JSONDecodeError) as exc:
        raise LocalStackError(
            f"{archive} is not an OCI archive: {exc}",
            hint="make it with `podman save --format oci-archive`",
        ) from exc
    names = []
    for manifest in index.get("manifests") or []:
        notes = manifest.get("annotations") or {}
        name = notes.get("io.containerd.image.name") or notes.get(OCI_REF_NAME, "")
        if "/" not in name:
            raise LocalStackError(
                f"{archive} names its image {name!r}, not a full reference",
                hint="save it by its full name: podman save --format oci-archive -o FILE "
                "REGISTRY/REPOSITORY:TAG",
            )
        names.append(name)
    return names


def import_image(paths: ContainerdPaths, archive: Path, *, wrapper: list[str]) -> None:
    """Load an OCI archive (`podman save --format oci-archive`, or pause_image's) into the
    Node's containerd, where kubelet's CRI finds it; its name comes from the archive."""
    archive_image_names(archive)
    ctr(paths, "images", "import", str(archive), wrapper=wrapper,
        timeout=600)  # fmt: skip


def containerd_ready(paths: ContainerdPaths, wrapper: list[str]) -> bool:
    try:
        ctr(paths, "version", wrapper=wrapper, timeout=10)
    except (LocalStackError, subprocess.TimeoutExpired):
        return False
    return True
