"""What the compiler needs from the live cluster, read into its plain shape: the labels
compute.topology names on each Kubernetes Node, the Node each slurmd Pod of a release is bound
to, and the Slurm release slurmctld runs (which every render targets)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.compile.topology_places import TopologyInputs
from reconciler.errors import ReconcilerError
from reconciler.slurm_release import SlurmRelease, maybe_release


def slurmd_selector(release: str) -> str:
    return ",".join((
        f"{wk.LABEL_NAME}={wk.SLURMD_APP_NAME}",
        f"{wk.LABEL_MANAGED_BY}={wk.MANAGED_BY_VALUE}",
        f"{wk.LABEL_RELEASE}={release}",
    ))  # fmt: skip


def read_topology_inputs(
    kube: Kube,
    namespace: str,
    release: str,
    labels: Sequence[str],
) -> TopologyInputs:
    """Only the `labels` of each Node are kept."""
    pods = kube.list("v1", "Pod", namespace, label_selector=slurmd_selector(release)).items
    hosts = dict(place for pod in pods if (place := _place(pod)) is not None)
    node_labels = {}
    for node in kube.list("v1", "Node").items:
        have = (node.get("metadata") or {}).get("labels") or {}
        node_labels[str(node["metadata"]["name"])] = {k: str(have[k]) for k in labels if k in have}
    return TopologyInputs(node_labels, hosts)


def _place(pod: dict[str, Any]) -> tuple[str, str] | None:
    """(Slurm node, Kubernetes Node) of a slurmd Pod: where it is bound. A Pod being deleted
    has no place (its Slurm node is going, or coming back elsewhere), unless power saving
    marked it with the Node it leaves: a powered-down node keeps that place while it sleeps
    (its held Pod carries the same mark), and goes back there when it fits."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    left = (meta.get("annotations") or {}).get(wk.ANNOTATION_LAST_NODE)
    node = left if meta.get("deletionTimestamp") else spec.get("nodeName") or left
    return (str(meta["name"]), str(node)) if node else None


def live_release(slurm: SlurmRestApi, known: str = "") -> SlurmRelease | None:
    """The release slurmctld runs, as slurmrestd's answers say (its /ping's `meta`, asked once
    per client); else `known` (the local stack's install, before slurmctld runs); else None."""
    try:
        running = maybe_release(slurm.slurm_version)
    except ReconcilerError:
        running = None
    return running or maybe_release(known)
