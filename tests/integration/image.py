"""The reconciler image, built and run without a registry or a container runtime.

The base is Debian 12 made by debootstrap and imported into podman; the Containerfile is built
FROM it by podman (vfs storage, chroot isolation); the image's filesystem is exported and its
entrypoint run under chroot as the image's user, on a read-only root with /tmp a tmpfs, as the
Deployment runs it. Storage and the base live in a cache shared by CI's early build
(`python -m tests.integration.image build`) and the test, under one lock: whichever comes
second finds every layer built.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sunk-reconciler" / "image"
BASE_TAG = "localhost/debian:bookworm"
REPOSITORY = "ghcr.io/sunk-reconciler/reconciler"
MIRROR = os.environ.get("SUNK_RECONCILER_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# pip inside the build trusts what this machine trusts (a proxy's CA included).
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
BUILD_TIMEOUT = 3600


class ImageError(RuntimeError):
    """A step of making or running the image failed; the message ends with its output."""


def image_tag() -> str:
    """The tag deploy/ names: the repository and the project's version."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return f"{REPOSITORY}:{version}"


def storage_driver() -> str:
    """overlay where the kernel mounts one here, else vfs (which copies every layer whole:
    the same build takes several times as long)."""
    chosen = os.environ.get("SUNK_RECONCILER_PODMAN_DRIVER")
    if chosen:
        return chosen
    probe = CACHE / "overlay-probe"
    dirs = {name: probe / name for name in ("lower", "upper", "work", "merged")}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    options = f"lowerdir={dirs['lower']},upperdir={dirs['upper']},workdir={dirs['work']}"
    mounted = subprocess.run(
        ["mount", "-t", "overlay", "overlay", "-o", options, str(dirs["merged"])],
        capture_output=True, timeout=30,
    )  # fmt: skip
    if mounted.returncode == 0:
        subprocess.run(["umount", str(dirs["merged"])], capture_output=True, timeout=30)
    shutil.rmtree(probe, ignore_errors=True)
    return "overlay" if mounted.returncode == 0 else "vfs"


@dataclass(frozen=True)
class Podman:
    """podman on private storage: the machine's own images and containers are never touched."""

    driver: str = "vfs"

    @classmethod
    def here(cls) -> Podman:
        return cls(storage_driver())

    @property
    def storage(self) -> Path:
        return CACHE / f"storage-{self.driver}"

    @property
    def runroot(self) -> Path:
        # Short: overlay refuses a run root of over 50 characters.
        return Path("/run/sunk-reconciler") / f"podman-{self.driver}"

    def command(self, *args: str) -> list[str]:
        return [
            "podman", "--root", str(self.storage), "--runroot", str(self.runroot),
            "--storage-driver", self.driver, "--events-backend", "file",
            "--cgroup-manager", "cgroupfs", *args,
        ]  # fmt: skip

    def run(
        self, *args: str, log: Path | None = None, stdin: int | None = None
    ) -> subprocess.CompletedProcess[str]:
        cmd = self.command(*args)
        if log is None:
            done = subprocess.run(cmd, capture_output=True, text=True, stdin=stdin, timeout=600)
            output = done.stdout + done.stderr
        else:
            with log.open("a") as out:
                out.write(f"$ {shlex.join(cmd)}\n")
                out.flush()
                done = subprocess.run(
                    cmd, stdout=out, stderr=subprocess.STDOUT, text=True, stdin=stdin,
                    timeout=BUILD_TIMEOUT,
                )  # fmt: skip
            output = _tail(log)
        if done.returncode != 0:
            raise ImageError(f"`podman {' '.join(args[:2])}` exited {done.returncode}:\n{output}")
        return done

    def exists(self, tag: str) -> bool:
        cmd = self.command("image", "exists", tag)
        return subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0

    def inspect(self, tag: str) -> dict:
        return json.loads(self.run("image", "inspect", tag).stdout)[0]


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


@contextmanager
def build_lock() -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_base(podman: Podman, log: Path) -> None:
    """Debian 12 minbase from Debian's mirror, as the image BASE_TAG (made once per cache)."""
    if podman.exists(BASE_TAG):
        return
    rootfs = CACHE / "debootstrap"
    shutil.rmtree(rootfs, ignore_errors=True)
    with log.open("a") as out:
        cmd = ["debootstrap", "--variant=minbase", "bookworm", str(rootfs), MIRROR]
        out.write(f"$ {shlex.join(cmd)}\n")
        out.flush()
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT)
    if done.returncode != 0:
        raise ImageError(f"debootstrap exited {done.returncode}:\n{_tail(log)}")
    slim(rootfs)
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    try:
        podman.run("import", "-", BASE_TAG, log=log, stdin=tar.stdout.fileno())  # type: ignore[union-attr]
    finally:
        tar.wait()
        shutil.rmtree(rootfs, ignore_errors=True)


def slim(rootfs: Path) -> None:
    """What Debian's own bookworm-slim leaves out: downloaded packages, package lists,
    documentation (copyright notices kept), manuals and translations. The Containerfile then
    measures the same on either base."""
    doomed = [
        *(rootfs / "var/cache/apt/archives").glob("*.deb"),
        *(rootfs / "var/lib/apt/lists").glob("*_*"),
        *(rootfs / "usr/share/man").glob("*"),
        *(rootfs / "usr/share/locale").glob("*"),
        *(rootfs / "usr/share/info").glob("*"),
        *(p for p in (rootfs / "usr/share/doc").glob("*/*") if p.name != "copyright"),
    ]
    for path in doomed:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)  # a doc folder may be a link to another


@dataclass(frozen=True)
class Built:
    tag: str
    seconds: float  # the build alone, base excluded
    size_bytes: int
    log: Path
    podman: Podman


def build(podman: Podman | None = None, tag: str | None = None) -> Built:
    """The Containerfile built FROM the debootstrapped base and tagged as deploy/ names it."""
    tag = tag or image_tag()
    with build_lock():
        podman = podman or Podman.here()
        log = CACHE / "build.log"
        log.write_text("")
        ensure_base(podman, log)
        pip_conf = CACHE / "pip.conf"
        pip_conf.write_text("[global]\ncert = /run/host-ca/ca-certificates.crt\n")
        started = time.monotonic()
        podman.run(
            "build", "--isolation", "chroot", "--build-arg", f"BASE={BASE_TAG}",
            "--build-arg", f"VERSION={tag.rsplit(':', 1)[1]}",
            "--volume", f"{pip_conf}:/etc/pip.conf:ro",
            "--volume", f"{HOST_CA_BUNDLE.parent}:/run/host-ca:ro",
            "--tag", tag, "--file", str(ROOT / "Containerfile"), str(ROOT),
            log=log,
        )  # fmt: skip
        seconds = time.monotonic() - started
        return Built(tag, seconds, int(podman.inspect(tag)["Size"]), log, podman)


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
        untar = subprocess.run(
            ["tar", "-x", "-C", str(dest)], stdin=export.stdout, capture_output=True, timeout=600
        )
        if export.wait(timeout=600) != 0 or untar.returncode != 0:
            raise ImageError(f"export of {tag} failed: {untar.stderr.decode(errors='replace')}")
    finally:
        podman.run("rm", "--force", name)


# Runs inside a private mount namespace: rootfs bound read-only, /proc, /dev and a tmpfs /tmp,
# read-only binds under /tmp, then the command as the image's user in its workdir.
_CHROOT_SCRIPT = r"""
set -eu
root=$1; user=$2; workdir=$3; shift 3
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
while [ "$1" != -- ]; do
  mkdir -p "$root$2"; mount --bind "$1" "$root$2"; mount -o remount,bind,ro "$root$2"; shift 2
done
shift
mount -o remount,bind,ro "$root"
exec chroot --userspec="$user" "$root" /bin/sh -c 'cd "$0" && exec "$@"' "$workdir" "$@"
"""


def run_in_chroot(
    rootfs: Path,
    config: ImageConfig,
    args: Sequence[str],
    *,
    binds: Mapping[Path, str] = {},
    env: Mapping[str, str] = {},
    entrypoint: bool = True,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`args` after the image's entrypoint (or alone), with the image's environment only.

    binds: host path -> path under /tmp in the container, mounted read-only."""
    for target in binds.values():
        if not target.startswith("/tmp/"):
            raise ValueError(f"bind target {target!r}: only /tmp is writable before the run")
    pairs = [part for source, target in binds.items() for part in (str(source), target)]
    environment = [f"{k}={v}" for k, v in {**config.env, **env}.items()]
    command = [*(config.entrypoint if entrypoint else []), *args]
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", _CHROOT_SCRIPT, "chroot",
         str(rootfs), config.user, config.workdir, *pairs, "--",
         "/usr/bin/env", "-i", *environment, *command],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.integration.image",
        description="Build the reconciler image as the image test does (CI starts it early).",
    )
    parser.add_argument("command", choices=["build"])
    parser.parse_args(argv)
    try:
        built = build()
    except (ImageError, OSError, subprocess.SubprocessError) as err:
        print(f"image build failed: {err}", file=sys.stderr)
        return 1
    print(
        f"{built.tag}: {built.size_bytes / 1e6:.0f} MB, built in {built.seconds:.0f} s"
        f" (podman, {built.podman.driver} storage)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
