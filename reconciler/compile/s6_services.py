"""`compute.s6` -> an s6-rc source tree for the slurmd container (pure).

SUNK's slurmd image runs s6-overlay v3, which compiles the s6-rc source definitions under
/etc/s6-overlay/s6-rc.d at container start and brings up the `user` bundle before the
container's command (slurmd). Each script in values becomes one service there:

  s6-rc.d/<name>/type                "oneshot" or "longrun"
  s6-rc.d/<name>/up                  oneshot: one execline command line, the script's path
  s6-rc.d/<name>/run                 longrun: the script itself, executable (s6-supervise
                                     runs it and runs it again whenever it exits)
  s6-rc.d/<name>/dependencies.d/base empty: started after the image's base bundle
  s6-rc.d/<name>/dependencies.d/<o>  longrun: empty, one per oneshot <o> of compute.s6, so it
                                     starts once they are done (the nginx of SUNK's "Slurm
                                     Workload Manager" page runs after the oneshot that
                                     installs it)
  s6-rc.d/user/contents.d/<name>     empty: the service is in the user bundle
  scripts/<name>                     oneshot: the script `up` names, executable

They come from one ConfigMap (`<release>-s6`) with flat keys (a key cannot hold '/'), laid out
by the volume's `items`, and each service is mounted on its own (`subPath`), so the image's
own services in s6-rc.d stay visible beside ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.compile.lines import write_lines, write_script

S6_OVERLAY_DIR = "/etc/s6-overlay"
S6_RC_DIR = f"{S6_OVERLAY_DIR}/s6-rc.d"
S6_SCRIPTS_DIR = f"{S6_OVERLAY_DIR}/scripts"
S6_VOLUME = "s6-services"
BASE_BUNDLE = "base"  # s6-overlay's own bundle: everything the image sets up first
USER_BUNDLE = "user"  # the bundle s6-overlay brings up before the container's command
ONESHOT, LONGRUN = "oneshot", "longrun"
_EXECUTABLE, _FILE = 0o755, 0o644


@dataclass(frozen=True)
class S6Service:
    name: str
    type: str  # ONESHOT or LONGRUN
    script: str


def s6_services(values: dict[str, Any]) -> list[S6Service]:
    """The services `compute.s6` declares (the schema checked names and types), by name."""
    declared = (values.get("compute") or {}).get("s6") or {}
    return [
        S6Service(str(name), str(entry["type"]), str(entry["script"]))
        for name, entry in sorted(declared.items())
        if entry  # null drops a service an earlier values file declared
    ]


def s6_map_name(release: str) -> str:
    return f"{release}-s6"


def _source_files(service: S6Service, oneshots: list[str]) -> list[tuple[str, str, str, int]]:
    """(ConfigMap key, path in the volume, content, mode) of one service; a longrun depends
    on every oneshot in `oneshots`."""
    name, home = service.name, f"s6-rc.d/{service.name}"
    files = [(f"{name}.type", f"{home}/type", write_lines(f"{home}/type", [service.type]), _FILE)]
    script = write_script(f"compute.s6.{name}.script", service.script)
    if service.type == ONESHOT:
        up = write_lines(f"{home}/up", [f"{S6_SCRIPTS_DIR}/{name}"])
        files += [
            (f"{name}.up", f"{home}/up", up, _FILE),
            (f"{name}.script", f"scripts/{name}", script, _EXECUTABLE),
        ]
    else:
        files.append((f"{name}.run", f"{home}/run", script, _EXECUTABLE))
        files += [(f"{name}.after.{oneshot}", f"{home}/dependencies.d/{oneshot}", "", _FILE)
                  for oneshot in oneshots]  # fmt: skip
    files += [
        (f"{name}.dependencies", f"{home}/dependencies.d/{BASE_BUNDLE}", "", _FILE),
        (f"{name}.bundle", f"s6-rc.d/{USER_BUNDLE}/contents.d/{name}", "", _FILE),
    ]
    return files


def _oneshots(services: list[S6Service]) -> list[str]:
    return [s.name for s in services if s.type == ONESHOT]


def s6_config_map_data(services: list[S6Service]) -> dict[str, str]:
    oneshots = _oneshots(services)
    return {key: content for s in services
            for key, _, content, _ in _source_files(s, oneshots)}  # fmt: skip


def s6_volume(release: str, services: list[S6Service]) -> dict[str, Any]:
    items = [
        {"key": key, "path": path, **({"mode": mode} if mode != _FILE else {})}
        for s in services
        for key, path, _, mode in _source_files(s, _oneshots(services))
    ]
    return {
        "name": S6_VOLUME,
        "configMap": {"name": s6_map_name(release), "defaultMode": _FILE, "items": items},
    }


def s6_volume_mounts(services: list[S6Service]) -> list[dict[str, Any]]:
    """One mount per service folder, bundle entry and script: never the whole of s6-rc.d."""
    mounts = []
    for service in services:
        name = service.name
        places = [(f"{S6_RC_DIR}/{name}", f"s6-rc.d/{name}"),
                  (f"{S6_RC_DIR}/{USER_BUNDLE}/contents.d/{name}",
                   f"s6-rc.d/{USER_BUNDLE}/contents.d/{name}")]  # fmt: skip
        if service.type == ONESHOT:
            places.append((f"{S6_SCRIPTS_DIR}/{name}", f"scripts/{name}"))
        mounts += [
            {"name": S6_VOLUME, "mountPath": path, "subPath": sub, "readOnly": True}
            for path, sub in places
        ]
    return mounts
