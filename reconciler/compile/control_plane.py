"""Kubernetes objects for the Slurm control plane, from the values of SUNK's "Slurm Workload
Manager" page: the controller (slurmctld), slurmrestd, slurmdbd and its MySQL (slurmdbd.py), and the
login nodes. Names and labels are SUNK's, so that page's commands work as written there:

    kubectl logs -l app.kubernetes.io/name=slurmctld -c slurmctld
    kubectl get deployments -l app.kubernetes.io/component=controller
    kubectl rollout restart deployment <release>-controller
"""

from __future__ import annotations

from reconciler import wellknown as wk
from reconciler.compile import probes
from reconciler.compile.directory import with_directory
from reconciler.compile.dns import with_compute_search
from reconciler.compile.images import control_plane_image, controller_image
from reconciler.compile.manifests import (
    CONF_MOUNT,
    field_env,
    pvc_volume_name,
    slurm_conf_map_name,
)
from reconciler.compile.munge import munge_socket_mount, munge_volumes, with_munge
from reconciler.compile.power import (
    controller_power_mounts,
    controller_power_volumes,
    power_saving,
)
from reconciler.compile.profile import Profile
from reconciler.compile.resources import component_resources, sidecar_resources
from reconciler.compile.slurmdbd import accounting_plan, mysql_objects, slurmdbd_objects
from reconciler.compile.sshd import SSHD_START, authorized_keys, sshd_mount, sshd_volume
from reconciler.compile.user_containers import check_container_names, with_user_containers
from reconciler.compile.workloads import (
    JWT_DIR,
    SLURM_UID,
    claim_for,
    container_port,
    deployment_for,
    jwt_volume,
    listen_address,
    pod_spec,
    service_for,
    statefulset_for,
)
from reconciler.config.keys import default_of
from reconciler.objects import Obj

STATE_DIR = "/var/spool/slurmctld"
NOBODY_UID = 65534  # slurmrestd refuses to run as root or as SlurmUser


def controller_name(release: str) -> str:
    return f"{release}-controller"


def rest_name(release: str) -> str:
    return f"{release}-rest"


def login_name(release: str) -> str:
    return f"{release}-login"


def controller_state_claim(release: str) -> str:
    return f"{release}-controller-state"


def rest_enabled(values: Obj) -> bool:
    return (values.get("rest") or {}).get("enabled", default_of("rest.enabled")) is not False


def login_enabled(values: Obj) -> bool:
    return (values.get("login") or {}).get("enabled", default_of("login.enabled")) is not False


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
        objects += slurmdbd_objects(release, namespace, values, accounting, slurmdbd_conf)
    if accounting.render_mysql:
        objects += mysql_objects(release, namespace, values, accounting)
    if login_enabled(values):
        objects += _login(release, namespace, values, profile.ssh_port)
    return objects


# ---- the controller -----------------------------------------------------------------------

SLURMCTLD_RUN_DIR = "/run/slurmctld"  # its pid file (profile.py's SlurmctldPidFile)


def _controller(release: str, namespace: str, values: Obj, profile: Profile) -> list[Obj]:
    controller = values.get("controller") or {}
    name = controller_name(release)
    selector = {wk.LABEL_NAME: "slurmctld", wk.LABEL_RELEASE: release}
    container = {
        "name": "slurmctld",
        "image": controller_image(values),
        "args": ["slurmctld", "-D"],
        "ports": [container_port("slurmctld", profile.slurmctld_port)],
        **probes.slurmctld(profile.slurmctld_port),
        "resources": component_resources(values, "controller"),
        "volumeMounts": [
            {"name": "slurm-conf", "mountPath": CONF_MOUNT, "readOnly": True},
            {"name": "jwt-key", "mountPath": JWT_DIR, "readOnly": True},
            {"name": "state", "mountPath": STATE_DIR},
            {"name": "slurmctld-run", "mountPath": SLURMCTLD_RUN_DIR},
            munge_socket_mount(),
        ],
    }
    volumes = [
        {"name": "slurm-conf", "configMap": {"name": slurm_conf_map_name(release)}},
        jwt_volume(release),
        {"name": "state", "persistentVolumeClaim": {"claimName": controller_state_claim(release)}},
        {"name": "slurmctld-run", "emptyDir": {"medium": "Memory"}},
        *munge_volumes(release),
    ]
    if power_saving(values) is not None:
        container["volumeMounts"] += controller_power_mounts(CONF_MOUNT)
        volumes += controller_power_volumes(release)
    containers = [container, _reconfigure_container(container["image"], values)]
    pod = pod_spec(values, controller, containers, volumes,
                   security={"runAsUser": SLURM_UID, "runAsGroup": SLURM_UID,
                             "fsGroup": SLURM_UID}, grace=10)  # fmt: skip
    pod = with_directory(with_munge(pod, values), release, values)
    pod = with_compute_search(pod, release, namespace, values)
    # slurmctld starts only on the host SlurmctldHost names: the Pod's hostname is that name.
    pod["hostname"] = name
    deployment = deployment_for(
        release, namespace, name, "controller", selector, "slurmctld", pod,
        replicas=controller.get("replicas", default_of("controller.replicas")),
    )  # fmt: skip
    return [
        deployment,
        claim_for(release, namespace, controller_state_claim(release), "controller",
                  controller.get("stateVolume") or {}),
        service_for(release, namespace, name, "controller", selector, "slurmctld",
                    profile.slurmctld_port),
    ]  # fmt: skip


# kubelet updates a ConfigMap volume a while after the ConfigMap changes (up to about a
# minute): the controller Pod itself tells slurmctld to reread its config once the files it
# mounts have changed, so slurmctld never rereads the old ones. Every file, not only *.conf:
# topology.yaml (25.05+) and the Lua plugins live there too (the glob skips kubelet's
# dot-directories). Needs nothing but the image's shell and scontrol (and munge, beside it).
RECONFIGURE_SCRIPT = (
    f"conf() {{ cat {CONF_MOUNT}/* 2>/dev/null | cksum; }}; seen=$(conf); "
    "while sleep 5; do now=$(conf); "
    '[ "$now" = "$seen" ] || { scontrol reconfigure && seen=$now; }; done'
)


def _reconfigure_container(image: str, values: Obj) -> Obj:
    return {
        "name": "reconfigure",
        "image": image,
        "command": ["sh", "-c", RECONFIGURE_SCRIPT],
        "resources": sidecar_resources(values, "reconfigure"),
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
        "image": control_plane_image(values, "rest"),
        "args": ["slurmrestd", "-a", "rest_auth/jwt", listen_address(profile, profile.rest_port)],
        # slurmrestd passes each client's JWT on to slurmctld only with auth/jwt as its own
        # plugin; without it auth/munge rejects every request ("Rejecting thread config
        # token"), so nothing could call the REST API.
        "env": [{"name": "SLURM_JWT", "value": "daemon"}],
        "ports": [container_port("slurmrestd", profile.rest_port)],
        **probes.slurmrestd(profile.rest_port),
        "resources": component_resources(values, "rest"),
        "volumeMounts": [
            {"name": "slurm-conf", "mountPath": CONF_MOUNT, "readOnly": True},
            munge_socket_mount(),
        ],
    }
    volumes = [
        {"name": "slurm-conf", "configMap": {"name": slurm_conf_map_name(release)}},
        *munge_volumes(release),
    ]
    pod = pod_spec(values, rest, [container], volumes,
                   security={"runAsUser": NOBODY_UID, "runAsGroup": NOBODY_UID})  # fmt: skip
    pod = with_munge(pod, values)
    return [
        deployment_for(release, namespace, name, "rest", selector, "slurmrestd", pod,
                       replicas=rest.get("replicas", default_of("rest.replicas"))),
        service_for(release, namespace, name, "rest", selector, "slurmrestd", profile.rest_port),
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
        sshd_volume(),
    ]
    mounts.append(sshd_mount())
    # The same shared storage as compute nodes (SUNK's "Slurm Workload Manager" page:
    # compute.mounts), so users see their files where their jobs run.
    for mount in compute.get("mounts") or []:
        volume = pvc_volume_name(mount["pvc"])
        mounts.append({"name": volume, "mountPath": mount["name"]})
        volumes.append({"name": volume, "persistentVolumeClaim": {"claimName": mount["pvc"]}})
    keys_mounts, keys_volumes = authorized_keys(values)
    mounts += keys_mounts
    volumes += keys_volumes
    container = {
        "name": "sshd",
        "image": control_plane_image(values, "login"),
        "args": ["sh", "-c", SSHD_START],
        "env": [field_env("POD_NAME", "metadata.name")],
        "ports": [container_port("ssh", ssh_port)],
        **probes.sshd(ssh_port),
        "resources": component_resources(values, "login"),
        # sshd runs as root: it becomes each user who logs in (CONTRACT-32).
        "securityContext": {"runAsUser": 0, "runAsGroup": 0},
        "volumeMounts": mounts,
    }
    pod = pod_spec(values, login, [container], volumes, security=None, grace=10)
    pod = with_directory(with_munge(pod, values), release, values, login=True)
    pod = with_user_containers(with_compute_search(pod, release, namespace, values), login)
    check_container_names(pod, login, "login")
    replicas = login.get("replicas", default_of("login.replicas"))
    statefulset = statefulset_for(release, namespace, name, "login", selector, "sshd", pod,
                                  replicas=replicas)  # fmt: skip
    return [statefulset, _login_service(release, namespace, login, selector, ssh_port)]


def _login_service(
    release: str, namespace: str, login: Obj, selector: dict[str, str], port: int
) -> Obj:
    settings = login.get("service") or {}
    kind = settings.get("type", default_of("login.service.type"))
    service = service_for(release, namespace, login_name(release), "login", selector, "ssh",
                          port)  # fmt: skip
    service["spec"]["type"] = kind
    if kind != "ClusterIP":  # Kubernetes refuses the field on a ClusterIP Service
        policy = default_of("login.service.externalTrafficPolicy")
        service["spec"]["externalTrafficPolicy"] = settings.get("externalTrafficPolicy", policy)
    if settings.get("annotations"):
        service["metadata"]["annotations"] = {
            str(k): str(v) for k, v in settings["annotations"].items()
        }
    return service
