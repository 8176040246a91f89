"""What policies see: the compiled state as plain objects, one per target, and the params.

nodeDefinition  a composed compute.nodes entry: its fields, plus name, layers, enabled
slurmConfig     values' slurmConfig, plus `slurmConf` (the rendered text) and `options`
                (its KEY=VALUE settings)
partition       name and options (KEY -> VALUE) of one compute.partitions line
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from reconciler.compile.desired import DesiredState
from reconciler.config.defaults import DEFAULT_KILL_WAIT_SECONDS, default_scheduler_name
from reconciler.config.layering import plain
from reconciler.config.repo import Config
from reconciler.errors import Location
from reconciler.policy.engine import CompiledPolicy, Finding, evaluate

# The highest sunk.coreweave.com/priority a Pod may set without values
# scheduler.podPolicy.maxPriority (pod-priority-at-most-max): the example of
# SUNK's "Schedule Kubernetes Pods with Slurm" is 100.
DEFAULT_MAX_PRIORITY: Final = 1000
# SUNK's "Schedule Kubernetes Pods with Slurm": "The Slurm job will default to using the root user
# (uid=0, gid=0)".
ROOT_UID: Final = 0


@dataclass(frozen=True)
class Subject:
    target: str
    object: dict[str, Any]
    name: str  # "nodeDefinition h100", for findings
    where: Location | None = None


def params_of(config: Config, slurm_node_hosts: Iterable[str] = ()) -> dict[str, Any]:
    """Cluster settings policies may read as `params`."""
    values = config.view.values
    scheduler = values.get("scheduler") or {}
    slurm = values.get("slurmConfig") or {}
    release, namespace = config.settings.release, config.settings.namespace
    kill_wait = scheduler.get("killWait", slurm.get("killWait", DEFAULT_KILL_WAIT_SECONDS))
    return {
        "killWait": int(kill_wait),
        "schedulerName": scheduler.get("name") or default_scheduler_name(namespace, release),
        "release": release,
        "namespace": namespace,
        "slurmNodeHosts": sorted(slurm_node_hosts),
        **pod_policy_params(scheduler.get("podPolicy") or {}),
    }


def pod_policy_params(pod_policy: Mapping[str, Any]) -> dict[str, Any]:
    """values scheduler.podPolicy as pod-user-id-allowed and pod-priority-at-most-max read
    it: allowedUserIds (namespace -> uids, "*" for a namespace without an entry; a namespace
    set to null in a later values file is not listed), defaultUserId (the uid of a Pod
    without user-id: 0, root, unless set, as SUNK's "Schedule Kubernetes Pods with Slurm"
    says) and maxPriority."""
    allowed = pod_policy.get("allowedUserIds") or {}
    max_priority = pod_policy.get("maxPriority")
    default_user = pod_policy.get("defaultUserId")
    return {
        "defaultUserId": ROOT_UID if default_user is None else int(default_user),
        "allowedUserIds": {
            str(namespace): [int(uid) for uid in uids]
            for namespace, uids in allowed.items()
            if uids is not None
        },
        "maxPriority": DEFAULT_MAX_PRIORITY if max_priority is None else int(max_priority),
    }


def default_params() -> dict[str, Any]:
    """params without a config repo (a folder of policies tested on its own)."""
    release = namespace = "slurm"
    return {
        "killWait": DEFAULT_KILL_WAIT_SECONDS,
        "schedulerName": default_scheduler_name(namespace, release),
        "release": release,
        "namespace": namespace,
        "slurmNodeHosts": [],
        **pod_policy_params({}),
    }


def state_subjects(config: Config, state: DesiredState) -> Iterator[Subject]:
    for nodeset in state.nodesets:
        definition = plain(nodeset.definition)
        body = {**definition, "name": nodeset.name, "layers": list(nodeset.layers),
                "enabled": nodeset.enabled}  # fmt: skip
        yield Subject("nodeDefinition", body, f"nodeDefinition {nodeset.name}", nodeset.where)
    slurm_config = dict(config.view.values.get("slurmConfig") or {})
    slurm_config.update(slurmConf=state.slurm_conf, options=conf_options(state.slurm_conf))
    yield Subject("slurmConfig", slurm_config, "slurmConfig")
    for partition in state.partitions:
        body = {"name": partition.name, "options": dict(partition.options)}
        yield Subject("partition", body, f"partition {partition.name}", config.partitions_where)


def conf_options(text: str) -> dict[str, str]:
    """KEY=VALUE lines of slurm.conf (the last wins, as in Slurm); node and partition lines,
    which repeat, are left to the nodeDefinition and partition targets."""
    options: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        key, sep, value = line.partition("=")
        if sep and " " not in key and key not in ("NodeName", "PartitionName", "NodeSet"):
            options[key] = value.strip()
    return options


def evaluate_state(
    policies: Iterable[CompiledPolicy], config: Config, state: DesiredState,
    params: Mapping[str, Any],
) -> list[Finding]:  # fmt: skip
    policies = tuple(policies)
    return [
        finding
        for subject in state_subjects(config, state)
        for finding in evaluate(
            policies, subject.target, subject.object, subject.name, params=params
        )
    ]
