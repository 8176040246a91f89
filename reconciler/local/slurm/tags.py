"""Which Slurm install each Pod of ours runs on the local stack, by its image's tag.

The stack runs one install (slurm_install.py) whatever the rendered images say. To try a live
upgrade by hand, $SUNK_RECONCILER_SLURM_TAGS maps image tags to other installs, each by the
prefix it was built into:

    SUNK_RECONCILER_SLURM_TAGS="25.11.7=/opt/slurm-hand/25.11.7,26.05.3=/opt/slurm-hand/26.05.3"

A Slurm daemon Pod (slurmdbd, slurmctld, slurmd, slurmrestd, login) whose main container's
image has a mapped tag runs that prefix's daemons, commands and libraries; every other Pod
runs the stack's install, as before. Pure: Pods and the map in, a prefix or a note out
(pod_runtime.py starts the processes, slurm_install.py reads each prefix's release).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from reconciler import wellknown as wk
from reconciler.errors import LocalStackError
from reconciler.slurm_release import SlurmRelease, release_in

TAGS_ENV = "SUNK_RECONCILER_SLURM_TAGS"
# The Pods (by app label) whose main container is a Slurm daemon or Slurm's client commands.
SLURM_APPS = frozenset({"slurmdbd", "slurmctld", "slurmd", "slurmrestd", "login"})
T = TypeVar("T")
_EXAMPLE = "25.11.7=/opt/slurm-hand/25.11.7,26.05.3=/opt/slurm-hand/26.05.3"


def parse_tags(text: str) -> dict[str, Path]:
    """`TAG=PREFIX[,TAG=PREFIX...]` -> {tag: prefix}; empty text maps nothing."""
    tags: dict[str, Path] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        tag, sep, prefix = (part.strip() for part in entry.partition("="))
        problem = (
            "is not TAG=PREFIX" if not (sep and tag and prefix)
            else "maps a tag with ':' or '@' (give the tag alone)" if ":" in tag or "@" in tag
            else "names a relative prefix" if not prefix.startswith("/")
            else "maps a tag twice" if tag in tags and tags[tag] != Path(prefix)
            else ""
        )  # fmt: skip
        if problem:
            raise LocalStackError(f"${TAGS_ENV}: {entry!r} {problem}",
                                  hint=f"write it as {TAGS_ENV}={_EXAMPLE!r}")  # fmt: skip
        tags[tag] = Path(prefix)
    return tags


def image_tag(image: str) -> str | None:
    """The tag of an image reference ("ghcr.io/x/slurm:25.11.7" -> "25.11.7"); None where it
    has none (a registry's port is not a tag; a digest after the tag is dropped)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else None


def main_image(pod: Mapping[str, Any]) -> str:
    """The image of the Pod's first container, the one its daemon runs in (the rest are
    sidecars: munge, sssd, reconfigure)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    return str(containers[0].get("image") or "") if containers else ""


def _app(pod: Mapping[str, Any]) -> str:
    return ((pod.get("metadata") or {}).get("labels") or {}).get(wk.LABEL_NAME, "")


def pod_tag(pod: Mapping[str, Any]) -> str | None:
    """The image tag of a Slurm daemon Pod's main container; None for any other Pod."""
    return image_tag(main_image(pod)) if _app(pod) in SLURM_APPS else None


def mapped_install(pod: Mapping[str, Any], tags: Mapping[str, T]) -> T | None:
    """What the Pod's tag maps to (a prefix, an install): what it runs; None: the stack's."""
    tag = pod_tag(pod)
    return tags.get(tag) if tag is not None else None


def controller_pod(pods: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The slurmctld Pod that drives the cluster: of those not being deleted, the newest (a
    rollout's new Pod has started, or is about to start, the release clients must speak)."""
    live = [
        p for p in pods
        if _app(p) == "slurmctld" and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]  # fmt: skip
    return max(live, key=lambda p: str(p["metadata"].get("creationTimestamp") or ""), default=None)


def unmapped_note(pod: Mapping[str, Any], tags: Collection[str], stack: str) -> str | None:
    """What to tell the user who maps tags, of a Slurm Pod whose unmapped tag names a release
    other than the stack's `stack` ("24.11.5"): it runs the stack's install anyway. None
    otherwise: without a map every Pod runs the stack's install (a prefix stack's Pods all
    name our image's 24.11.5), as the user asked."""
    tag = pod_tag(pod)
    if not tags or tag is None or tag in tags:
        return None
    named = release_in(tag)
    if named is None or _same(named, release_in(stack)):
        return None
    mapped = ", ".join(sorted(tags)) or "none"
    return (f"image tag {tag} is not in ${TAGS_ENV} (mapped: {mapped}): it runs the stack's "
            f"Slurm {stack}")  # fmt: skip


def tag_mismatch(tag: str, prefix: Path, version: str) -> str | None:
    """Why mapping `tag` to the install at `prefix` (of release `version`) is wrong: the tag
    names another release. None where it names this one or none ("latest")."""
    named = release_in(tag)
    if named is None or _same(named, release_in(version)):
        return None
    return f"${TAGS_ENV} maps tag {tag} to {prefix}, which holds Slurm {version}"


def _same(tag: SlurmRelease, install: SlurmRelease | None) -> bool:
    """A tag without a patch ("25.11") names every patch of its series."""
    if install is None:
        return False
    return tag == install if tag.patch else tag.series == install.series
