"""Accounting for the local Slurm cluster: a private MariaDB and slurmdbd, on loopback ports.

Started between munged and slurmctld when a cluster wants accounts, QOS and preempt/qos.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from reconciler.errors import LocalStackError
from reconciler.local.processes import Supervisor
from reconciler.local.slurm.site import (
    DB_NAME,
    DB_USER,
    SlurmPaths,
    SlurmPorts,
    current_user,
    slurmdbd_conf,
)

MARIADBD = Path("/usr/sbin/mariadbd")
MARIADB_INSTALL_DB = "mariadb-install-db"
MARIADB_READY_SECONDS = 60.0
SLURMDBD_READY_SECONDS = 30.0


class Accounting:
    """MariaDB + slurmdbd for one cluster; `env` is the cluster's Slurm client environment."""

    DAEMONS = ("slurmdbd", "mariadb")  # stop order

    def __init__(
        self,
        supervisor: Supervisor,
        paths: SlurmPaths,
        ports: SlurmPorts,
        env: Callable[[], Mapping[str, str]],
        cluster_name: str,
        *,
        bin_dir: Path | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.bin_dir = bin_dir or paths.bin  # where slurmdbd is linked (SlurmCluster.daemon_dir)
        self.paths = paths
        self.ports = ports
        self.env = env
        self.cluster_name = cluster_name

    def start(self, *, fresh: bool) -> dict[str, float]:
        """MariaDB, then slurmdbd with a slurmdbd.conf of this site (no Pods involved)."""
        if fresh:
            shutil.rmtree(self.paths.mariadb, ignore_errors=True)
        password = self._db_password()
        timings = {"mariadb": self.start_mariadb(self.paths.mariadb / "data", DB_NAME, DB_USER,
                                                 password)}  # fmt: skip
        self.write_slurmdbd_conf(slurmdbd_conf(self.paths, self.ports, password))
        timings["slurmdbd"] = self.start_slurmdbd()
        return timings

    def start_mariadb(self, datadir: Path, database: str, user: str, password: str) -> float:
        """mariadbd on this stack's port; a new `datadir` is initialized first, with the
        `database` and its `user` (as the official image does from its MARIADB_* variables)."""
        started = time.monotonic()
        new_db = not (datadir / "mysql").is_dir()
        init = self.paths.run / "mariadb-init.sql"
        if new_db:
            shutil.rmtree(datadir, ignore_errors=True)
            datadir.mkdir(parents=True)
            self._install_db(datadir)
        self.paths.mariadb.mkdir(parents=True, exist_ok=True)
        argv = [
            str(MARIADBD), "--no-defaults", f"--datadir={datadir}",
            f"--user={current_user()}", f"--socket={self.paths.mariadb_socket}",
            "--bind-address=127.0.0.1", f"--port={self.ports.mariadb}",
            f"--pid-file={self.paths.run / 'mariadb.pid'}", "--innodb-buffer-pool-size=128M",
            "--skip-name-resolve", "--skip-log-bin",
        ]  # fmt: skip
        if new_db and database:
            # Run before the server takes connections: a client never finds the port open
            # and its user missing (slurmdbd would wait 5 s to try again).
            _write_private(init, create_db_user_sql(database, user, password))
            argv.append(f"--init-file={init}")
        try:
            self.supervisor.start("mariadb", argv, env=dict(self.env()))
            self.supervisor.wait_ready("mariadb", self._mariadb_answers,
                                       timeout=MARIADB_READY_SECONDS)  # fmt: skip
        finally:
            init.unlink(missing_ok=True)  # it holds the password
        return time.monotonic() - started

    def write_slurmdbd_conf(self, text: str) -> None:
        """slurmdbd insists on a private config file: it holds the database password."""
        _write_private(self.paths.slurmdbd_conf, text)

    def _install_db(self, datadir: Path) -> None:
        result = subprocess.run(
            [MARIADB_INSTALL_DB, "--no-defaults", f"--datadir={datadir}",
             f"--user={current_user()}", "--auth-root-authentication-method=normal",
             "--skip-test-db"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise LocalStackError(f"mariadb-install-db failed: {result.stderr.strip()[-800:]}")

    def _mariadb(self, sql: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["mariadb", "--no-defaults", "-S", str(self.paths.mariadb_socket), "-uroot", "-e", sql],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip

    def _mariadb_answers(self) -> bool:
        return self._mariadb("select 1").returncode == 0

    def _db_password(self) -> str:
        # Derived from the munge key so it is stable across restarts yet private to this run.
        return hashlib.sha256(self.paths.munge_key.read_bytes()).hexdigest()[:24]

    def start_slurmdbd(self) -> float:
        argv = [str(self.bin_dir / "slurmdbd"), "-D"]
        self.supervisor.start("slurmdbd", argv, env=dict(self.env()))
        took = self.supervisor.wait_ready(
            "slurmdbd", self._slurmdbd_answers, timeout=SLURMDBD_READY_SECONDS,
            extra_logs=[self.paths.log / "slurmdbd.log"],
        )  # fmt: skip
        # Register the cluster before slurmctld connects, so its first registration is accepted.
        subprocess.run(
            ["sacctmgr", "-i", "add", "cluster", self.cluster_name],
            env=dict(self.env()), capture_output=True, check=False, timeout=30,
        )  # fmt: skip
        return took

    def _slurmdbd_answers(self) -> bool:
        result = subprocess.run(
            ["sacctmgr", "-n", "show", "cluster"], env=dict(self.env()), capture_output=True,
            text=True, timeout=10, check=False,
        )  # fmt: skip
        return result.returncode == 0


def create_db_user_sql(database: str, user: str, password: str) -> str:
    quoted = password.replace("\\", "\\\\").replace("'", "\\'")
    return (
        f"CREATE DATABASE IF NOT EXISTS `{database}`;\n"
        f"CREATE USER IF NOT EXISTS '{user}'@'127.0.0.1' IDENTIFIED BY '{quoted}';\n"
        f"GRANT ALL ON `{database}`.* TO '{user}'@'127.0.0.1';\n"
    )


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
