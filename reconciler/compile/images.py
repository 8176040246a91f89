"""Which image each rendered container runs: the one rule, for every Pod we render.

Our images are the default (docs/rendered-pods.md#images): one Slurm image for every Slurm
Pod, `<image.registry>/slurm:<image.tag>`, and `<image.registry>/mariadb:10.11` for MySQL.
SUNK's per-component keys (`controller.image`, `login.image`, a node definition's `image`...)
still win where a user sets them. A component that sets `image.repository` without a tag gets
the tag of the image it would otherwise run, so no component runs `:latest` by accident.

The control plane is one Slurm release: slurmrestd, slurmdbd and the login Pod follow the
controller's image unless they set their own (a `controller.image.tag` that moved slurmctld
alone would leave slurmrestd and slurmdbd on another release). Compute Pods follow the
top-level `image`, as their node definitions are written per node type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_REGISTRY = "ghcr.io/sunk-reconciler"
SLURM_TAG = "24.11.5"  # the Slurm release our image is built from
MARIADB_TAG = "10.11"
Obj = dict[str, Any]


@dataclass(frozen=True)
class Image:
    repository: str
    tag: str

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"

    def overlaid(self, image: Obj | None) -> Image:
        """`image` (a values `image:` mapping) over this one."""
        image = image or {}
        return Image(str(image.get("repository") or self.repository),
                     str(image.get("tag") or self.tag))  # fmt: skip


def _top(values: Obj) -> Obj:
    return values.get("image") or {}


def registry(values: Obj) -> str:
    return str(_top(values).get("registry") or DEFAULT_REGISTRY).rstrip("/")


def default_slurm_image(values: Obj) -> Image:
    return Image(f"{registry(values)}/slurm", str(_top(values).get("tag") or SLURM_TAG))


def controller_image(values: Obj) -> str:
    return _controller(values).ref


def _controller(values: Obj) -> Image:
    return default_slurm_image(values).overlaid((values.get("controller") or {}).get("image"))


def control_plane_image(values: Obj, component: str) -> str:
    """slurmrestd (`rest`), slurmdbd (`accounting`) and the login Pod (`login`)."""
    return _controller(values).overlaid((values.get(component) or {}).get("image")).ref


def compute_image(values: Obj, definition: Obj) -> str:
    return default_slurm_image(values).overlaid(definition.get("image")).ref


def mariadb_image(values: Obj) -> str:
    base = Image(f"{registry(values)}/mariadb", MARIADB_TAG)
    return base.overlaid((values.get("mysql") or {}).get("image")).ref
