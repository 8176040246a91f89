"""The Slurm release a render targets, and where it comes from (pure).

In order: the release the live slurmctld runs (plan, apply and the daemon ask slurmrestd), else
`slurmConfig.release` (for offline renders), else the tag of our Slurm image (its tag is the
release it is built from), else the release our image is built from. A live release that
differs from `slurmConfig.release` wins, with a note for the plan: the files must suit the
slurmctld that reads them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.compile.images import SLURM_TAG, default_slurm_image, registry
from reconciler.slurm_release import SlurmRelease, parse_release

RELEASE_KEY = "slurmConfig.release"
# An image tag names a release only when it is one, as our image's tags are ("24.11.5").
_TAG = re.compile(r"\d{2}\.\d{2}(\.\d+)?")
DEFAULT_RELEASE = parse_release(SLURM_TAG)
# The newest release whose changes this code knows (compile/slurm_keys.py): it refuses nothing
# an older one needs, so a compile for node names and shapes alone targets it.
NEWEST_KNOWN = parse_release("26.05.3")


@dataclass(frozen=True)
class TargetRelease:
    """The release a render targets, where it came from (for messages), and what the plan
    should say about it."""

    release: SlurmRelease
    source: str  # "slurmctld", "slurmConfig.release", "image tag" or "default"
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"Slurm {self.release} ({_SOURCES[self.source]})"


_SOURCES = {
    "slurmctld": "the release slurmctld runs",
    RELEASE_KEY: RELEASE_KEY,
    "image tag": "the Slurm image's tag",
    "default": f"our image's release; set {RELEASE_KEY} for another",
}


def values_release(values: Mapping[str, Any]) -> SlurmRelease | None:
    """`slurmConfig.release` (checked where it is written: config/slurm_release.py)."""
    raw = (values.get("slurmConfig") or {}).get("release")
    return parse_release(str(raw)) if raw not in (None, "") else None


def image_release(values: Mapping[str, Any]) -> SlurmRelease | None:
    """The release our Slurm image's tag names, when the controller runs our image."""
    image = (values.get("controller") or {}).get("image") or {}
    if image.get("repository") not in (None, "", f"{registry(values)}/slurm"):
        return None
    return tag_release(str(image.get("tag") or default_slurm_image(values).tag))


def tag_release(tag: str) -> SlurmRelease | None:
    """The release an image tag names ("24.11.5", as our images are tagged), or None."""
    return parse_release(tag) if _TAG.fullmatch(tag) else None


def target_release(values: Mapping[str, Any], live: SlurmRelease | None = None) -> TargetRelease:
    """The release the render targets: `live` (slurmctld's) first, then the values."""
    chosen = values_release(values)
    if live is not None:
        notes: tuple[str, ...] = ()
        if chosen is not None and _differs(chosen, live):
            notes = (
                f"{RELEASE_KEY} is {chosen}, but slurmctld runs Slurm {live}: rendering for "
                f'{live.series}; set {RELEASE_KEY}: "{live}" (or remove it) to match',
            )
        return TargetRelease(live, "slurmctld", notes)
    if chosen is not None:
        return TargetRelease(chosen, RELEASE_KEY)
    tagged = image_release(values)
    if tagged is not None and tagged != DEFAULT_RELEASE:
        return TargetRelease(tagged, "image tag")
    return TargetRelease(DEFAULT_RELEASE, "default")


def _differs(chosen: SlurmRelease, live: SlurmRelease) -> bool:
    """A series ("25.11") agrees with every 25.11.x; "25.11.5" only with itself."""
    return chosen.series != live.series or (chosen.patch != 0 and chosen != live)
