"""An image run without a container runtime: its filesystem exported and chrooted into.

`podman run` does not work on this kind of machine (crun fails on setrlimit, and cgroups are in
hybrid mode), so a test runs an image as a container would: the exported root mounted read-only
in a private mount namespace, with /proc, /dev and a tmpfs /tmp, in its own PID namespace (the
image's entrypoint is PID 1, and everything it started ends with it), as the image's user (or
the one a Pod's securityContext would give), with the image's environment only. The Pod's
volumes are bind mounts: read-only files (a ConfigMap, a Secret) or a writable folder (an
emptyDir, shared by the containers of one Pod as a host folder binds into each).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from tests.integration.image import Built, ImageError, Podman


@dataclass(frozen=True)
class ImageConfig:
    env: dict[str, str]
    entrypoint: list[str]
    user: str
    workdir: str

    @classmethod
    def of(cls, inspected: Mapping) -> ImageConfig:
        config = inspected["Config"]
        env = dict(item.split("=", 1) for item in config.get("Env") or [])
        return cls(env, list(config.get("Entrypoint") or []), config.get("User") or "0:0",
                   config.get("WorkingDir") or "/")  # fmt: skip


def export_rootfs(podman: Podman, tag: str, dest: Path) -> None:
    """The image's filesystem, unpacked into dest (a created container, exported, removed)."""
    name = f"sunk-reconciler-export-{os.getpid()}"
    podman.run("create", "--name", name, tag)
    try:
        dest.mkdir(parents=True, exist_ok=True)
        export = subprocess.Popen(podman.command("export", name), stdout=subprocess.PIPE)
        # Numeric: by name, tar would give the image's munge (64031) files to the host's munge.
        untar = subprocess.run(["tar", "--numeric-owner", "-x", "-C", str(dest)],
                               stdin=export.stdout, capture_output=True, timeout=600)  # fmt: skip
        if export.wait(timeout=600) != 0 or untar.returncode != 0:
            raise ImageError(f"export of {tag} failed: {untar.stderr.decode(errors='replace')}")
    finally:
        podman.run("rm", "--force", name)


# Runs inside private mount, PID and UTS namespaces: the hostname when one is given, rootfs
# bound read-only, /proc, /dev, /sys (read-only, cgroups below it) and a tmpfs /tmp, then each
# volume (source, target, ro|rw; a file's target is made a file), then the command as the
# given user in the workdir.
_CHROOT_SCRIPT = r"""
set -eu
root=$1; user=$2; workdir=$3; name=$4; shift 4
[ -z "$name" ] || hostname "$name"
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"; mount -o remount,bind,ro "$root/sys"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
while [ "$1" != -- ]; do
  if [ -d "$1" ]; then mkdir -p "$root$2"; else mkdir -p "$(dirname "$root$2")"; touch "$root$2"; fi
  mount --bind "$1" "$root$2"
  [ "$3" = rw ] || mount -o remount,bind,ro "$root$2"
  shift 3
done
shift
mount -o remount,bind,ro "$root"
exec chroot --userspec="$user" "$root" /bin/sh -c 'cd "$0" && exec "$@"' "$workdir" "$@"
"""


def chroot_command(
    rootfs: Path,
    config: ImageConfig,
    args: Sequence[str],
    *,
    binds: Mapping[Path, str] = {},
    volumes: Mapping[str, Path] = {},
    env: Mapping[str, str] = {},
    entrypoint: bool = True,
    user: str | None = None,
    netns: str | None = None,
    hostname: str = "",
) -> list[str]:
    """The command line that runs `args` after the image's entrypoint (or alone).

    binds: host path -> container path, mounted read-only (a ConfigMap or Secret file or
    folder). volumes: container path -> host folder, mounted writable (an emptyDir).
    user: `uid:gid` instead of the image's own (a Pod's runAsUser/runAsGroup).
    netns: a network namespace (`ip netns add`) to run in, as a Pod's containers share one;
    without it, the host's. hostname: the container's (a Pod's name), else the host's."""
    mounts = [
        *(part for source, target in binds.items() for part in (str(source), target, "ro")),
        *(part for target, source in volumes.items() for part in (str(source), target, "rw")),
    ]
    environment = [f"{k}={v}" for k, v in {**config.env, **env}.items()]
    command = [*(config.entrypoint if entrypoint else []), *args]
    # nsenter, not `ip netns exec`, which mounts a /sys of its own, without the cgroups.
    namespaces = [*(["nsenter", f"--net=/run/netns/{netns}"] if netns else []),
                  "unshare", "--mount", "--propagation", "private", "--pid", "--fork",
                  "--kill-child", "--uts"]  # fmt: skip
    chroot = ["chroot", str(rootfs), user or config.user, config.workdir, hostname, *mounts, "--"]
    return [*namespaces, "sh", "-c", _CHROOT_SCRIPT, *chroot,
            "/usr/bin/env", "-i", *environment, *command]  # fmt: skip


def run_in_chroot(
    rootfs: Path,
    config: ImageConfig,
    args: Sequence[str],
    *,
    timeout: float = 120,
    **options: object,
) -> subprocess.CompletedProcess[str]:
    """`args` run to the end (chroot_command's options), output captured."""
    command = chroot_command(rootfs, config, args, **options)  # type: ignore[arg-type]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def start_in_chroot(
    rootfs: Path, config: ImageConfig, args: Sequence[str], output: IO[bytes], **options: object
) -> subprocess.Popen[bytes]:
    """`args` started in the background (a daemon), its output to `output`; stop it with
    stop_in_chroot."""
    command = chroot_command(rootfs, config, args, **options)  # type: ignore[arg-type]
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output,
                            stderr=subprocess.STDOUT)  # fmt: skip


def stop_in_chroot(process: subprocess.Popen[bytes], grace: float = 10.0) -> int | None:
    """SIGTERM to the container's PID 1 (as a kubelet stops a container), then, after `grace`
    seconds, SIGKILL to unshare, which takes its PID namespace down with it. The exit status
    of the container's PID 1 as unshare reports it, or None when it had to be killed."""
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    with suppress(OSError, ValueError):
        for pid in children.read_text().split():
            os.kill(int(pid), signal.SIGTERM)
    try:
        return process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
        return None


@dataclass(frozen=True)
class Exported:
    """A built image, its filesystem unpacked at rootfs: run or start what is in it."""

    built: Built
    rootfs: Path
    config: ImageConfig

    @classmethod
    def of(cls, built: Built, rootfs: Path) -> Exported:
        export_rootfs(built.podman, built.tag, rootfs)
        return cls(built, rootfs, ImageConfig.of(built.podman.inspect(built.tag)))

    def run(self, *args: str, **options: object) -> subprocess.CompletedProcess[str]:
        return run_in_chroot(self.rootfs, self.config, args, **options)  # type: ignore[arg-type]

    def start(self, log: Path, *args: str, **options: object) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return start_in_chroot(self.rootfs, self.config, args, out, **options)


def built_and_exported(
    make: Callable[[], Built], tmp_path_factory: pytest.TempPathFactory, figures: dict[str, str]
) -> Iterator[Exported]:
    """A module fixture's body: the image `make` builds, exported for the module's tests (a
    skip where podman or root is missing), its size and build time in the session's figures."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (CI installs it: apt-get install podman debootstrap)")
    if os.geteuid() != 0:
        pytest.skip("building with podman and running under chroot needs root")
    built = make()
    figures[f"image {built.tag}"] = (
        f"{built.size_bytes / 1e6:.0f} MB; podman build {built.seconds:.0f} s"
        f" ({built.podman.driver} storage; less where CI's early build left layers)"
    )
    rootfs = tmp_path_factory.mktemp("image") / "rootfs"
    yield Exported.of(built, rootfs)
    shutil.rmtree(rootfs, ignore_errors=True)


@contextmanager
def pod_network(name: str, address: str = "10.244.0.2/24") -> Iterator[str]:
    """A network namespace for containers that talk to each other (`netns=` above): loopback,
    and a Pod's address on a veth pair whose both ends are inside it (with loopback alone,
    getaddrinfo's AI_ADDRCONFIG, which Slurm uses, finds no address for `localhost`). Nothing
    listening in it is reachable from the host or beyond."""
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True, timeout=30)
    try:
        steps = [["link", "set", "lo", "up"],
                 ["link", "add", "eth0", "type", "veth", "peer", "name", "eth0-peer"],
                 ["address", "add", address, "dev", "eth0"],
                 ["link", "set", "eth0", "up"], ["link", "set", "eth0-peer", "up"]]  # fmt: skip
        for step in steps:
            subprocess.run(["ip", "-n", name, *step], check=True, capture_output=True, timeout=30)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)
