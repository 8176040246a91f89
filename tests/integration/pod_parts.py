"""What the image tests give a container that a kubelet would: a Pod's volumes laid out as a
kubelet lays them out, its users, and the munge and MariaDB containers several tests run.

emptyDirs are host folders of mode 0777 (what a kubelet makes); a Secret volume's files are
links into `..data`; a container's mounts are image_chroot's binds (read-only) and volumes
(writable).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from reconciler.local.ports import free_port
from tests.integration import image_chroot
from tests.integration.image_chroot import Exported

SLURM_UID, MUNGE_UID, NOBODY = "64030:64030", "64031:64031", "65534:65534"
MUNGE_SOCKET = "/run/munge/munge.socket.2"


def ok(done: subprocess.CompletedProcess[str]) -> str:
    shown = f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, shown
    return done.stdout + done.stderr


def empty_dir(parent: Path, name: str) -> Path:
    """A Pod's emptyDir as a kubelet makes it: root's, mode 0777."""
    folder = parent / name
    folder.mkdir()
    folder.chmod(0o777)
    return folder


def secret_volume(parent: Path, name: str, files: dict[str, bytes], mode: int) -> Path:
    """A Secret volume as a kubelet lays it out: each file a link into `..data`."""
    folder = parent / name
    data = folder / "..2026_11_27_00_00_00.000000000"
    data.mkdir(parents=True)
    for key, content in files.items():
        (data / key).write_bytes(content)
        (data / key).chmod(mode)
    (folder / "..data").symlink_to(data.name)
    for key in files:
        (folder / key).symlink_to(f"..data/{key}")
    return folder


def etc_hosts(parent: Path, hostname: str = "") -> Path:
    """The /etc/hosts a kubelet mounts into every container (the image's is empty)."""
    hosts = parent / "hosts"
    hosts.write_text(f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n"
                     f"{'127.0.1.1' if hostname else ''}\t{hostname}\n")  # fmt: skip
    return hosts


def slurm_etc(parent: Path, slurm_conf: str = "", slurmdbd_conf: str = "") -> Path:
    """/etc/slurm as small as the daemons' -V accepts, plus the lines given; slurmdbd.conf is
    SlurmUser's and 0600, as slurmdbd demands."""
    etc = parent / "etc-slurm"
    etc.mkdir()
    (etc / "slurm.conf").write_text(f"ClusterName=images\nSlurmctldHost=localhost\n{slurm_conf}")
    dbd = etc / "slurmdbd.conf"
    dbd.write_text(
        f"DbdHost=localhost\nSlurmUser=slurm\nStorageType=accounting_storage/mysql\n{slurmdbd_conf}"
    )
    dbd.chmod(0o600)
    os.chown(dbd, 64030, 64030)
    return etc


def wait_for(ready: Callable[[], bool], process: subprocess.Popen[bytes], log: Path,
             seconds: float) -> None:  # fmt: skip
    deadline = time.monotonic() + seconds
    while not ready():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


def munge_init(slurm: Exported, key: Path, volumes: dict[str, Path]) -> None:
    """The init container the munge sidecar needs (root, from the same image): the key Secret's
    linked file copied as munge's 0400 file, and both emptyDirs handed to munge, because
    munged refuses a key or socket folder others may write without the sticky bit."""
    ok(slurm.run("sh", "-c", "install -d -o munge -g munge -m 0700 /run/munge-key"
                 " && install -o munge -g munge -m 0400 /etc/munge-key/munge.key /run/munge-key/"
                 " && install -d -o munge -g munge -m 0755 /run/munge",
                 binds={key: "/etc/munge-key"}, volumes=volumes))  # fmt: skip


MUNGED = ["munged", "--foreground", "--key-file=/run/munge-key/munge.key",
          f"--socket={MUNGE_SOCKET}"]  # fmt: skip


@contextmanager
def munged(slurm: Exported, parent: Path) -> Iterator[Path]:
    """A munge sidecar from the image, as the render's Pods run it: its socket's folder (the
    Pod's emptyDir at /run/munge), for the other containers."""
    key = secret_volume(parent, "munge-key", {"munge.key": secrets.token_bytes(1024)}, 0o400)
    volumes = {"/run/munge-key": empty_dir(parent, "munge-key-copy"),
               "/run/munge": empty_dir(parent, "munge")}  # fmt: skip
    munge_init(slurm, key, volumes)
    log = parent / "munged.log"
    process = slurm.start(log, *MUNGED, user=MUNGE_UID, volumes=volumes)
    try:
        wait_for(lambda: (volumes["/run/munge"] / "munge.socket.2").exists(), process, log, 20)
        yield volumes["/run/munge"]
    finally:
        image_chroot.stop_in_chroot(process)


# What the render gives its MariaDB container (`reconciler render` with accounting on).
def mariadb_env(password: str) -> dict[str, str]:
    return {"MARIADB_DATABASE": "slurm_acct_db", "MARIADB_USER": "slurm",
            "MARIADB_PASSWORD": password, "MARIADB_RANDOM_ROOT_PASSWORD": "yes"}  # fmt: skip


@contextmanager
def mariadb_server(
    mariadb: Exported, parent: Path, password: str, netns: str | None = None
) -> Iterator[tuple[int, Path, Path]]:
    """The MariaDB container with the render's env, on a fresh data volume, started as root
    and listening on loopback: (port, data folder, log), once the slurm user gets in."""
    data, port, log = empty_dir(parent, "mysql-data"), free_port(), parent / "mariadb.log"
    server = mariadb.start(
        log, "--bind-address=127.0.0.1", f"--port={port}", env=mariadb_env(password),
        volumes={"/var/lib/mysql": data, "/run/mysqld": empty_dir(parent, "mysqld")},
        netns=netns,
    )  # fmt: skip
    client = mariadb_client(port)

    def slurm_gets_in() -> bool:
        done = mariadb.run(*client, "-e", "SELECT 1", env={"MYSQL_PWD": password}, netns=netns)
        return done.returncode == 0

    try:
        wait_for(slurm_gets_in, server, log, 120)
        yield port, data, log
    finally:
        assert image_chroot.stop_in_chroot(server, grace=60) == 0, log.read_text()


def mariadb_client(port: int) -> list[str]:
    return ["mariadb", "-h", "127.0.0.1", "-P", str(port), "-u", "slurm", "--batch"]
