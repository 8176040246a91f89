"""Slurm accounting's part of the control plane: where slurmdbd and its database are (rendered here,
or outside the cluster), slurmdbd.conf, and the slurmdbd Deployment and MySQL StatefulSet
(`slurm-accounting`, `slurm-mysql-0` in the listing of SUNK's "Slurm Workload Manager" page)."""

from __future__ import annotations

from dataclasses import dataclass

from reconciler import wellknown as wk
from reconciler.compile import probes
from reconciler.compile.directory import with_directory
from reconciler.compile.images import control_plane_image, mariadb_image
from reconciler.compile.lines import write_lines
from reconciler.compile.manifests import config_map
from reconciler.compile.munge import munge_socket_mount, munge_volumes, with_munge
from reconciler.compile.profile import Profile
from reconciler.compile.resources import component_resources
from reconciler.compile.secrets import JWT_KEY_FILE, mysql_secret_name
from reconciler.compile.workloads import (
    JWT_DIR,
    SLURM_UID,
    claim_spec,
    container_port,
    deployment_for,
    jwt_volume,
    pod_spec,
    service_for,
    statefulset_for,
)
from reconciler.config.control_chars import control_character
from reconciler.config.keys import default_of
from reconciler.errors import CompileError
from reconciler.objects import Obj

SLURMDBD_PORT = 6819
MYSQL_PORT = 3306
SLURMDBD_CONF_DIR = "/etc/slurmdbd"
DB_PASSWORD_DIR = "/etc/slurmdbd-db"
RUN_DIR = "/run/slurmdbd"  # an emptyDir: slurmdbd.conf as assembled at start, the pid file
ACCOUNTING_DB = default_of("accounting.database.name")
DB_USER = default_of("accounting.database.user")


def accounting_name(release: str) -> str:
    return f"{release}-accounting"


def mysql_name(release: str) -> str:
    return f"{release}-mysql"


def slurmdbd_map_name(release: str) -> str:
    return f"{release}-slurmdbd-conf"


@dataclass(frozen=True)
class AccountingPlan:
    """Where slurmdbd and its database are: rendered here, or outside the cluster."""

    enabled: bool
    dbd_host: str = ""
    dbd_port: int = SLURMDBD_PORT
    render_slurmdbd: bool = False
    render_mysql: bool = False
    db_host: str = ""
    db_port: int = MYSQL_PORT
    db_name: str = ACCOUNTING_DB
    db_user: str = DB_USER
    db_password_secret: str = ""


def accounting_plan(release: str, values: Obj, profile: Profile | None = None) -> AccountingPlan:
    """Where slurmdbd and its database are; `profile` says how rendered ones are reached."""
    profile = profile or Profile()
    accounting = values.get("accounting") or {}
    if not accounting.get("enabled"):
        return AccountingPlan(enabled=False)
    external = accounting.get("external") or {}
    if external.get("host"):
        return AccountingPlan(True, external["host"], external.get("port", SLURMDBD_PORT))
    database = accounting.get("database") or {}
    in_cluster_db = not database.get("host")
    return AccountingPlan(
        enabled=True,
        dbd_host=profile.service_host or accounting_name(release),
        dbd_port=profile.dbd_port,
        render_slurmdbd=True,
        render_mysql=in_cluster_db,
        db_host=database.get("host") or profile.service_host or mysql_name(release),
        db_port=database.get("port", profile.mysql_port if in_cluster_db else MYSQL_PORT),
        db_name=database.get("name", ACCOUNTING_DB),
        db_user=database.get("user", DB_USER),
        db_password_secret=database.get("passwordSecret") or mysql_secret_name(release),
    )


def render_slurmdbd_conf(release: str, plan: AccountingPlan, site: dict[str, str]) -> str:
    """slurmdbd.conf without StoragePass: the password comes from its Secret when slurmdbd
    starts, so it never sits in a ConfigMap. `site` (the profile's) may override any line."""
    settings = {
        "AuthType": "auth/munge",
        "AuthAltTypes": "auth/jwt",
        "AuthAltParameters": f"jwt_key={JWT_DIR}/{JWT_KEY_FILE}",
        "DbdHost": plan.dbd_host,
        "DbdPort": str(plan.dbd_port),
        "SlurmUser": "slurm",
        "PidFile": f"{RUN_DIR}/slurmdbd.pid",
        "StorageType": "accounting_storage/mysql",
        "StorageHost": plan.db_host,
        "StoragePort": str(plan.db_port),
        "StorageUser": plan.db_user,
        "StorageLoc": plan.db_name,
        **site,
    }
    for key, value in settings.items():  # values are checked when loaded; this is the last guard
        if control_character(value) is not None:
            raise CompileError(
                f"slurmdbd.conf setting {key} holds a control character",
                hint="a value must stay on its own line; remove it",
            )
    return write_lines("slurmdbd.conf", (f"{key}={value}" for key, value in settings.items()))


def slurmdbd_objects(
    release: str, namespace: str, values: Obj, plan: AccountingPlan, slurmdbd_conf: str
) -> list[Obj]:
    accounting = values.get("accounting") or {}
    name = accounting_name(release)
    selector = {wk.LABEL_NAME: "slurmdbd", wk.LABEL_RELEASE: release}
    # slurmdbd wants its config owned by SlurmUser, mode 600: assembled at start, with the
    # password read from its Secret (never in the ConfigMap). slurmdbd has no option for
    # its config file: it reads slurmdbd.conf in the directory of $SLURM_CONF.
    # RUN_DIR is an emptyDir the Pod's fsGroup (SlurmUser's group) may write.
    start = (
        f"umask 077 && {{ cat {SLURMDBD_CONF_DIR}/slurmdbd.conf; printf 'StoragePass=%s\\n' "
        f'"$(cat {DB_PASSWORD_DIR}/password)"; }} > {RUN_DIR}/slurmdbd.conf && '
        f"SLURM_CONF={RUN_DIR}/slurm.conf exec slurmdbd -D"
    )
    container = {
        "name": "slurmdbd",
        "image": control_plane_image(values, "accounting"),
        "command": ["sh", "-c", start],
        "ports": [container_port("slurmdbd", plan.dbd_port)],
        **probes.slurmdbd(plan.dbd_port),
        "resources": component_resources(values, "accounting"),
        "volumeMounts": [
            {"name": "slurmdbd-run", "mountPath": RUN_DIR},
            {"name": "slurmdbd-conf", "mountPath": SLURMDBD_CONF_DIR, "readOnly": True},
            {"name": "db-password", "mountPath": DB_PASSWORD_DIR, "readOnly": True},
            {"name": "jwt-key", "mountPath": JWT_DIR, "readOnly": True},
            munge_socket_mount(),
        ],
    }
    volumes = [
        {"name": "slurmdbd-conf", "configMap": {"name": slurmdbd_map_name(release)}},
        {"name": "db-password", "secret": {"secretName": plan.db_password_secret,
                                           "defaultMode": 0o400}},
        jwt_volume(release),
        *munge_volumes(release),
        {"name": "slurmdbd-run", "emptyDir": {"medium": "Memory"}},
    ]  # fmt: skip
    pod = pod_spec(values, accounting, [container], volumes,
                   security={"runAsUser": SLURM_UID, "runAsGroup": SLURM_UID,
                             "fsGroup": SLURM_UID})  # fmt: skip
    pod = with_directory(with_munge(pod, values), release, values)
    pod["hostname"] = name  # slurmdbd starts only on the host DbdHost names
    return [
        config_map(slurmdbd_map_name(release), namespace, release,
                   {"slurmdbd.conf": slurmdbd_conf}),
        deployment_for(release, namespace, name, "accounting", selector, "slurmdbd", pod,
                       replicas=1),
        service_for(release, namespace, name, "accounting", selector, "slurmdbd", plan.dbd_port),
    ]  # fmt: skip


def mysql_objects(release: str, namespace: str, values: Obj, plan: AccountingPlan) -> list[Obj]:
    mysql = values.get("mysql") or {}
    name = mysql_name(release)
    selector = {wk.LABEL_NAME: "mysql", wk.LABEL_RELEASE: release}
    password = {"secretKeyRef": {"name": plan.db_password_secret, "key": "password"}}
    container = {
        "name": "mysql",
        "image": mariadb_image(values),
        "env": [
            {"name": "MARIADB_DATABASE", "value": plan.db_name},
            {"name": "MARIADB_USER", "value": plan.db_user},
            {"name": "MARIADB_PASSWORD", "valueFrom": password},
            {"name": "MARIADB_RANDOM_ROOT_PASSWORD", "value": "yes"},
        ],
        "ports": [container_port("mysql", plan.db_port)],
        **probes.mariadb(plan.db_port),
        "resources": component_resources(values, "mysql"),
        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/mysql"}],
    }
    if plan.db_port != MYSQL_PORT:
        container["args"] = [f"--port={plan.db_port}"]
    pod = pod_spec(values, mysql, [container], [], security=None)
    storage = mysql.get("storage") or {}
    claim = {
        # No labels of ours: the StatefulSet controller makes the claim, and a claim we do
        # not list is one we can never prune (the accounting database lives there).
        "metadata": {"name": "data"},
        "spec": claim_spec(storage),
    }
    statefulset = statefulset_for(release, namespace, name, "mysql", selector, "mysql", pod)
    statefulset["spec"]["volumeClaimTemplates"] = [claim]
    return [
        statefulset,
        service_for(release, namespace, name, "mysql", selector, "mysql", plan.db_port,
                    headless=True),
    ]  # fmt: skip
