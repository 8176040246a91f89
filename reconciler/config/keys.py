"""Every values key the reconciler reads, declared once (`Key`: type, default, allowed values,
what it becomes, whether it reaches a Slurm config file), pure.

The keys of SUNK's sections live here; our own sections keep their tables beside their checks
(config/control_plane.py, pods.py, topology.py, ...) and are gathered into ALL_VALUES. A new key
is one entry in one of them plus its use: the checks (config/values_file.py), the compiler's
default (`default_of`), values.schema.json (config/json_schema.py) and docs/values.md's key
reference (config/values_doc.py) all read the entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler import wellknown as wk
from reconciler.config.cluster_labels import CLUSTER_LABEL_VALUES
from reconciler.config.compute_ssh import COMPUTE_SSH_VALUES
from reconciler.config.control_plane import CONTROL_PLANE_VALUES, PULL_POLICIES
from reconciler.config.defaults import DEFAULT_KILL_WAIT_SECONDS, MAX_UNIX_ID
from reconciler.config.directory import DIRECTORY_ENTRY, DIRECTORY_VALUES
from reconciler.config.limits import MAX_NODES
from reconciler.config.lua_plugins import LUA_VALUES
from reconciler.config.pods import POD_VALUES
from reconciler.config.power_saving import DEFAULT_RESUME_TIMEOUT, DEFAULT_SUSPEND_TIMEOUT
from reconciler.config.release_key import RELEASE_VALUES
from reconciler.config.reservations import RESERVATION
from reconciler.config.topology import ENTRY_VALUES, TOPOLOGY_VALUES
from reconciler.config.value_types import Key, Table, default_in

SCOPE_TYPES = ("cluster", "namespace")
UID_HINT = "Slurm reads 4294967294 and 4294967295 as NO_VAL and INFINITE"
# Each count of Slurm nodes is capped where it is written: one line of values must not make
# millions of node names (all node sets together are capped when compiled).
_NODES_HINT = (
    f"the largest Slurm clusters have about 10,000 nodes (Frontier: 9,408); "
    f"{MAX_NODES:,} is the limit for all node sets together"
)
_ENV = "container env (name/value or valueFrom)"
NODE_DEFINITION: Table = {
    "enabled": Key("boolean", "whether its StatefulSet and Slurm nodes are rendered", False),
    "replicas": Key(
        "integer", "slurmd Pods and Slurm nodes", 1, minimum=0, maximum=MAX_NODES, hint=_NODES_HINT
    ),
    "maxReplicas": Key(
        "integer",
        "Slurm nodes declared (spares beyond replicas)",
        minimum=0,
        maximum=MAX_NODES,
        hint=_NODES_HINT,
    ),
    "minReplicas": Key(
        "integer",
        "nodes kept powered up with power saving (SuspendExcNodes)",
        minimum=0,
        maximum=MAX_NODES,
        hint=_NODES_HINT,
    ),
    "definitions": Key("list of strings", "layers composed in order, after `base`"),
    "features": Key("list of strings", "Slurm node features (Features=)"),
    "image": Key("mapping", "the slurmd Pod's image (default: ours)"),
    "image.repository": Key("string", "image repository"),
    "image.tag": Key("string", "image tag"),
    "image.pullPolicy": Key("string", "imagePullPolicy", choices=PULL_POLICIES),
    "env": Key("list of mappings", _ENV),
    "gresGpu": Key("string", "Gres=gpu:<value> on its NodeName line"),
    # Judged against the composed definition's RealMemory when compiled (compile/node_memory).
    "memSpecLimit": Key("integer", "MemSpecLimit= (MiB kept from jobs, below RealMemory)"),
    "resources": Key("mapping", "the slurmd container's resources"),
    "resources.limits": Key("mapping", "limits (RealMemory and CPUs come from them)"),
    "resources.requests": Key("mapping", "requests"),
    "affinity": Key("mapping", "the Pod's affinity"),
    "tolerations": Key("list of mappings", "the Pod's tolerations"),
    "nodeSelector": Key("mapping", "the Pod's nodeSelector"),
    "labels": Key("mapping", "labels of its Pods"),
    "annotations": Key("mapping", "annotations of its Pods"),
    "volumes": Key("list of mappings", "the Pod's volumes"),
    "volumeMounts": Key("list of mappings", "the slurmd container's volumeMounts"),
    "containers": Key("list of mappings", "sidecars after ours"),
    "initContainers": Key("list of mappings", "init containers after ours"),
    "terminationGracePeriodSeconds": Key("integer", "the Pod's grace period", 30, minimum=0),
    "priorityClassName": Key("string", "the Pod's priorityClassName"),
    "dnsPolicy": Key("string", "the Pod's dnsPolicy"),
    "dnsConfig": Key("mapping", "the Pod's dnsConfig"),
    "securityContext": Key("mapping", "the slurmd container's securityContext, over ours"),
    "hostNetwork": Key("boolean", "the Pod's hostNetwork", False),
}

_CONF = "slurm.conf's "
VALUES: Table = {
    "slurmConfig": Key("mapping", "Slurm's settings"),
    "slurmConfig.slurmCtld": Key("mapping", "slurmctld's settings"),
    "slurmConfig.slurmCtld.timeout": Key("integer", _CONF + "SlurmctldTimeout", 60, minimum=0),
    "slurmConfig.slurmCtld.procTrackType": Key(
        "string", _CONF + "ProctrackType", "proctrack/linuxproc", slurm="word"
    ),
    "slurmConfig.slurmCtld.prockTrackType": Key(
        "string", "procTrackType as SUNK's page spells it", slurm="word"
    ),
    "slurmConfig.slurmCtld.taskPlugin": Key(
        "string", _CONF + "TaskPlugin", "task/none", slurm="word"
    ),
    "slurmConfig.slurmd": Key("mapping", "slurmd's settings"),
    "slurmConfig.slurmd.timeout": Key("integer", _CONF + "SlurmdTimeout", 30, minimum=0),
    "slurmConfig.slurmd.suspendTime": Key(
        "string or integer",
        _CONF + "SuspendTime; set, power saving is on",
        "INFINITE",
        slurm="word",
    ),
    "slurmConfig.slurmd.suspendTimeout": Key(
        "integer", _CONF + "SuspendTimeout", DEFAULT_SUSPEND_TIMEOUT, minimum=1
    ),
    "slurmConfig.slurmd.resumeTimeout": Key(
        "integer", _CONF + "ResumeTimeout", DEFAULT_RESUME_TIMEOUT, minimum=1
    ),
    "slurmConfig.slurmd.prologConfigMap": Key("string", "a ConfigMap of prolog scripts you deploy"),
    "slurmConfig.slurmd.prologConfigmap": Key("string", "prologConfigMap, other spelling"),
    "slurmConfig.slurmd.epilogConfigMap": Key("string", "a ConfigMap of epilog scripts you deploy"),
    "slurmConfig.slurmd.prolog": Key(
        "string or mapping", "prolog scripts: ConfigMap <release>-prolog, Prolog="
    ),
    "slurmConfig.slurmd.epilog": Key(
        "string or mapping", "epilog scripts: ConfigMap <release>-epilog, Epilog="
    ),
    "slurmConfig.inactiveLimit": Key("integer", _CONF + "InactiveLimit", 0, minimum=0),
    "slurmConfig.killWait": Key(
        "integer",
        _CONF + "KillWait; the scheduler's kill-wait too",
        DEFAULT_KILL_WAIT_SECONDS,
        minimum=0,
    ),
    "slurmConfig.waitTime": Key("integer", _CONF + "WaitTime", 0, minimum=0),
    "slurmConfig.selectTypeParameters": Key(
        "string", _CONF + "SelectTypeParameters", "CR_Core", slurm="word"
    ),
    "slurmConfig.defMemPerCPU": Key("integer", _CONF + "DefMemPerCPU (MiB)", 4096, minimum=0),
    "slurmConfig.extraConfig": Key("string", "lines appended to slurm.conf", slurm="text"),
    "slurmConfig.cgroupConfig": Key(
        "string", "cgroup.conf lines, with a cgroup plugin", slurm="text"
    ),
    "slurmConfig.gresAutoDetect": Key(
        "string", "gres.conf's AutoDetect for GPU nodes (default nvidia; nvml before Slurm 24.11)"
    ),
    "slurmConfig.gresConfig": Key("string", "gres.conf lines", slurm="text"),
    "slurmConfig.reservations": Key("mapping", "Slurm reservations <release>-<name>"),
    "slurmConfig.accounting": Key("mapping", "Slurm QOS, accounts and users"),
    "compute": Key("mapping", "the compute nodes"),
    "compute.nodes": Key("mapping", "node definitions by name"),
    "compute.partitions": Key(
        "string",
        "PartitionName= lines",
        "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        slurm="text",
    ),
    "compute.mounts": Key(
        "list of mappings", "PVCs on slurmd and login Pods: {name: /path, pvc: claim}"
    ),
    "compute.s6": Key("mapping", "s6-rc services in slurmd containers, by name"),
    "compute.pyxis": Key("mapping", "pyxis and enroot"),
    "compute.pyxis.enabled": Key("boolean", "plugstack.conf with pyxis, enroot.conf", False),
    "compute.pyxis.mountHome": Key("boolean", "ENROOT_MOUNT_HOME", False),
    "compute.pyxis.required": Key("boolean", "required (or optional) in plugstack.conf", True),
    "compute.pyxis.pluginPath": Key(
        "string", "the pyxis plugin's path in the image", "/usr/local/lib/slurm/spank_pyxis.so"
    ),
    "compute.pyxis.credentialsSecret": Key("string", "a Secret with key .credentials for enroot"),
    "compute.pyxis.seccompProfile": Key("string", "a Localhost seccomp profile for slurmd"),
    "compute.securityContext": Key("mapping", "the slurmd container's securityContext, over ours"),
    "scheduler": Key("mapping", "the Pod scheduler"),
    "scheduler.enabled": Key("boolean", "whether the Pod scheduler runs", True),
    "scheduler.name": Key(
        "string",
        "the schedulerName it answers to first (default <namespace>-<release>-slurm-scheduler)",
    ),
    "scheduler.scope": Key("mapping", "which Pods it schedules"),
    "scheduler.scope.type": Key(
        "string", "all namespaces, or those listed", "namespace", choices=SCOPE_TYPES
    ),
    "scheduler.scope.namespaces": Key(
        "string or list of strings", "the namespaces, with type namespace"
    ),
    "scheduler.killWait": Key(
        "integer", "seconds a Pod's job gets to stop (default slurmConfig.killWait)", minimum=0
    ),
    "scheduler.gangFailurePolicy": Key(
        "string",
        "what a gang's failed member does to the rest",
        wk.GANG_FAILURE_POLICIES[0],
        choices=wk.GANG_FAILURE_POLICIES,
    ),
    "scheduler.binPackPartitions": Key(
        "string or list of strings", "partitions whose Pods pack onto the fewest nodes"
    ),
    "scheduler.podPolicy": Key("mapping", "the shipped pod policies' parameters"),
    "scheduler.podPolicy.allowedUserIds": Key(
        "mapping", "namespace -> uids its Pods' jobs may run as", {}
    ),
    "scheduler.podPolicy.defaultUserId": Key(
        "integer",
        "a Pod's job's uid without a user-id annotation (unset: root)",
        minimum=0,
        maximum=MAX_UNIX_ID,
        hint=UID_HINT,
    ),
    "scheduler.podPolicy.maxPriority": Key(
        "integer",
        "the highest priority a Pod may set",
        1000,
        minimum=1,
        hint="Slurm holds a job of priority 0, so admission refuses it in any case",
    ),
    "imagePullSecrets": Key("list of mappings", "imagePullSecrets of every Pod we render"),
}

ALL_VALUES: dict[str, Key] = {**VALUES, **CONTROL_PLANE_VALUES, **DIRECTORY_VALUES}
ALL_VALUES.update(TOPOLOGY_VALUES)  # compute.topology (config/topology.py)
ALL_VALUES.update(RELEASE_VALUES)  # slurmConfig.release (config/release_key.py)
ALL_VALUES.update(POD_VALUES)  # image, sidecars, clusterDomain (config/pods.py)
ALL_VALUES.update(CLUSTER_LABEL_VALUES)  # compute.clusterLabels (config/cluster_labels.py)
ALL_VALUES.update(LUA_VALUES)  # slurmConfig.luaPlugins (config/lua_plugins.py)
ALL_VALUES.update(COMPUTE_SSH_VALUES)  # compute.ssh (config/compute_ssh.py)

S6_TYPES = ("oneshot", "longrun")
MOUNT: Table = {"name": Key("string", "the path"), "pvc": Key("string", "the claim")}
S6_SCRIPT: Table = {
    "type": Key("string", "the s6-rc service type", choices=S6_TYPES),
    "script": Key("string", "the script"),
}


@dataclass(frozen=True)
class Nested:
    """A table of its own for the items of a list key, or the entries of a mapping key."""

    under: str  # the key, dotted from the root
    items: bool  # True: each item of a list; False: each entry of a mapping, by name
    title: str  # for the docs
    table: Table

    @property
    def written(self) -> str:
        """How the docs write a key under it: compute.nodes.<name>, compute.mounts[]."""
        return f"{self.under}[]" if self.items else f"{self.under}.<name>"


NESTED: tuple[Nested, ...] = (
    Nested("compute.nodes", False, "A node definition", NODE_DEFINITION),
    Nested("compute.mounts", True, "A mount", MOUNT),
    Nested("compute.s6", False, "An s6 script", S6_SCRIPT),
    Nested("compute.topology.topologies", True, "A named topology", ENTRY_VALUES),
    Nested("slurmConfig.reservations", False, "A reservation", RESERVATION),
    Nested("directoryService.directories", True, "A directory", DIRECTORY_ENTRY),
)


def default_of(dotted: str) -> Any:
    """What the reconciler uses for a values key (dotted, from the root) that is unset."""
    return default_in(ALL_VALUES, dotted)
