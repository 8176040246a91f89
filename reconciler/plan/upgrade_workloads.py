"""The workloads a Slurm upgrade moves, read from the rendered and the live objects (pure).

What a workload runs after the change is the release its daemon's image tag names (our images
are tagged with the release they are built from: "24.11.5"), else `slurmConfig.release`. What it
runs now is what the daemon says where it can (slurmctld through slurmrestd, slurmdbd through
`sacctmgr show configuration`); a workload on the same image as the live slurmctld runs its
release; else the live image's tag. An upgrade starts only where the repo changes a workload's
image: a cluster whose images say nothing of what runs (the local stack runs every Pod as the
daemon it installed) plans none by itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler import wellknown as wk
from reconciler.compile.target_release import tag_release
from reconciler.objects import ReadObj as Obj
from reconciler.plan.diff import kube_ref
from reconciler.plan.model import ObjectRef
from reconciler.plan.upgrade import LOGIN, SLURMCTLD, SLURMD, SLURMDBD, SLURMRESTD, Workload
from reconciler.slurm_release import SlurmRelease

# Our components (compile/manifests.py's component label) -> (daemon, its container).
DAEMONS: Mapping[str, tuple[str, str]] = {
    "accounting": (SLURMDBD, "slurmdbd"),
    "controller": (SLURMCTLD, "slurmctld"),
    "compute": (SLURMD, "slurmd"),
    "login": (LOGIN, "sshd"),
    "rest": (SLURMRESTD, "slurmrestd"),
}


def upgrade_workloads(
    desired: Sequence[Obj],
    live: Mapping[ObjectRef, Obj],
    *,
    slurmctld: SlurmRelease | None,
    slurmdbd: SlurmRelease | None = None,
    release_key: SlurmRelease | None = None,
) -> list[Workload]:
    """`slurmctld`/`slurmdbd`: the releases they say they run (None: they did not answer);
    `release_key`: `slurmConfig.release`, for images whose tag names no release."""
    live_controller = next((_image(o) for o in live.values() if _daemon(o) == SLURMCTLD), None)
    workloads = []
    for obj in desired:
        daemon = _daemon(obj)
        if daemon is None:
            continue
        ref = kube_ref(obj)
        image, was = _image(obj), _image(live[ref]) if ref in live else None
        said = {SLURMCTLD: slurmctld, SLURMDBD: slurmdbd}.get(daemon)
        if was is None:
            running = None
        elif said is not None:
            running = said
        elif was == live_controller and slurmctld is not None:
            running = slurmctld
        else:
            running = _tag_of(was)
        workloads.append(Workload(
            daemon, str(ref), running, _tag_of(image) or release_key,
            changed=was is not None and image != was,
        ))  # fmt: skip
    return workloads


def _daemon(obj: Obj) -> str | None:
    if obj.get("kind") not in ("Deployment", "StatefulSet"):
        return None
    component = str(((obj.get("metadata") or {}).get("labels") or {}).get(wk.LABEL_COMPONENT))
    return DAEMONS[component][0] if component in DAEMONS else None


def _image(obj: Obj) -> str | None:
    """The image of the workload's Slurm daemon (its first container where none is named so)."""
    component = ((obj.get("metadata") or {}).get("labels") or {}).get(wk.LABEL_COMPONENT)
    name = DAEMONS.get(str(component), ("", ""))[1]
    pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = pod.get("containers") or []
    chosen = next((c for c in containers if c.get("name") == name), None) or next(
        iter(containers), None)  # fmt: skip
    return str(chosen["image"]) if chosen and chosen.get("image") else None


def _tag_of(image: str | None) -> SlurmRelease | None:
    if image is None or ":" not in image.rsplit("/", 1)[-1]:
        return None
    return tag_release(image.rsplit(":", 1)[1])
