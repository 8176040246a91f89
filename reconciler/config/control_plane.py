"""The control-plane keys of a SUNK values file (SUNK's "Slurm Workload Manager" page: controller.*,
login.*, plus the accounting, rest and mysql sections), and the report of keys we accept but do not
act on.

Every key a user writes is either used or named in a warning: the tables here list what the
compiler reads; `unused_key_warnings` walks the file and reports the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reconciler.config.value_types import Key, Table
from reconciler.config.yamlfile import KeyPath
from reconciler.suggest import did_you_mean

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
TRAFFIC_POLICIES = ("Cluster", "Local")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_ONE_CONTROLLER = (
    "one slurmctld owns the state directory; Kubernetes restarts it when it "
    "fails, so a backup controller is not needed (SUNK's 'About SUNK')"
)


def _pod(prefix: str, pod: str) -> Table:
    """The Pod keys every control-plane component takes, under `prefix`, for Pod `pod`."""
    table = {
        "image": Key("mapping", f"the {pod} Pod's image"),
        "image.repository": Key("string", "image repository"),
        "image.tag": Key("string", "image tag"),
        "image.pullPolicy": Key("string", "imagePullPolicy", choices=PULL_POLICIES),
        "resources": Key("mapping", f"the {pod} container's resources"),
        "securityContext": Key("mapping", f"the {pod} Pod's securityContext"),
        "terminationGracePeriodSeconds": Key("integer", f"the {pod} Pod's grace period", minimum=0),
        "priorityClassName": Key("string", f"the {pod} Pod's priorityClassName"),
        "nodeSelector": Key("mapping", f"the {pod} Pod's nodeSelector"),
        "tolerations": Key("list of mappings", f"the {pod} Pod's tolerations"),
        "affinity": Key("mapping", f"the {pod} Pod's affinity"),
    }
    return {f"{prefix}.{key}": entry for key, entry in table.items()}


def _storage(prefix: str, claim: str) -> Table:
    return {
        f"{prefix}.size": Key("string", f"{claim}'s size", "10Gi"),
        f"{prefix}.storageClassName": Key("string", f"{claim}'s storage class"),
    }


CONTROL_PLANE_VALUES: Table = {
    "nodeSelector": Key("mapping", "a nodeSelector for every control-plane Pod"),
    "nodeSelector.region": Key("string", "topology.kubernetes.io/region of control-plane Pods"),
    "controller": Key("mapping", "slurmctld"),
    "controller.replicas": Key(
        "integer",
        "replicas of Deployment <release>-controller",
        1,
        choices=(0, 1),
        hint=_ONE_CONTROLLER,
    ),
    **_pod("controller", "slurmctld"),
    "controller.stateVolume": Key("mapping", "the PVC at StateSaveLocation"),
    **_storage("controller.stateVolume", "the state PVC"),
    "rest": Key("mapping", "slurmrestd"),
    "rest.enabled": Key("boolean", "Deployment and Service <release>-rest", True),
    "rest.replicas": Key("integer", "replicas of slurmrestd", 1, minimum=0),
    **_pod("rest", "slurmrestd"),
    "accounting": Key("mapping", "slurmdbd"),
    "accounting.enabled": Key("boolean", "slurmdbd and AccountingStorage* in slurm.conf", False),
    **_pod("accounting", "slurmdbd"),
    "accounting.external": Key("mapping", "an slurmdbd outside the cluster"),
    "accounting.external.host": Key("string", "its host", slurm="word"),
    "accounting.external.port": Key(
        "integer", "its port (default: slurmdbd's)", minimum=1, maximum=65535
    ),
    "accounting.database": Key("mapping", "a MySQL outside the cluster"),
    "accounting.database.host": Key("string", "its host", slurm="word"),
    "accounting.database.port": Key(
        "integer", "its port (default: MySQL's)", minimum=1, maximum=65535
    ),
    "accounting.database.name": Key("string", "the database", "slurm_acct_db", slurm="word"),
    "accounting.database.user": Key("string", "the user", "slurm", slurm="word"),
    "accounting.database.passwordSecret": Key("string", "a Secret with key password"),
    "mysql": Key("mapping", "MariaDB for slurmdbd, in the cluster"),
    **_pod("mysql", "mysql"),
    "mysql.storage": Key("mapping", "its data claim"),
    **_storage("mysql.storage", "the data claim"),
    "login": Key("mapping", "the login nodes"),
    "login.enabled": Key("boolean", "StatefulSet and Service <release>-login", True),
    "login.replicas": Key("integer", "login Pods", 1, minimum=0),
    **_pod("login", "login"),
    "login.service": Key("mapping", "Service <release>-login"),
    "login.service.type": Key("string", "its type", "LoadBalancer", choices=SERVICE_TYPES),
    "login.service.externalTrafficPolicy": Key(
        "string", "its externalTrafficPolicy (not for ClusterIP)", "Local", choices=TRAFFIC_POLICIES
    ),
    "login.service.exposePublicIP": Key("boolean", "reported: a CoreWeave load-balancer feature"),
    "login.service.annotations": Key("mapping", "its annotations"),
    "login.authorizedKeysSecret": Key("string", "a Secret with authorized_keys for root"),
    # Sidecars on the login Pods (SUNK's "About SUNK"), as a node definition takes them.
    "login.containers": Key("list of mappings", "sidecars after ours"),
    "login.initContainers": Key("list of mappings", "init containers after ours"),
}

# Mappings handed to Kubernetes whole: their inside is Kubernetes', not ours to list.
PASSED_WHOLE = (
    "resources", "securityContext", "nodeSelector", "tolerations", "affinity", "annotations",
    "imagePullSecrets", "compute.nodes", "compute.s6", "compute.mounts", "slurmConfig.reservations",
    "slurmConfig.accounting", "slurmConfig.slurmd.prolog", "slurmConfig.slurmd.epilog",
    "login.service.annotations", "directoryService.directories",
)  # fmt: skip

# Keys of the values table of SUNK's "Slurm Workload Manager" page that this project accepts but
# does not act on, and why.
NOT_ACTED_ON: dict[str, str] = {
    "network": "CoreWeave VPC networking has no equivalent on a generic Kubernetes cluster",
    "login.service.exposePublicIP": "a public IP is a CoreWeave load-balancer feature; set the "
    "provider's annotation in login.service.annotations instead",
}


def unused_key_paths(data: Any, known: set[str]) -> Iterator[tuple[KeyPath, str]]:
    """(path, why) for every key in `data` that no table reads."""
    yield from _walk(data, (), known)


def _walk(data: Any, path: KeyPath, known: set[str]) -> Iterator[tuple[KeyPath, str]]:
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        here = (*path, key)
        dotted = ".".join(str(p) for p in here)
        if dotted in NOT_ACTED_ON:
            yield here, f"{dotted} is accepted but not acted on: {NOT_ACTED_ON[dotted]}"
        elif dotted not in known:
            yield here, _unknown(dotted, known)
        elif not any(dotted == p or dotted.endswith(f".{p}") for p in PASSED_WHOLE):
            yield from _walk(value, here, known)


def _unknown(dotted: str, known: set[str]) -> str:
    parent, _, key = dotted.rpartition(".")
    siblings = [k.rpartition(".")[2] for k in known if k.rpartition(".")[0] == parent]
    close = did_you_mean(key, siblings)
    text = f"{dotted} is not a key this reconciler reads; it is ignored"
    return text + (f"; {close}" if close else "")
