"""`compute.pyxis` -> pyxis's plugstack.conf, enroot's enroot.conf, and what the slurmd
container needs to run them (pure).

SUNK's "Slurm Workload Manager" page, "Running Slurm Jobs in Containers": pyxis is a SPANK plugin
that srun, sbatch and slurmd load from plugstack.conf, which Slurm reads beside slurm.conf (so it
goes in the `<release>-slurm-conf` ConfigMap); pyxis runs enroot, which reads
/etc/enroot/enroot.conf. Enabling pyxis also adds SYS_NICE and SYS_ADMIN to the slurmd container,
beside what the values add, and mounts a Secret holding enroot's registry `.credentials` when values
name one: only its name is ever rendered.

No seccomp profile is rendered unless `compute.pyxis.seccompProfile` names one the Nodes have
(a `Localhost` profile nothing ships makes every slurmd Pod fail with CreateContainerError), and
then on the slurmd container only: munge and sssd run beside it without it. Our image has no
pyxis and no enroot (docs/images.md): `pyxis_warnings` says so when plugstack.conf makes the
plugin `required` for nodes on it.
"""

from __future__ import annotations

from typing import Any

from reconciler.compile.images import compute_image, default_slurm_image
from reconciler.compile.lines import one_line, write_lines
from reconciler.config.keys import default_of
from reconciler.errors import Warning_

PLUGSTACK_CONF = "plugstack.conf"
# pyxis's `make install` puts the plugin here; a deb build puts it under /usr/lib.
DEFAULT_PLUGIN_PATH = default_of("compute.pyxis.pluginPath")
PYXIS_RUNTIME_PATH = "/run/pyxis"  # pyxis's own default: a folder on a tmpfs
ENROOT_CONF_DIR = "/etc/enroot"
ENROOT_CONF = "enroot.conf"
ENROOT_RUNTIME_DIR = "/run/enroot"  # enroot's working folder: a tmpfs, as enroot advises
ENROOT_CACHE_DIR = "/var/lib/enroot/cache"  # image layers, shared by a group
ENROOT_DATA_DIR = "/var/lib/enroot/data"  # the filesystems of running containers
ENROOT_CONFIG_DIR = "/var/lib/enroot/config"  # $ENROOT_CONFIG_PATH: .credentials
CREDENTIALS_KEY = ".credentials"  # the Secret's key, and the file enroot reads
PYXIS_CAPABILITIES = ("SYS_NICE", "SYS_ADMIN")  # SUNK's "Slurm Workload Manager", "Enabling Pyxis"
# spank reads a plugstack.conf line with fgets into 4,096 bytes: its text and line feed fit.
PLUGSTACK_LINE_BYTES = 4094


def pyxis_values(values: dict[str, Any]) -> dict[str, Any]:
    return (values.get("compute") or {}).get("pyxis") or {}


def pyxis_enabled(values: dict[str, Any]) -> bool:
    return bool(pyxis_values(values).get("enabled"))


def pyxis_warnings(values: dict[str, Any],
                   definitions: list[tuple[str, dict[str, Any]]]) -> list[Warning_]:  # fmt: skip
    """A `required` pyxis line on nodes that run our image, which has no pyxis or enroot:
    every srun and sbatch on them fails. `definitions`: the enabled (name, definition)."""
    required = pyxis_values(values).get("required", default_of("compute.pyxis.required"))
    if not pyxis_enabled(values) or not required:
        return []
    ours = default_slurm_image(values).repository
    by_image: dict[str, list[str]] = {}
    for name, definition in definitions:
        image = compute_image(values, definition)
        if image.rpartition(":")[0] == ours:
            by_image.setdefault(image, []).append(name)
    return [
        Warning_("compute.pyxis.required", f"plugstack.conf loads pyxis as required, but node "
                 f"definition(s) {', '.join(sorted(names))} run {image}, our image, which has "
                 "no pyxis or enroot: every srun and sbatch there fails to load it. Give those "
                 "definitions an image with pyxis and enroot (`image`), or set "
                 "compute.pyxis.required: false")
        for image, names in sorted(by_image.items())
    ]  # fmt: skip


def enroot_map_name(release: str) -> str:
    return f"{release}-enroot"


def plugstack_files(values: dict[str, Any]) -> dict[str, str]:
    """What pyxis adds to the slurm-conf ConfigMap (nothing when it is not enabled)."""
    return {PLUGSTACK_CONF: render_plugstack_conf(values)} if pyxis_enabled(values) else {}


def render_plugstack_conf(values: dict[str, Any]) -> str:
    """One pyxis line (spank(8): `required|optional plugin [args...]`) with pyxis's arguments
    spelled out at the values we choose, so the file says what runs."""
    pyxis = pyxis_values(values)
    kind = "required" if pyxis.get("required", default_of("compute.pyxis.required")) else "optional"
    plugin = one_line(
        PLUGSTACK_CONF, "compute.pyxis.pluginPath", pyxis.get("pluginPath") or DEFAULT_PLUGIN_PATH
    )
    args = [
        f"runtime_path={PYXIS_RUNTIME_PATH}",
        "execute_entrypoint=0",  # run the job's command, not the image's ENTRYPOINT first
        "container_scope=global",  # a named container outlives the job that made it
        "sbatch_support=1",  # #SBATCH --container-image runs the batch script in it
    ]
    lines = ["# pyxis (compute.pyxis), loaded by srun, sbatch and slurmd",
             " ".join([kind, plugin, *args])]  # fmt: skip
    return write_lines(PLUGSTACK_CONF, lines, max_length=PLUGSTACK_LINE_BYTES)


def render_enroot_conf(values: dict[str, Any]) -> str:
    """enroot.conf: `NAME value` lines, which enroot reads in bash (so $(id -u) expands)."""
    mount_home = "yes" if pyxis_values(values).get("mountHome") else "no"
    settings = [
        ("ENROOT_RUNTIME_PATH", f"{ENROOT_RUNTIME_DIR}/user-$(id -u)"),
        ("ENROOT_CACHE_PATH", f"{ENROOT_CACHE_DIR}/group-$(id -g)"),
        ("ENROOT_DATA_PATH", f"{ENROOT_DATA_DIR}/user-$(id -u)"),
        ("ENROOT_CONFIG_PATH", ENROOT_CONFIG_DIR),
        ("ENROOT_MOUNT_HOME", mount_home),  # compute.pyxis.mountHome
    ]
    width = max(len(name) for name, _ in settings) + 1
    lines = [f"{name:<{width}}{value}" for name, value in settings]
    header = "# enroot (compute.pyxis); every variable: enroot's doc/configuration.md"
    return write_lines(ENROOT_CONF, [header, *lines])


def with_pyxis(spec: dict[str, Any], release: str, values: dict[str, Any]) -> dict[str, Any]:
    """The slurmd Pod spec (slurmd first) with what pyxis and enroot need, when enabled."""
    if not pyxis_enabled(values):
        return spec
    slurmd, *others = spec["containers"]
    mounts = [
        {"name": "enroot-conf", "mountPath": f"{ENROOT_CONF_DIR}/{ENROOT_CONF}",
         "subPath": ENROOT_CONF, "readOnly": True},
        {"name": "pyxis-runtime", "mountPath": PYXIS_RUNTIME_PATH},
        {"name": "enroot-runtime", "mountPath": ENROOT_RUNTIME_DIR},
        {"name": "enroot-cache", "mountPath": ENROOT_CACHE_DIR},
        {"name": "enroot-data", "mountPath": ENROOT_DATA_DIR},
    ]  # fmt: skip
    volumes: list[dict[str, Any]] = [
        {"name": "enroot-conf", "configMap": {"name": enroot_map_name(release)}},
        {"name": "pyxis-runtime", "emptyDir": {"medium": "Memory"}},
        {"name": "enroot-runtime", "emptyDir": {"medium": "Memory"}},
        {"name": "enroot-cache", "emptyDir": {}},
        {"name": "enroot-data", "emptyDir": {}},
    ]
    if secret := pyxis_values(values).get("credentialsSecret"):
        mounts.append({"name": "enroot-credentials", "readOnly": True,
                       "mountPath": f"{ENROOT_CONFIG_DIR}/{CREDENTIALS_KEY}",
                       "subPath": CREDENTIALS_KEY})  # fmt: skip
        # enroot reads it as the job's user: readable by all on the node, as any shared
        # registry login is.
        volumes.append({"name": "enroot-credentials", "secret": {
            "secretName": secret, "defaultMode": 0o444,
            "items": [{"key": CREDENTIALS_KEY, "path": CREDENTIALS_KEY}]}})  # fmt: skip
    slurmd = {
        **slurmd,
        "volumeMounts": [*(slurmd.get("volumeMounts") or []), *mounts],
        "securityContext": _with_seccomp(
            _with_capabilities(slurmd.get("securityContext") or {}), values
        ),
    }
    return {**spec, "containers": [slurmd, *others],
            "volumes": [*(spec.get("volumes") or []), *volumes]}  # fmt: skip


def _with_seccomp(security: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """`compute.pyxis.seccompProfile` (a path under the kubelet's seccomp folder, which the
    Nodes must have) as the slurmd container's Localhost profile; a profile the container's
    own securityContext sets wins."""
    profile = pyxis_values(values).get("seccompProfile")
    if not profile or "seccompProfile" in security:
        return security
    return {**security, "seccompProfile": {"type": "Localhost", "localhostProfile": profile}}


def _with_capabilities(security: dict[str, Any]) -> dict[str, Any]:
    """The values' capabilities first, then pyxis's that they lack (a union: enabling pyxis
    always grants them; `drop` stays as written)."""
    capabilities = dict(security.get("capabilities") or {})
    added = list(capabilities.get("add") or [])
    added += [c for c in PYXIS_CAPABILITIES if c not in added]
    return {**security, "capabilities": {**capabilities, "add": added}}
