"""The containers a user adds to our Pods (SUNK's "About SUNK": "add sidecar containers to Slurm
login and compute nodes"): a node definition's `containers`/`initContainers` and `login.containers`/
`login.initContainers`, handed to Kubernetes as written, beside the ones we render.

One rule for both kinds of Pod: Kubernetes refuses a Pod whose containers and init containers
share a name, so a name the user gives that one of ours already has (slurmd, sshd, munge,
munge-key, sssd), or that two of the user's share, is a plan error naming the container,
rather than a StatefulSet the API server refuses at apply.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from reconciler.errors import CompileError
from reconciler.objects import Obj

KINDS = ("containers", "initContainers")


def user_containers(section: Obj, kind: str) -> list[Obj]:
    """`section`'s `containers` or `initContainers`, copied: the render never shares (or
    changes) the values' own mappings."""
    return copy.deepcopy(list(section.get(kind) or []))


def with_user_containers(pod: Obj, section: Obj) -> Obj:
    """`pod` with the section's containers after ours and its init containers after ours."""
    extra = {kind: user_containers(section, kind) for kind in KINDS}
    return {**pod, **{kind: [*(pod.get(kind) or []), *extra[kind]]
                      for kind in KINDS if extra[kind]}}  # fmt: skip


def check_container_names(pod: Obj, section: Obj, key: str) -> None:
    """Refuse a Pod whose user containers' names are taken, by one of ours or another of the
    user's. `key` names where they were written (`login`, `node definition 'gpu'`)."""
    ours = Counter(c.get("name") for kind in KINDS for c in pod.get(kind) or [])
    for kind in KINDS:
        for container in section.get(kind) or []:
            ours[container.get("name")] -= 1
    seen: set[Any] = set()
    for kind in KINDS:
        for index, container in enumerate(section.get(kind) or []):
            name = container.get("name")
            where = f"{key}.{kind}[{index}]"
            if not isinstance(name, str) or not name:
                raise CompileError(f"{where} has no `name`",
                                   hint="give each container a name of its own, e.g. "
                                   "node-exporter")  # fmt: skip
            if ours[name] > 0:
                raise CompileError(
                    f"{where}: container {name!r} has the name of a container the reconciler "
                    "renders in this Pod",
                    hint=f"rename it: Kubernetes refuses a Pod whose containers share a name "
                    f"(ours here: {', '.join(sorted(n for n in ours if ours[n] > 0))})",
                )
            if name in seen:
                raise CompileError(f"{where}: container {name!r} is named twice",
                                   hint="give each container a name of its own")  # fmt: skip
            seen.add(name)
