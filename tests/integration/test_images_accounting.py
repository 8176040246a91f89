"""The mariadb image (deploy/images/mariadb) with the env the render gives it, and slurmdbd from
the slurm image keeping Slurm's accounts in it, as the render's accounting Pods run them.

Run the way test_images.py runs the slurm image (image_chroot.py, pod_parts.py); the
containers that talk to each other share a network namespace the test makes, with only
loopback in it.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.local.ports import free_port
from tests.integration import image, image_chroot
from tests.integration.image_chroot import Exported
from tests.integration.pod_parts import (
    SLURM_UID,
    empty_dir,
    etc_hosts,
    mariadb_client,
    mariadb_server,
    munged,
    ok,
    slurm_etc,
    wait_for,
)

pytestmark = pytest.mark.image

# The accounting Pod's start as the render writes it (slurmdbd.conf is SlurmUser's, 0600,
# with the password from its own Secret), and a Deployment Pod's hostname.
SLURMDBD_START = (
    "umask 077 && mkdir -p /run/slurmdbd && { cat /etc/slurmdbd/slurmdbd.conf;"
    " printf 'StoragePass=%s\\n' \"$(cat /etc/slurmdbd-db/password)\"; }"
    " > /run/slurmdbd/slurmdbd.conf && SLURM_CONF=/run/slurmdbd/slurm.conf exec slurmdbd -D"
)
POD_HOSTNAME = "slurm-accounting-6d5f8c7b9-x2k4q"


@pytest.fixture(scope="module")
def mariadb(
    tmp_path_factory: pytest.TempPathFactory, figures: dict[str, str]
) -> Iterator[Exported]:
    yield from image_chroot.built_and_exported(image.build_mariadb, tmp_path_factory, figures)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory, figures: dict[str, str]) -> Iterator[Exported]:
    yield from image_chroot.built_and_exported(image.build_slurm, tmp_path_factory, figures)


@pytest.fixture
def netns() -> Iterator[str]:
    with image_chroot.pod_network(f"sunk-images-{os.getpid()}") as name:
        yield name


def test_mariadb_makes_the_slurm_database_and_user_from_the_renders_env(
    mariadb: Exported, tmp_path: Path
) -> None:
    """The env the render gives its MariaDB container (MARIADB_DATABASE, MARIADB_USER,
    MARIADB_PASSWORD, MARIADB_RANDOM_ROOT_PASSWORD); the data volume fresh; started as root, as
    the render starts it. The slurm user may use slurm_acct_db and nothing else."""
    password = secrets.token_urlsafe(24)
    with mariadb_server(mariadb, tmp_path, password) as (port, data, log):
        client, as_slurm = mariadb_client(port), {"MYSQL_PWD": password}
        sql = "CREATE TABLE probe (id INT); INSERT INTO probe VALUES (7); SELECT id FROM probe;"
        done = mariadb.run(*client, "slurm_acct_db", "-e", sql, env=as_slurm, user=SLURM_UID)
        assert ok(done).split() == ["id", "7"]
        other = mariadb.run(*client, "-e", "CREATE DATABASE other", env=as_slurm)
        assert other.returncode != 0 and "Access denied" in other.stderr
        assert password not in log.read_text()  # no secret in the container's output
        assert (data / "slurm_acct_db").stat().st_uid == 999  # the server ran as mysql


def test_mariadb_reports_a_setting_it_does_not_honour(mariadb: Exported, tmp_path: Path) -> None:
    done = mariadb.run(
        "mariadbd",
        env={"MARIADB_ALLOW_EMPTY_ROOT_PASSWORD": "1", "MARIADB_AUTO_UPGRADE": "1"},
        volumes={"/var/lib/mysql": empty_dir(tmp_path, "data"),
                 "/run/mysqld": empty_dir(tmp_path, "run")},
    )  # fmt: skip
    assert done.returncode != 0
    assert "MARIADB_AUTO_UPGRADE is not a setting this image honours" in done.stderr


def test_slurmdbd_from_the_slurm_image_keeps_accounts_in_the_mariadb_image(
    slurm: Exported, mariadb: Exported, tmp_path: Path, netns: str
) -> None:
    """MariaDB as rendered; the accounting Pod's munge sidecar and slurmdbd (as slurm, started
    as the render starts it, with a Pod's hostname); then sacctmgr, as slurm, adds a cluster
    through slurmdbd, and the cluster is in MariaDB's slurm_acct_db."""
    password = secrets.token_urlsafe(24)
    with mariadb_server(mariadb, tmp_path, password, netns) as (db_port, _, _):
        dbd_port = free_port()
        conf = tmp_path / "slurmdbd-conf"
        conf.mkdir()
        db = tmp_path / "db-password"
        db.mkdir()
        (db / "password").write_text(password)
        with munged(slurm, tmp_path) as socket_dir:

            def accounting_pod(dbd_host: str, log: Path) -> subprocess.Popen[bytes]:
                (conf / "slurmdbd.conf").write_text(
                    f"AuthType=auth/munge\nDbdHost={dbd_host}\nDbdPort={dbd_port}\n"
                    "SlurmUser=slurm\nPidFile=/run/slurmdbd/slurmdbd.pid\n"
                    "StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\n"
                    f"StoragePort={db_port}\nStorageUser=slurm\nStorageLoc=slurm_acct_db\n"
                )
                return slurm.start(
                    log, "sh", "-c", SLURMDBD_START, entrypoint=False, user=SLURM_UID,
                    binds={conf: "/etc/slurmdbd", db: "/etc/slurmdbd-db",
                           etc_hosts(tmp_path, POD_HOSTNAME): "/etc/hosts"},
                    volumes={"/run/slurmdbd": empty_dir(tmp_path, log.stem),
                             "/run/munge": socket_dir},
                    netns=netns, hostname=POD_HOSTNAME,
                )  # fmt: skip

            # DbdHost must name the host slurmdbd runs on: the accounting Service's name is
            # not a Deployment Pod's hostname, and slurmdbd stops.
            log = tmp_path / "slurmdbd-service-name.log"
            assert accounting_pod("slurm-accounting", log).wait(timeout=120) != 0
            assert "fatal: This host not configured to run SlurmDBD" in log.read_text()

            log = tmp_path / "slurmdbd.log"
            slurmdbd = accounting_pod("localhost", log)
            try:
                wait_for(lambda: "24.11.5 started" in log.read_text(), slurmdbd, log, 120)
                etc = slurm_etc(tmp_path, "AccountingStorageType=accounting_storage/slurmdbd\n"
                                f"AccountingStorageHost=localhost\n"
                                f"AccountingStoragePort={dbd_port}\n")  # fmt: skip
                binds = {etc: "/etc/slurm", etc_hosts(tmp_path / "etc-slurm"): "/etc/hosts"}
                sacctmgr = {"binds": binds, "volumes": {"/run/munge": socket_dir},
                            "user": SLURM_UID, "netns": netns}  # fmt: skip
                ok(slurm.run("sacctmgr", "-i", "add", "cluster", "images", **sacctmgr))
                shown = ok(slurm.run("sacctmgr", "-n", "-P", "show", "cluster",
                                     "format=cluster", **sacctmgr))  # fmt: skip
                assert "images" in shown.split()
            finally:
                image_chroot.stop_in_chroot(slurmdbd, grace=30)
            assert re.search(r"slurmdbd version 24\.11\.5 started", log.read_text())
        tables = ok(mariadb.run(*mariadb_client(db_port), "slurm_acct_db", "-e", "SHOW TABLES",
                                env={"MYSQL_PWD": password}, netns=netns))  # fmt: skip
        assert "images_job_table" in tables.split()
