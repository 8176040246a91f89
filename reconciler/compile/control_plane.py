"""Kubernetes objects for the Slurm control plane, from seed 001's values: the controller
(slurmctld), slurmrestd, slurmdbd and its MySQL, and the login nodes. Names and labels are
SUNK's, so seed 001's commands work as written there:

    kubectl logs -l app.kubernetes.io/name=slurmctld -c slurmctld
    kubectl get deployments -l app.kubernetes.io/component=controller
    kubectl rollout restart deployment <release>-controller
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler import wellknown as wk
from reconciler.compile.manifests import (
    CONF_MOUNT,
    config_map,
    field_env,
    image_ref,
    owned_labels,
    pvc_volume_name,
    slurm_conf_map_name,
)
from reconciler.compile.munge import munge_container, munge_socket_mount, munge_volumes
from reconciler.compile.profile import Profile
from reconciler.compile.secrets import JWT_KEY_FILE, jwt_secret_name, mysql_secret_name

SLURMDBD_PORT = 6819
MYSQL_PORT = 3306
JWT_DIR = "/etc/slurm-jwt"
STATE_DIR = "/var/spool/slurmctld"
SLURMDBD_CONF_DIR = "/etc/slurmdbd"
DB_PASSWORD_DIR = "/etc/slurmdbd-db"
MARIADB_REPOSITORY = "docker.io/library/mariadb"
MARIADB_TAG = "10.11"
ACCOUNTING_DB = "slurm_acct_db"
DB_USER = "slurm"
SLURM_UID = 64030  # seed 001: controller.securityContext.runAsUser/runAsGroup
NOBODY_UID = 65534  # slurmrestd refuses to run as root or as SlurmUser
# Seed 001's defaults for requests = limits.
CONTROLLER_RESOURCES = {"limits": {"cpu": "4", "memory": "16Gi"},
                        "requests": {"cpu": "4", "memory": "16Gi"}}  # fmt: skip
LOGIN_RESOURCES = {"limits": {"cpu": "4", "memory": "8Gi"},
                   "requests": {"cpu": "4", "memory": "8Gi"}}  # fmt: skip
Obj = dict[str, Any]


def controller_name(release: str) -> str:
    return f"{release}-controller"


def rest_name(release: str) -> str:
    return f"{release}-rest"


def accounting_name(release: str) -> str:
    return f"{release}-accounting"


def mysql_name(release: str) -> str:
    return f"{release}-mysql"


def login_name(release: str) -> str:
    return f"{release}-login"


def slurmdbd_map_name(release: str) -> str:
    return f"{release}-slurmdbd-conf"


def controller_state_claim(release: str) -> str:
    return f"{release}-controller-state"


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


def rest_enabled(values: Obj) -> bool:
    return (values.get("rest") or {}).get("enabled", True) is not False


def login_enabled(values: Obj) -> bool:
    return (values.get("login") or {}).get("enabled", True) is not False


def control_plane_objects(
    release: str, namespace: str, values: Obj, slurmdbd_conf: str, profile: Profile | None = None
) -> list[Obj]:
    """Every control-plane object values ask for (Secrets aside: see compile/secrets.py)."""
    profile = profile or Profile()
    objects = [*_controller(release, namespace, values, profile)]
    if rest_enabled(values):
        objects += _rest(release, namespace, values, profile)
    accounting = accounting_plan(release, values, profile)
    if accounting.render_slurmdbd:
        objects += _accounting(release, namespace, values, accounting, slurmdbd_conf)
    if accounting.render_mysql:
        objects += _mysql(release, namespace, values, accounting)
    if login_enabled(values):
        objects += _login(release, namespace, values, profile.ssh_port)
    return objects


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
        "PidFile": "/run/slurmdbd/slurmdbd.pid",
        "StorageType": "accounting_storage/mysql",
        "StorageHost": plan.db_host,
        "StoragePort": str(plan.db_port),
        "StorageUser": plan.db_user,
        "StorageLoc": plan.db_name,
        **site,
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


# ---- the controller -----------------------------------------------------------------------


def _controller(release: str, namespace: str, values: Obj, profile: Profile) -> list[Obj]:
    controller = values.get("controller") or {}
    name = controller_name(release)
    selector = {wk.LABEL_NAME: "slurmctld", wk.LABEL_RELEASE: release}
    container = {
        "name": "slurmctld",
        "image": image_ref(controller.get("image") or {}),
        "args": ["slurmctld", "-D"],
        "ports": [_port("slurmctld", profile.slurmctld_port)],
        "readinessProbe": {"tcpSocket": {"port": profile.slurmctld_port}},
        "resources": controller.get("resources") or CONTROLLER_RESOURCES,
        "volumeMounts": [
            {"name": "slurm-conf", "mountPath": CONF_MOUNT, "readOnly": True},
            {"name": "jwt-key", "mountPath": JWT_DIR, "readOnly": True},
            {"name": "state", "mountPath": STATE_DIR},
            munge_socket_mount(),
        ],
    }
    volumes = [
        {"name": "slurm-conf", "configMap": {"name": slurm_conf_map_name(release)}},
        _jwt_volume(release),
        {"name": "state", "persistentVolumeClaim": {"claimName": controller_state_claim(release)}},
        *munge_volumes(release),
    ]
    containers = [container, _reconfigure_container(container["image"]),
                  munge_container(container["image"])]  # fmt: skip
    pod = _pod_spec(values, controller, containers, volumes,
                    security={"runAsUser": SLURM_UID, "runAsGroup": SLURM_UID,
                              "fsGroup": SLURM_UID}, grace=10)  # fmt: skip
    # slurmctld starts only on the host SlurmctldHost names: the Pod's hostname is that name.
    pod["hostname"] = name
    deployment = _deployment(
        release, namespace, name, "controller", selector, "slurmctld", pod,
        replicas=controller.get("replicas", 1),
    )  # fmt: skip
    return [
        deployment,
        _claim(release, namespace, controller_state_claim(release), "controller",
               controller.get("stateVolume") or {}),
        _service(release, namespace, name, "controller", selector, "slurmctld",
                 profile.slurmctld_port),
    ]  # fmt: skip


# kubelet updates a ConfigMap volume a while after the ConfigMap changes (up to about a
# minute): the controller Pod itself tells slurmctld to reread its config once the files it
# mounts have changed, so slurmctld never rereads the old ones. Needs nothing but the image's
# shell and scontrol (and munge, beside it).
RECONFIGURE_SCRIPT = (
    f"conf() {{ cat {CONF_MOUNT}/*.conf 2>/dev/null | cksum; }}; seen=$(conf); "
    "while sleep 5; do now=$(conf); "
    '[ "$now" = "$seen" ] || { scontrol reconfigure && seen=$now; }; done'
)


def _reconfigure_container(image: str) -> Obj:
    return {
        "name": "reconfigure",
        "image": image,
        "command": ["sh", "-c", RECONFIGURE_SCRIPT],
        "volumeMounts": [
            {"name": "slurm-conf", "mountPath": CONF_MOUNT, "readOnly": True},
            munge_socket_mount(),
        ],
    }


# ---- slurmrestd ---------------------------------------------------------------------------


def _rest(release: str, namespace: str, values: Obj, profile: Profile) -> list[Obj]:
    rest = values.get("rest") or {}
    name = rest_name(release)
    selector = {wk.LABEL_NAME: "slurmrestd", wk.LABEL_RELEASE: release}
    container = {
        "name": "slurmrestd",
        "image": image_ref(rest.get("image") or {}),
        "args": ["slurmrestd", "-a", "rest_auth/jwt", _address(profile, profile.rest_port)],
        "ports": [_port("slurmrestd", profile.rest_port)],
        "readinessProbe": {"tcpSocket": {"port": profile.rest_port}},
        "resources": rest.get("resources") or {},
        "volumeMounts": [
            {"name": "slurm-conf", "mountPath": CONF_MOUNT, "readOnly": True},
            munge_socket_mount(),
        ],
    }
    volumes = [
        {"name": "slurm-conf", "configMap": {"name": slurm_conf_map_name(release)}},
        *munge_volumes(release),
    ]
    pod = _pod_spec(values, rest, [container, munge_container(container["image"])], volumes,
                    security={"runAsUser": NOBODY_UID, "runAsGroup": NOBODY_UID})  # fmt: skip
    return [
        _deployment(release, namespace, name, "rest", selector, "slurmrestd", pod,
                    replicas=rest.get("replicas", 1)),
        _service(release, namespace, name, "rest", selector, "slurmrestd", profile.rest_port),
    ]  # fmt: skip


# ---- accounting: slurmdbd and MySQL -------------------------------------------------------


def _accounting(
    release: str, namespace: str, values: Obj, plan: AccountingPlan, slurmdbd_conf: str
) -> list[Obj]:
    accounting = values.get("accounting") or {}
    name = accounting_name(release)
    selector = {wk.LABEL_NAME: "slurmdbd", wk.LABEL_RELEASE: release}
    # slurmdbd wants its config owned by SlurmUser, mode 600: assembled at start, with the
    # password read from its Secret (never in the ConfigMap). slurmdbd has no option for
    # its config file: it reads slurmdbd.conf in the directory of $SLURM_CONF.
    start = (
        "umask 077 && mkdir -p /run/slurmdbd && { cat "
        f"{SLURMDBD_CONF_DIR}/slurmdbd.conf; printf 'StoragePass=%s\\n' "
        f'"$(cat {DB_PASSWORD_DIR}/password)"; }} > /run/slurmdbd/slurmdbd.conf && '
        "SLURM_CONF=/run/slurmdbd/slurm.conf exec slurmdbd -D"
    )
    container = {
        "name": "slurmdbd",
        "image": image_ref(accounting.get("image") or {}),
        "command": ["sh", "-c", start],
        "ports": [_port("slurmdbd", plan.dbd_port)],
        "readinessProbe": {"tcpSocket": {"port": plan.dbd_port}},
        "resources": accounting.get("resources") or {},
        "volumeMounts": [
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
        _jwt_volume(release),
        *munge_volumes(release),
    ]  # fmt: skip
    pod = _pod_spec(values, accounting, [container, munge_container(container["image"])],
                    volumes, security={"runAsUser": SLURM_UID, "runAsGroup": SLURM_UID,
                                       "fsGroup": SLURM_UID})  # fmt: skip
    pod["hostname"] = name  # slurmdbd starts only on the host DbdHost names
    return [
        config_map(slurmdbd_map_name(release), namespace, release,
                   {"slurmdbd.conf": slurmdbd_conf}),
        _deployment(release, namespace, name, "accounting", selector, "slurmdbd", pod,
                    replicas=1),
        _service(release, namespace, name, "accounting", selector, "slurmdbd", plan.dbd_port),
    ]  # fmt: skip


def _mysql(release: str, namespace: str, values: Obj, plan: AccountingPlan) -> list[Obj]:
    mysql = values.get("mysql") or {}
    name = mysql_name(release)
    selector = {wk.LABEL_NAME: "mysql", wk.LABEL_RELEASE: release}
    password = {"secretKeyRef": {"name": plan.db_password_secret, "key": "password"}}
    container = {
        "name": "mysql",
        "image": image_ref({"tag": MARIADB_TAG, **(mysql.get("image") or {})}, MARIADB_REPOSITORY),
        "env": [
            {"name": "MARIADB_DATABASE", "value": plan.db_name},
            {"name": "MARIADB_USER", "value": plan.db_user},
            {"name": "MARIADB_PASSWORD", "valueFrom": password},
            {"name": "MARIADB_RANDOM_ROOT_PASSWORD", "value": "yes"},
        ],
        "ports": [_port("mysql", plan.db_port)],
        "readinessProbe": {"tcpSocket": {"port": plan.db_port}},
        "resources": mysql.get("resources") or {},
        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/mysql"}],
    }
    if plan.db_port != MYSQL_PORT:
        container["args"] = [f"--port={plan.db_port}"]
    pod = _pod_spec(values, mysql, [container], [], security=None)
    storage = mysql.get("storage") or {}
    claim = {
        # No labels of ours: the StatefulSet controller makes the claim, and a claim we do
        # not list is one we can never prune (the accounting database lives there).
        "metadata": {"name": "data"},
        "spec": _claim_spec(storage),
    }
    statefulset = _statefulset(release, namespace, name, "mysql", selector, "mysql", pod)
    statefulset["spec"]["volumeClaimTemplates"] = [claim]
    return [
        statefulset,
        _service(release, namespace, name, "mysql", selector, "mysql", plan.db_port,
                 headless=True),
    ]  # fmt: skip


# ---- login nodes ---------------------------------------------------------------------------


def _login(release: str, namespace: str, values: Obj, ssh_port: int) -> list[Obj]:
    login = values.get("login") or {}
    compute = values.get("compute") or {}
    name = login_name(release)
    selector = {wk.LABEL_NAME: "login", wk.LABEL_RELEASE: release}
    mounts = [
        {"name": "slurm-conf", "mountPath": CONF_MOUNT, "readOnly": True},
        munge_socket_mount(),
    ]
    volumes = [
        {"name": "slurm-conf", "configMap": {"name": slurm_conf_map_name(release)}},
        *munge_volumes(release),
    ]
    # The same shared storage as compute nodes (seed 001: compute.mounts), so users see
    # their files where their jobs run.
    for mount in compute.get("mounts") or []:
        volume = pvc_volume_name(mount["pvc"])
        mounts.append({"name": volume, "mountPath": mount["name"]})
        volumes.append({"name": volume, "persistentVolumeClaim": {"claimName": mount["pvc"]}})
    if login.get("authorizedKeysSecret"):
        mounts.append({"name": "authorized-keys", "mountPath": "/root/.ssh/authorized_keys",
                       "subPath": "authorized_keys", "readOnly": True})  # fmt: skip
        # optional: the login Pod starts before the Secret exists (nobody can log in until
        # then); a subPath mount never updates, so a Secret made later needs a Pod restart.
        volumes.append({"name": "authorized-keys",
                        "secret": {"secretName": login["authorizedKeysSecret"],
                                   "defaultMode": 0o600, "optional": True}})  # fmt: skip
    container = {
        "name": "sshd",
        "image": image_ref(login.get("image") or {}),
        "args": ["/usr/sbin/sshd", "-D", "-e"],
        "env": [field_env("POD_NAME", "metadata.name")],
        "ports": [_port("ssh", ssh_port)],
        "readinessProbe": {"tcpSocket": {"port": ssh_port}},
        "resources": login.get("resources") or LOGIN_RESOURCES,
        "volumeMounts": mounts,
    }
    pod = _pod_spec(values, login, [container, munge_container(container["image"])], volumes,
                    security=None, grace=10)  # fmt: skip
    statefulset = _statefulset(release, namespace, name, "login", selector, "sshd", pod,
                               replicas=login.get("replicas", 1))  # fmt: skip
    return [statefulset, _login_service(release, namespace, login, selector, ssh_port)]


def _login_service(
    release: str, namespace: str, login: Obj, selector: dict[str, str], port: int
) -> Obj:
    settings = login.get("service") or {}
    kind = settings.get("type", "LoadBalancer")
    service = _service(release, namespace, login_name(release), "login", selector, "ssh",
                       port)  # fmt: skip
    service["spec"]["type"] = kind
    if kind != "ClusterIP":  # Kubernetes refuses the field on a ClusterIP Service
        service["spec"]["externalTrafficPolicy"] = settings.get("externalTrafficPolicy", "Local")
    if settings.get("annotations"):
        service["metadata"]["annotations"] = {
            str(k): str(v) for k, v in settings["annotations"].items()
        }
    return service


# ---- shared shapes --------------------------------------------------------------------------


def _pod_spec(
    values: Obj,
    component: Obj,
    containers: list[Obj],
    volumes: list[Obj],
    *,
    security: dict[str, int] | None,
    grace: int = 30,
) -> Obj:
    spec: Obj = {
        "terminationGracePeriodSeconds": component.get("terminationGracePeriodSeconds", grace),
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
    }
    wanted_security = {**(security or {}), **(component.get("securityContext") or {})}
    if wanted_security:
        spec["securityContext"] = wanted_security
    if component.get("priorityClassName"):
        spec["priorityClassName"] = component["priorityClassName"]
    for container in containers:
        pull = (component.get("image") or {}).get("pullPolicy")
        if pull and container["name"] != "mysql":
            container["imagePullPolicy"] = pull
    spec["containers"] = containers
    if volumes:
        spec["volumes"] = volumes
    selector = {**_region_selector(values), **(component.get("nodeSelector") or {})}
    if selector:
        spec["nodeSelector"] = {str(k): str(v) for k, v in selector.items()}
    for key in ("affinity", "tolerations"):
        if component.get(key):
            spec[key] = component[key]
    if values.get("imagePullSecrets"):
        spec["imagePullSecrets"] = values["imagePullSecrets"]
    return spec


def _region_selector(values: Obj) -> dict[str, str]:
    """Seed 001: nodeSelector.region places the control plane (not compute) in a region."""
    region = (values.get("nodeSelector") or {}).get("region")
    return {wk.NODE_LABEL_REGION: str(region)} if region else {}


def _template(labels: dict[str, str], default_container: str, pod: Obj) -> Obj:
    return {
        "metadata": {
            "labels": labels,
            "annotations": {wk.ANNOTATION_DEFAULT_CONTAINER: default_container},
        },
        "spec": pod,
    }


def _deployment(
    release: str, namespace: str, name: str, component: str, selector: dict[str, str],
    main: str, pod: Obj, *, replicas: int,
) -> Obj:  # fmt: skip
    labels = {**owned_labels(release, component), **selector}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            # Never two at once: two slurmctld on one state directory corrupt it.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": _template(labels, main, pod),
        },
    }


def _statefulset(
    release: str, namespace: str, name: str, component: str, selector: dict[str, str],
    main: str, pod: Obj, *, replicas: int = 1,
) -> Obj:  # fmt: skip
    labels = {**owned_labels(release, component), **selector}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": selector},
            "template": _template(labels, main, pod),
        },
    }


def _service(
    release: str, namespace: str, name: str, component: str, selector: dict[str, str],
    port_name: str, port: int, *, headless: bool = False,
) -> Obj:  # fmt: skip
    spec: Obj = {"clusterIP": "None"} if headless else {}
    spec["selector"] = selector
    spec["ports"] = [{"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": owned_labels(release, component)},
        "spec": spec,
    }  # fmt: skip


def _claim(release: str, namespace: str, name: str, component: str, storage: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": owned_labels(release, component)},
        "spec": _claim_spec(storage),
    }  # fmt: skip


def _claim_spec(storage: Obj) -> Obj:
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage.get("size", "10Gi")}},
    }
    if storage.get("storageClassName"):
        spec["storageClassName"] = storage["storageClassName"]
    return spec


def _jwt_volume(release: str) -> Obj:
    return {"name": "jwt-key",
            "secret": {"secretName": jwt_secret_name(release), "defaultMode": 0o400}}  # fmt: skip


def _address(profile: Profile, port: int) -> str:
    return f"{profile.listen_address}:{port}"


def _port(name: str, port: int) -> Obj:
    return {"name": name, "containerPort": port, "protocol": "TCP"}
