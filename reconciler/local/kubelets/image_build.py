"""The project's images, built without a registry: the reconciler's (root Containerfile) and
the cluster's (deploy/images/slurm, deploy/images/mariadb).

The base is Debian 12 made by debootstrap and imported into podman; each Containerfile is built
FROM it by podman (overlay or vfs storage, chroot isolation). Storage and the base live in a
cache shared by CI's early build (`python -m tests.integration.image build`), the tests and
`reconciler local up --kubelet`, under one lock: whichever comes second finds every layer
built. save_oci_archive hands an image to containerd (`ctr -n k8s.io images import`);
oci_archive does so once per image id, building the image first if it is missing.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# A source checkout: the Containerfiles are not in the installed package.
ROOT = Path(__file__).resolve().parents[3]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sunk-reconciler" / "image"
BASE_TAG = "localhost/debian:bookworm"
REPOSITORY = "ghcr.io/sunk-reconciler/reconciler"
# The cluster's images (deploy/images/, docs/images.md): the render's defaults.
SLURM_CONTEXT = ROOT / "deploy" / "images" / "slurm"
SLURM_REPOSITORY = "ghcr.io/sunk-reconciler/slurm"
MARIADB_CONTEXT = ROOT / "deploy" / "images" / "mariadb"
MARIADB_TAG = "ghcr.io/sunk-reconciler/mariadb:10.11"
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
    pip_conf = CACHE / "pip.conf"
    extra = [
        "--build-arg", f"VERSION={tag.rsplit(':', 1)[1]}",
        "--volume", f"{pip_conf}:/etc/pip.conf:ro",
        "--volume", f"{HOST_CA_BUNDLE.parent}:/run/host-ca:ro",
    ]  # fmt: skip

    def pip_trusts_this_machine() -> None:
        pip_conf.write_text("[global]\ncert = /run/host-ca/ca-certificates.crt\n")

    recipe = Recipe("build", tag, ROOT / "Containerfile", ROOT, tuple(extra))
    return _build(recipe, podman, before=pip_trusts_this_machine)


@dataclass(frozen=True)
class Recipe:
    """One image: its log's name (under CACHE), tag, Containerfile, context, podman arguments."""

    log_name: str
    tag: str
    containerfile: Path
    context: Path
    extra: tuple[str, ...] = ()


def slurm_tag() -> str:
    """ghcr.io/sunk-reconciler/slurm:<the Slurm release its Containerfile builds>."""
    containerfile = SLURM_CONTEXT / "Containerfile"
    found = re.search(r"^ARG SLURM_VERSION=(\S+)$", containerfile.read_text(), re.M)
    if found is None:
        raise ImageError(f"{containerfile} has no `ARG SLURM_VERSION=` line")
    return f"{SLURM_REPOSITORY}:{found.group(1)}"


def build_slurm(podman: Podman | None = None) -> Built:
    """deploy/images/slurm: every Slurm daemon and client, munge, sshd, sssd, s6."""
    recipe = Recipe("build-slurm", slurm_tag(), SLURM_CONTEXT / "Containerfile", SLURM_CONTEXT)
    return _build(recipe, podman)


def build_mariadb(podman: Podman | None = None) -> Built:
    """deploy/images/mariadb: Debian 12's MariaDB with docker.io mariadb's first start."""
    recipe = Recipe(
        "build-mariadb", MARIADB_TAG, MARIADB_CONTEXT / "Containerfile", MARIADB_CONTEXT
    )
    return _build(recipe, podman)


def build_all(podman: Podman | None = None) -> list[Built]:
    """Every image the project ships: the reconciler's, then the cluster's (slurm, mariadb)."""
    return [build(podman), build_slurm(podman), build_mariadb(podman)]


def _build(
    recipe: Recipe, podman: Podman | None, before: Callable[[], None] | None = None
) -> Built:
    with build_lock():
        podman = podman or Podman.here()
        log = CACHE / f"{recipe.log_name}.log"
        log.write_text("")
        ensure_base(podman, log)
        if before is not None:
            before()
        started = time.monotonic()
        podman.run(
            "build", "--isolation", "chroot", "--build-arg", f"BASE={BASE_TAG}", *recipe.extra,
            "--tag", recipe.tag, "--file", str(recipe.containerfile), str(recipe.context),
            log=log,
        )  # fmt: skip
        seconds = time.monotonic() - started
        size = int(podman.inspect(recipe.tag)["Size"])
        return Built(recipe.tag, seconds, size, log, podman)


def save_oci_archive(tag: str, dest: Path, podman: Podman | None = None) -> Path:
    """The image `tag`, built before, saved as an OCI archive at dest (`podman save --format
    oci-archive`) for containerd: `ctr -n k8s.io images import dest` names it `tag` (the
    archive's index carries the whole name as its ref.name). A slurm archive is ~84 MB."""
    podman = podman or Podman.here()
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.unlink(missing_ok=True)
    podman.run("save", "--format", "oci-archive", "--output", str(dest), tag)
    return dest


def cluster_oci_archives(dest_dir: Path, podman: Podman | None = None) -> dict[str, Path]:
    """The cluster's images (slurm, mariadb), built (cached layers reused) and saved into
    dest_dir as `<name>.tar`: tag -> archive, for `ctr -n k8s.io images import`."""
    archives = {}
    for built in (build_slurm(podman), build_mariadb(podman)):
        name = built.tag.rsplit("/", 1)[1].split(":")[0]
        archives[built.tag] = save_oci_archive(built.tag, dest_dir / f"{name}.tar", built.podman)
    return archives


BUILDERS: dict[str, Callable[[Podman | None], Built]] = {
    REPOSITORY: build, SLURM_REPOSITORY: build_slurm, MARIADB_TAG.rsplit(":", 1)[0]: build_mariadb,
}  # fmt: skip


def our_tags() -> set[str]:
    """The tags this checkout builds: the reconciler's, slurm's and mariadb's."""
    return {image_tag(), slurm_tag(), MARIADB_TAG}


def oci_archive(tag: str, progress: Callable[[str], None]) -> Path:
    """An OCI archive of our image `tag` for containerd, from the cache: built first (cached
    layers reused) when podman has no such image, saved once per image id."""
    repository = tag.rsplit(":", 1)[0]
    if tag not in our_tags():
        raise ImageError(f"{tag} is not an image this checkout builds ({sorted(our_tags())})")
    podman = Podman.here()
    if not podman.exists(tag):
        progress(f"building {tag} (podman; a fresh machine first compiles Slurm, which takes "
                 f"many minutes); log: {CACHE}/build*.log")  # fmt: skip
        built = BUILDERS[repository](podman)
        progress(f"built {tag} in {built.seconds:.0f} s")
    elif repository == REPOSITORY:
        # The reconciler's tag names the version, not the source: built again so the Pods run
        # this checkout (3 s when nothing changed, podman reuses every layer; 21 s after an edit).
        built = build(podman)
        progress(f"{tag} built from this checkout in {built.seconds:.0f} s")
    image_id = str(podman.inspect(tag)["Id"])[:16]
    name = repository.rsplit("/", 1)[1]
    archive = CACHE / "archives" / f"{name}-{image_id}.tar"
    if not archive.exists():
        with build_lock():
            for old in archive.parent.glob(f"{name}-*.tar"):
                old.unlink()
            partial = save_oci_archive(tag, archive.with_suffix(".partial"), podman)
            partial.rename(archive)
    return archive
