"""Values that reach Slurm's config files as text, checked where they are written.

slurm.conf (and slurmdbd.conf, gres.conf) are read line by line, a line as KEY=VALUE tokens
split at whitespace, `#` to the end of the line a comment. So a value with a line break, a
space or a tab in it sets more keys than its own: `taskPlugin: "task/none\nSlurmUser=nobody"`
made slurmctld run as nobody. A value we render after `KEY=` must be one word; the two keys
that are slurm.conf text by design (extraConfig, partitions) may hold tabs and line breaks but
no other control character. Patterns are matched whole (`fullmatch`): `$` also matches before a
final newline.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler.config.control_chars import character_name, text_control_character
from reconciler.config.value_types import Table
from reconciler.config.yamlfile import KeyPath, YamlFile, format_path, lookup
from reconciler.errors import ConfigTypeError

# Printable ASCII but space, `#` (a comment), quotes and `\` (Slurm's quoting and escapes).
WORD = re.compile(r"[\x21\x24-\x26\x28-\x5b\x5d-\x7e]+")

_WORD_HINT = (
    "slurm.conf ends a value at a space, a line break or '#': what follows would set other "
    "keys. Set further slurm.conf keys in slurmConfig.extraConfig"
)

_TEXT_HINT = "slurm.conf text may hold tabs and line breaks, no other control characters"


def check_slurm_values(doc: YamlFile, table: Table) -> None:
    """A values file: every value we render into Slurm's config files, as its Key says: a
    "word" after `KEY=` in slurm.conf or slurmdbd.conf, or "text", lines of their own
    (extraConfig; cgroupConfig and gresConfig for cgroup.conf and gres.conf; partitions)."""
    for dotted, key in table.items():
        path = tuple(dotted.split("."))
        value, found = lookup(doc.data, path)
        if not found or not isinstance(value, str):
            continue
        if key.slurm == "word":
            _check_word(doc, path, value)
        elif key.slurm == "text":
            check_text(doc, path, value)
    nodes, _ = lookup(doc.data, ("compute", "nodes"))
    for name, definition in (nodes or {}).items():
        check_node_words(doc, ("compute", "nodes", name), definition)


def check_layer_words(doc: YamlFile) -> None:
    """A compute-defs file: each layer is a node definition."""
    for name, definition in doc.data.items():
        check_node_words(doc, (name,), definition)


def check_node_words(doc: YamlFile, path: KeyPath, definition: Any) -> None:
    """Features and gresGpu go into NodeName= lines (after types were checked)."""
    if not isinstance(definition, dict):
        return
    for index, feature in enumerate(definition.get("features") or []):
        _check_word(doc, (*path, "features", index), str(feature))
    if isinstance(definition.get("gresGpu"), str):
        _check_word(doc, (*path, "gresGpu"), definition["gresGpu"])


def _check_word(doc: YamlFile, path: KeyPath, value: str) -> None:
    if not WORD.fullmatch(value):
        raise ConfigTypeError(
            f"{format_path(path)} must be one word of printable ASCII (no spaces, line "
            f"breaks, control characters, '#', quotes or backslashes), got {_shown(value)}",
            where=doc.location(path),
            hint=_WORD_HINT,
        )


def check_text(doc: YamlFile, path: KeyPath, text: str, hint: str = _TEXT_HINT) -> None:
    """Multi-line text (extraConfig, a script): line breaks and tabs, no other control
    character."""
    found = text_control_character(text)
    if found is not None:
        number, bad = found
        raise ConfigTypeError(
            f"{format_path(path)} line {number} holds {character_name(bad)}",
            where=doc.location(path),
            hint=hint,
        )


def _shown(value: str) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
