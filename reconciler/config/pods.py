"""Our values keys for the Pods we render beyond those of SUNK's "Slurm Workload Manager" page
(ours): which registry and tag our images come from, the sidecars' resources, and the cluster's DNS
domain. Checked in the file that writes them, so a wrong value names its file, line and key.

    image: {registry: registry.example.com/hpc, tag: 24.11.5}
    sidecars: {munge: {resources: {...}}, sssd: {...}, reconfigure: {...}}
    clusterDomain: cluster.local
"""

from __future__ import annotations

import re

from reconciler.config.value_types import Key, Table
from reconciler.config.yamlfile import KeyPath, YamlFile, format_path, lookup
from reconciler.errors import ConfigTypeError

SIDECARS = ("munge", "sssd", "reconfigure")
POD_VALUES: Table = {
    "image": Key("mapping", "our images"),
    "image.registry": Key(
        "string", "<registry>/slurm:<tag> for every Slurm Pod", "ghcr.io/sunk-reconciler"
    ),
    "image.tag": Key("string", "our Slurm image's tag", "24.11.5"),
    "sidecars": Key("mapping", "our sidecars"),
    **{f"sidecars.{name}": Key("mapping", f"the {name} sidecar") for name in SIDECARS},
    **{
        f"sidecars.{name}.resources": Key("mapping", f"the {name} sidecar's resources")
        for name in SIDECARS
    },
    "clusterDomain": Key("string", "the cluster's DNS domain", "cluster.local"),
}
# The grammar of an image reference's parts (distribution/reference): a registry host with an
# optional port and path, and a tag.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
REGISTRY = re.compile(rf"{_HOST}(?::[0-9]+)?(?:/{_COMPONENT})*")
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
DOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*")
_CHECKS: tuple[tuple[KeyPath, re.Pattern[str], str], ...] = (
    (("image", "registry"), REGISTRY,
     "a registry host and optional path, e.g. ghcr.io/sunk-reconciler or "
     "registry.example.com:5000/hpc (no scheme, no trailing slash, no tag)"),
    (("image", "tag"), TAG, "letters, digits, `_ . -`, at most 128, e.g. 24.11.5"),
    (("clusterDomain",), DOMAIN, "the cluster's DNS domain, lowercase, e.g. cluster.local"),
)  # fmt: skip


def check_pod_values(doc: YamlFile) -> None:
    """Values beyond their types (checked from POD_VALUES before this runs)."""
    for path, pattern, hint in _CHECKS:
        value, found = lookup(doc.data, path)
        if found and isinstance(value, str) and not pattern.fullmatch(value):
            raise ConfigTypeError(
                f"{format_path(path)} {value!r} is not valid", where=doc.location(path), hint=hint
            )
