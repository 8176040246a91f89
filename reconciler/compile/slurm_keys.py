"""slurm.conf keys that a Slurm release renamed, deprecated or removed, as data (pure), and the
plan warnings for a user's text that still writes one: `slurmConfig.extraConfig` lines and the
options of `compute.partitions`' PartitionName lines.

Each entry names the release series that changed the key and, in a comment, the line of
SchedMD's release notes (RELEASE_NOTES.md, CHANGELOG/slurm-<series>.md) or slurm.conf(5) it
comes from. What we render ourselves follows the same table (`partition_option`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from reconciler.errors import Warning_
from reconciler.slurm_release import SlurmRelease

Scope = Literal["slurm.conf", "partition"]
Pair = tuple[str, str]


@dataclass(frozen=True)
class KeyChange:
    key: str
    since: tuple[int, int]  # the release series that changed it
    what: Literal["renamed", "deprecated", "removed"]
    replacement: str = ""  # what to write instead ("" when nothing replaces it)
    scope: Scope = "slurm.conf"
    value: str = ""  # only this word of the key's value changed ("" : the key itself)

    @property
    def series(self) -> str:
        return f"{self.since[0]}.{self.since[1]:02d}"

    def applies(self, release: SlurmRelease) -> bool:
        return release.at_least(*self.since)

    def message(self, release: SlurmRelease, where: str) -> str:
        written = f"{self.key}={self.value}" if self.value else self.key
        text = f"{where} writes {written}, which Slurm {self.series} {self.what}"
        text += f" (this render targets Slurm {release})"
        return text + (f": write {self.replacement} instead" if self.replacement else
                       ": remove it")  # fmt: skip


KEY_CHANGES: tuple[KeyChange, ...] = (
    # 25.05 RELEASE_NOTES.md: Removed support for "FrontEnd" mode of operation.
    KeyChange("FrontendName", (25, 5), "removed"),
    # CHANGELOG/slurm-25.05.md: Deprecate "GetEnvTimeout" from slurm.conf ... (read_config.c
    # of 25.05 on: a defunct option, logged as an error)
    KeyChange("GetEnvTimeout", (25, 5), "removed"),
    # 25.11 RELEASE_NOTES.md: NamespaceType replaces JobContainerType in slurm.conf.
    KeyChange("JobContainerType", (25, 11), "renamed", "NamespaceType"),
    # CHANGELOG/slurm-25.11.md: Remove AccountingStorageUser option from slurm.conf.
    KeyChange("AccountingStorageUser", (25, 11), "removed"),
    # 26.05 RELEASE_NOTES.md: Exclusive=[NO|NODE|USER|TOPO] replaces ExclusiveUser and
    # ExclusiveTopo when defining Partitions.
    KeyChange("ExclusiveTopo", (26, 5), "deprecated", "Exclusive=TOPO", "partition"),
    KeyChange("ExclusiveUser", (26, 5), "deprecated", "Exclusive=USER", "partition"),
    # slurm.conf(5) of 26.05, Exclusive: This replaces the deprecated options
    # OverSubscribe=EXCLUSIVE, ExclusiveUser, and ExclusiveTopo.
    KeyChange("OverSubscribe", (26, 5), "deprecated", "Exclusive=NODE", "partition", "EXCLUSIVE"),
    # 26.05 RELEASE_NOTES.md: Remove SchedulerParameters=enable_job_state_cache.
    KeyChange("SchedulerParameters", (26, 5), "removed", value="enable_job_state_cache"),
)


def changes_for(release: SlurmRelease, scope: Scope) -> list[KeyChange]:
    return [c for c in KEY_CHANGES if c.scope == scope and c.applies(release)]


def exclusive_topo(release: SlurmRelease) -> tuple[str, str]:
    """The partition option for one job per topology segment, as `release` spells it."""
    return ("Exclusive", "TOPO") if release.at_least(26, 5) else ("ExclusiveTopo", "YES")


def changed_settings(pairs: Iterable[Pair], release: SlurmRelease, scope: Scope) -> list[KeyChange]:
    """The entries that (key, value) pairs a user wrote run into on `release`."""
    written = list(pairs)
    found = []
    for change in changes_for(release, scope):
        for key, value in written:
            if key.lower() != change.key.lower():
                continue
            words = {w.strip().lower() for w in value.split(",")}
            if not change.value or change.value.lower() in words:
                found.append(change)
                break
    return found


def written_pairs(text: str | None) -> tuple[list[Pair], list[Pair]]:
    """(settings, partition options) of slurm.conf text, comments skipped: a PartitionName
    line's options are partition options; another object line (NodeName=, FrontendName=...)
    counts by its first word, so a FrontendName line is seen."""
    settings: list[Pair] = []
    options: list[Pair] = []
    for raw in (text or "").splitlines():
        tokens = [t.partition("=") for t in raw.split("#", 1)[0].split()]
        pairs = [(key, value) for key, sep, value in tokens if sep]
        if not pairs:
            continue
        if pairs[0][0].lower() == "partitionname":
            options += pairs[1:]
        elif pairs[0][0].lower().endswith("name"):
            settings.append(pairs[0])
        else:
            settings += pairs
    return settings, options


def release_warnings(values: Mapping[str, Any], release: SlurmRelease, partitions_where: str
                     ) -> list[Warning_]:  # fmt: skip
    """Plan warnings for keys the user wrote that `release` renamed, deprecated or removed:
    in slurmConfig.extraConfig (settings, and options of its PartitionName lines) and in
    compute.partitions."""
    extra = (values.get("slurmConfig") or {}).get("extraConfig")
    settings, options = written_pairs(extra)
    where = "slurmConfig.extraConfig"
    found = [(where, c) for c in changed_settings(settings, release, "slurm.conf")]
    found += [(where, c) for c in changed_settings(options, release, "partition")]
    _, written = written_pairs((values.get("compute") or {}).get("partitions"))
    found += [("compute.partitions", c) for c in changed_settings(written, release, "partition")]
    shown = {"compute.partitions": partitions_where}
    return [Warning_(shown.get(key, key), change.message(release, key)) for key, change in found]
