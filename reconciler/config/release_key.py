"""`slurmConfig.release` (ours): the Slurm release an offline render targets, checked in the
file that writes it. The live slurmctld's release wins where plan, apply or the daemon reach
it (compile/target_release.py)."""

from __future__ import annotations

from reconciler.config.value_types import Key, Table
from reconciler.config.yamlfile import YamlFile, lookup
from reconciler.errors import ConfigTypeError
from reconciler.slurm_release import ReleaseError, parse_release

RELEASE_VALUES: Table = {
    "slurmConfig.release": Key(
        "string",
        "the Slurm release the render targets when no "
        "slurmctld answers (default: our image's, 24.11.5)",
    )
}
_PATH = ("slurmConfig", "release")


def check_release_key(doc: YamlFile) -> None:
    value, found = lookup(doc.data, list(_PATH))
    if not found or value is None:
        return
    try:
        parse_release(str(value))
    except ReleaseError as error:
        raise ConfigTypeError(
            f"slurmConfig.release: {error}",
            where=doc.location(_PATH),
            hint='the Slurm release slurmctld runs, quoted: release: "25.11.7" (or "26.05")',
        ) from None
