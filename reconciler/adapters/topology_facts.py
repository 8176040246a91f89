"""What compute.topology needs from the live cluster, read into the compiler's plain shape: the
labels it names on each Kubernetes Node, the Node each slurmd Pod of a release is bound to,
and the Slurm release slurmctld runs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.compile.topology import TopologyInputs
from reconciler.errors import ReconcilerError

_RELEASE = re.compile(r"(\d+)\.(\d+)")


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
    slurm: SlurmRestApi | None = None,
    *,
    known_release: str = "",
) -> TopologyInputs:
    """Only the `labels` of each Node are kept. The Slurm release is slurmctld's when it answers,
    else `known_release` (a new cluster's, before slurmctld runs), else not known."""
    pods = kube.list("v1", "Pod", namespace, label_selector=slurmd_selector(release)).items
    hosts = dict(place for pod in pods if (place := _place(pod)) is not None)
    node_labels = {}
    for node in kube.list("v1", "Node").items:
        have = (node.get("metadata") or {}).get("labels") or {}
        node_labels[str(node["metadata"]["name"])] = {k: str(have[k]) for k in labels if k in have}
    running = _running_release(slurm) if slurm is not None else None
    return TopologyInputs(node_labels, hosts, running or _parsed(known_release))


def _place(pod: dict[str, Any]) -> tuple[str, str] | None:
    """(Slurm node, Kubernetes Node) of a slurmd Pod: where it is bound. A Pod being deleted
    has no place (its Slurm node is going, or coming back elsewhere), unless power saving
    marked it with the Node it leaves: a powered-down node keeps that place while it sleeps
    (its held Pod carries the same mark), and goes back there when it fits."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    left = (meta.get("annotations") or {}).get(wk.ANNOTATION_LAST_NODE)
    node = left if meta.get("deletionTimestamp") else spec.get("nodeName") or left
    return (str(meta["name"]), str(node)) if node else None


def _running_release(slurm: SlurmRestApi) -> tuple[int, int] | None:
    """(major, minor) of the Slurm slurmctld runs; None when it does not answer."""
    try:
        return _parsed(slurm.slurm_version)
    except ReconcilerError:
        return None


def _parsed(text: str) -> tuple[int, int] | None:
    match = _RELEASE.match(text)
    return (int(match.group(1)), int(match.group(2))) if match else None
