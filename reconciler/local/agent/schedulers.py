"""Which scheduler a repo's Pods need, beside the node agent (pure).

The node agent places only Pods that name Kubernetes' default scheduler, as kube-scheduler
would. A power-saving repo's slurmd Pods name our Pod scheduler instead (compile/manifests.py):
without it they stay Pending, so `local up` of such a repo must run it (cli/local_scheduler.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

DEFAULT_SCHEDULER = "default-scheduler"


def scheduler_needed(objects: Iterable[Mapping[str, Any]]) -> str | None:
    """The one scheduler other than the default that the Pod templates of `objects`
    (the compiled Deployments and StatefulSets) name, or None when the node agent places all."""
    for obj in objects:
        template = (obj.get("spec") or {}).get("template") or {}
        name = (template.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER
        if name != DEFAULT_SCHEDULER:
            return str(name)
    return None
