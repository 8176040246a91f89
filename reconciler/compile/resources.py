"""Default requests and limits of every container we render, and the values keys that set them
(docs/rendered-pods.md#resources). One table: a container without one would run as
`resources: {}`, BestEffort, first to be evicted and free to take a Node's memory.

A values `resources` mapping replaces the default whole (as `controller.resources` always
has): requests and limits are set together, or Kubernetes would raise a request over a limit.
Defaults are small requests, and a memory limit where a leak must not take the Node; the CPU
is never limited for a daemon (throttling slurmctld or munged slows every job's start).
"""

from __future__ import annotations

import copy

from reconciler.objects import Obj


def _sized(cpu: str, memory: str, memory_limit: str) -> Obj:
    return {"limits": {"memory": memory_limit}, "requests": {"cpu": cpu, "memory": memory}}


# The defaults of SUNK's "Slurm Workload Manager" page (requests = limits) for the two it gives.
CONTROLLER = {"limits": {"cpu": "4", "memory": "16Gi"}, "requests": {"cpu": "4", "memory": "16Gi"}}
LOGIN = {"limits": {"cpu": "4", "memory": "8Gi"}, "requests": {"cpu": "4", "memory": "8Gi"}}
# `<section>.resources` of the control plane's main containers.
COMPONENTS: dict[str, Obj] = {
    "controller": CONTROLLER,
    "login": LOGIN,
    "rest": _sized("100m", "128Mi", "1Gi"),
    "accounting": _sized("100m", "256Mi", "1Gi"),
    "mysql": _sized("250m", "512Mi", "2Gi"),
}
# `sidecars.<name>.resources`: the containers every Pod of a kind carries beside its daemon.
SIDECARS: dict[str, Obj] = {
    "munge": _sized("10m", "16Mi", "128Mi"),  # munged, and the init step that copies its key
    "sssd": _sized("10m", "64Mi", "256Mi"),
    "reconfigure": _sized("10m", "16Mi", "128Mi"),
}


def component_resources(values: Obj, component: str) -> Obj:
    return copy.deepcopy((values.get(component) or {}).get("resources") or COMPONENTS[component])


def sidecar_resources(values: Obj, sidecar: str) -> Obj:
    """A copy each time: one mapping in two containers would be a YAML anchor when rendered."""
    sidecars = values.get("sidecars") or {}
    return copy.deepcopy((sidecars.get(sidecar) or {}).get("resources") or SIDECARS[sidecar])
