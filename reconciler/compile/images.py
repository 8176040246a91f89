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

from collections.abc import Iterable
from dataclasses import dataclass

from reconciler.compile.nodesets import NodeSet, last_setter
from reconciler.config.keys import default_of
from reconciler.config.layering import plain
from reconciler.config.repo import IMAGE_COMPONENTS, Config
from reconciler.errors import Warning_
from reconciler.objects import Obj, ReadObj

DEFAULT_REGISTRY = default_of("image.registry")
SLURM_TAG = default_of("image.tag")  # the Slurm release our image is built from
MARIADB_TAG = "10.11"


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


def _top(values: ReadObj) -> Obj:
    return values.get("image") or {}


def registry(values: ReadObj) -> str:
    return str(_top(values).get("registry") or DEFAULT_REGISTRY).rstrip("/")


def default_slurm_image(values: ReadObj) -> Image:
    return Image(f"{registry(values)}/slurm", str(_top(values).get("tag") or SLURM_TAG))


def controller_image(values: Obj) -> str:
    return _controller(values).ref


def _controller(values: Obj) -> Image:
    return default_slurm_image(values).overlaid((values.get("controller") or {}).get("image"))


def control_plane_image(values: Obj, component: str) -> str:
    """slurmrestd (`rest`), slurmdbd (`accounting`) and the login Pod (`login`)."""
    return _component(values, component).ref


def _component(values: Obj, component: str) -> Image:
    if component == "mysql":
        return _mariadb(values)
    if component == "controller":
        return _controller(values)
    return _controller(values).overlaid((values.get(component) or {}).get("image"))


def compute_image(values: Obj, definition: Obj) -> str:
    return _compute(values, definition).ref


def _compute(values: Obj, definition: Obj) -> Image:
    return default_slurm_image(values).overlaid(definition.get("image"))


def mariadb_image(values: Obj) -> str:
    return _mariadb(values).ref


def _mariadb(values: Obj) -> Image:
    base = Image(f"{registry(values)}/mariadb", MARIADB_TAG)
    return base.overlaid((values.get("mysql") or {}).get("image"))


# ---- what the plan says of the images (pure) ----------------------------------------------


def image_warnings(config: Config, nodesets: Iterable[NodeSet]) -> list[Warning_]:
    """Every image without a tag (it silently gets the tag of the image it replaces), and a
    control plane on another Slurm build than the compute nodes."""
    nodesets = list(nodesets)
    return [*_untagged_components(config), *_untagged_definitions(config, nodesets),
            *_skew(config, nodesets)]  # fmt: skip


def _where(config: Config, *paths: tuple[str, ...]) -> str:
    found = next((w for p in paths if (w := config.value_locations.get(p))), None)
    return f"{found.file}:{found.line}" if found else "values"


def _base_tag(config: Config, image: Image) -> str | None:
    """The tag our image of `image`'s repository has (None: not one of ours): an untagged
    repository of ours runs the tag it is built with, as intended."""
    ours = (default_slurm_image(config.values), _mariadb({"image": config.values.get("image")}))
    return next((o.tag for o in ours if o.repository == image.repository), None)


def _untagged_components(config: Config) -> list[Warning_]:
    warnings = []
    for component in IMAGE_COMPONENTS:
        image = (config.values.get(component) or {}).get("image") or {}
        runs = _component(config.values, component)
        if not image.get("repository") or image.get("tag") or runs.tag == _base_tag(config, runs):
            continue
        key = f"{component}.image"
        warnings.append(Warning_(
            _where(config, (component, "image", "repository")),
            f"{key}.repository {image['repository']!r} has no tag: it runs {runs.ref}, the tag of "
            f"the image it replaces, which that repository may not have; set {key}.tag",
        ))  # fmt: skip
    return warnings


def _untagged_definitions(config: Config, nodesets: list[NodeSet]) -> list[Warning_]:
    """One warning per layer that writes a repository without a tag, naming every definition
    (enabled or not: enabling one runs it) that keeps it untagged."""
    by_setter: dict[tuple[str, str, str], list[str]] = {}
    for nodeset in nodesets:
        image = plain(nodeset.definition.get("image")) or {}
        setter = last_setter(config, nodeset, ("image", "repository"))
        runs = _compute(config.values, {"image": image})
        if setter is None or image.get("tag") or runs.tag == _base_tag(config, runs):
            continue
        by_setter.setdefault((setter.layer, setter.where, runs.ref), []).append(nodeset.name)
    warnings = []
    for (layer, where, ref), names in sorted(by_setter.items()):
        repository = ref.rsplit(":", 1)[0]
        warnings.append(Warning_(where, (
            f"image.repository {repository!r} of layer {layer!r} has no tag: "
            f"{_run(sorted(names))} it as {ref}, our image's tag, which that repository may "
            "not have; set image.tag beside it"
        )))  # fmt: skip
    return warnings


def _skew(config: Config, nodesets: list[NodeSet]) -> list[Warning_]:
    """The control plane and the compute nodes on two images, one of them ours: two Slurm
    builds, whose releases may differ (a slurmd newer than slurmctld is refused by it). Two
    images of a user's own are not judged: a site builds them together."""
    values = config.values
    ours, controller = default_slurm_image(values), _controller(values)
    running: dict[Image, list[NodeSet]] = {}
    for nodeset in (n for n in nodesets if n.enabled):
        running.setdefault(_compute(values, plain(nodeset.definition)), []).append(nodeset)
    warnings = []
    for image, users in sorted(running.items(), key=lambda item: item[0].ref):
        if image == controller or ours not in (image, controller):
            continue
        names = [n.name for n in users]
        if controller != ours:
            where = _where(config, ("controller", "image", "repository"),
                           ("controller", "image", "tag"))  # fmt: skip
            said = (f"controller.image runs {controller.ref}, but {_run(names)} our image "
                    f"{ours.ref}")  # fmt: skip
            fix = "give those definitions the controller's build, or remove controller.image"
        else:
            setter = last_setter(config, users[0], ("image", "repository")) or last_setter(
                config, users[0], ("image", "tag")
            )
            where = setter.where if setter else str(users[0].where)
            said = (f"{_run(names)} {image.ref}, but the control plane runs our image "
                    f"{ours.ref}")  # fmt: skip
            fix = "set controller.image to the same build, or remove those definitions' image"
        warnings.append(Warning_(where, (
            f"{said}: two Slurm builds, whose releases may differ (slurmctld refuses a slurmd "
            f"newer than itself); {fix}"
        )))  # fmt: skip
    return warnings


def _run(names: list[str]) -> str:
    """ "node definition 'a' runs", "node definitions 'a', 'b' run"."""
    listed = ", ".join(repr(n) for n in names)
    return f"node definition {listed} runs" if len(names) == 1 else (
        f"node definitions {listed} run")  # fmt: skip
