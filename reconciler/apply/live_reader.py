"""Read what is live, through the adapters, into the differ's plain LiveState."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import hostlist

from reconciler import hostlists
from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.sacctmgr import Sacctmgr, SacctmgrError
from reconciler.adapters.slurm.model import (
    SlurmJob,
    SlurmNode,
    SlurmReservation,
    SlurmRestApi,
)
from reconciler.compile.desired import DesiredState
from reconciler.compile.manifests import slurm_conf_map_name
from reconciler.compile.topology import TOPOLOGY_FILES
from reconciler.compile.value_secrets import live_digest
from reconciler.errors import SlurmUnavailableError
from reconciler.plan.diff import kube_ref, needs_dry_run
from reconciler.plan.live import LiveAccounting, LiveJob, LiveNode, LiveReservation, LiveState
from reconciler.plan.model import ObjectRef

# The kinds we render (compile/manifests.py); only these are listed and pruned.
OWNED_KINDS = (
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("v1", "PersistentVolumeClaim"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "Deployment"),
)

# How slurmrestd v0.0.38 reports reservation flags that scontrol takes under another name
# (checked on 22.05.8); SPEC_NODES is Slurm's own, on every reservation that names nodes.
_FLAG_SPELLING = {"STATIC": "STATIC_ALLOC", "NO_HOLD_JOBS_AFTER_END": "NO_HOLD_JOBS_AFTER"}
_SLURM_OWN_FLAGS = frozenset({"SPEC_NODES"})


def owned_selector(release: str) -> str:
    return f"{wk.LABEL_MANAGED_BY}={wk.MANAGED_BY_VALUE},{wk.LABEL_RELEASE}={release}"


def read_live(
    kube: Kube,
    slurm: SlurmRestApi,
    release: str,
    namespace: str,
    sacctmgr: Sacctmgr | None = None,
    secret_names: Iterable[str] = (),
    value_secret_names: Iterable[str] = (),
) -> LiveState:
    objects = {
        kube_ref(obj): obj
        for api_version, kind in OWNED_KINDS
        for obj in kube.list(
            api_version, kind, namespace, label_selector=owned_selector(release)
        ).items
    }
    conf_map = objects.get(ObjectRef("kubernetes", "ConfigMap", namespace,
                                     slurm_conf_map_name(release)))  # fmt: skip
    data = (conf_map or {}).get("data") or {}
    secrets = existing_secrets(kube, secret_names, namespace)
    digests = value_secret_digests(kube, value_secret_names, namespace)
    secrets |= frozenset(digests)
    now = int(time.time())
    try:
        snapshot = slurm.nodes()
        reservations = {r.name: live_reservation(r) for r in slurm.reservations().items}
    except SlurmUnavailableError as error:
        # The differ decides: a control plane of ours that is down explains it (bootstrap).
        return LiveState(objects, {}, data.get("slurm.conf"), data.get("gres.conf"), {}, now,
                         secrets=secrets, secret_digests=digests,
                         slurm_error=error.message,
                         topology_files=_topology_files(data))  # fmt: skip
    nodes = {n.name: live_node(n) for n in (snapshot.items if snapshot else ())}
    return LiveState(
        objects,
        nodes,
        data.get("slurm.conf"),
        data.get("gres.conf"),
        reservations,
        now,
        read_accounting(sacctmgr) if sacctmgr is not None else None,
        secrets=secrets,
        secret_digests=digests,
        topology_files=_topology_files(data),
    )


def _topology_files(data: Mapping[str, str]) -> dict[str, str]:
    return {name: data[name] for name in TOPOLOGY_FILES if name in data}


def existing_secrets(kube: Kube, names: Iterable[str], namespace: str) -> frozenset[str]:
    """Which of these Secrets exist. Read by name (RBAC grants `get` on these names only,
    never a list of every Secret); the data is dropped here, never kept or shown."""
    return frozenset(name for name in names if kube.get("v1", "Secret", name, namespace))


def value_secret_digests(kube: Kube, names: Iterable[str], namespace: str) -> dict[str, str]:
    """The digest of each existing Secret whose data values give: compared with the desired
    data's, in memory; the data is dropped here."""
    found = {name: kube.get("v1", "Secret", name, namespace) for name in names}
    return {name: live_digest(secret) for name, secret in found.items() if secret}


def read_accounting(sacctmgr: Sacctmgr) -> LiveAccounting | None:
    """QOS, accounts and users from slurmdbd; None when it does not answer (no accounting)."""
    try:
        qos = sacctmgr.qos()
        accounts, users = sacctmgr.accounts_and_users()
    except SacctmgrError:
        return None
    return LiveAccounting(qos, accounts, users)


def live_reservation(resv: SlurmReservation) -> LiveReservation:
    flags = {_FLAG_SPELLING.get(f, f) for f in resv.flags} - _SLURM_OWN_FLAGS
    nodes = hostlist.expand_hostlist(resv.node_list) if resv.node_list else []
    return LiveReservation(
        name=resv.name,
        nodes=tuple(sorted(nodes)),
        start=resv.start_time,
        end=resv.end_time,
        flags=frozenset(flags),
        users=tuple(resv.users),
        accounts=tuple(resv.accounts),
    )


def read_jobs(slurm: SlurmRestApi) -> tuple[LiveJob, ...]:
    """Slurm's jobs now (running and queued): whom a plan's disruptive actions touch."""
    snapshot = slurm.jobs()
    return tuple(live_job(job) for job in (snapshot.items if snapshot else ()))


def live_job(job: SlurmJob) -> LiveJob:
    return LiveJob(
        job_id=job.job_id,
        user=job.user_name or (str(job.user_id) if job.user_id is not None else "?"),
        partition=job.partition,
        state=job.state,
        nodes=tuple(hostlists.expand(job.nodes)) if job.nodes else (),
        node_list=job.nodes,
    )


def live_node(node: SlurmNode) -> LiveNode:
    return LiveNode(
        name=node.name,
        states=frozenset({node.state, *node.flags}),
        reason=node.reason or None,
        cpus=node.cpus,
        real_memory_mb=node.real_memory,
        gres=node.gres or None,
        features=tuple(node.features),
    )


def server_views(
    kube: Kube, state: DesiredState, live: LiveState
) -> dict[ObjectRef, dict[str, Any]]:
    """Server-side apply dry-runs of the objects that may change: what the API server would
    store, defaults and other managers' fields included."""
    desired = {kube_ref(obj): obj for obj in state.kube_objects}
    return {
        ref: kube.apply(desired[ref], dry_run=True, force=True)
        for ref in needs_dry_run(state, live)
    }
