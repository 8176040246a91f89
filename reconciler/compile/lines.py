"""The one writer of every line-oriented file we render: slurm.conf, slurmdbd.conf, gres.conf,
topology.conf, plugstack.conf, enroot.conf, sssd.conf and the authtok snippet, sudoers, the
sshd and nsswitch snippets, and the s6 and prolog/epilog scripts.

Values are checked where the repo writes them, naming the file, line and key
(config/slurm_words.py, config/rendered_values.py). This is the last guard, whatever a value's
source (the site profile, a future key, a check forgotten): a line that holds a control
character other than a tab, or a script that holds one other than a line feed or a tab, is
refused with a LineInjectionError naming the file and the key or line, never the text (a line
of the authtok snippet is a password). The rule is control_chars.py's, shared with the config
checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from reconciler.config.control_chars import (
    character_name,
    control_character,
    text_control_character,
)
from reconciler.errors import LineInjectionError

_SETTING = re.compile(r"([A-Za-z][A-Za-z0-9]*)=(\S.*)")


def apply_setting_lines(
    settings: dict[str, str], text: str | None, object_keys: Iterable[str] = ()
) -> list[str]:
    """Free text a user adds to a `Key=Value` file (slurm.conf's extraConfig, cgroup.conf's
    cgroupConfig): a one-word `Key=Value` line replaces our setting of the same key in place
    (keys compared as Slurm does, ignoring case), in `settings`; the other lines, and those
    whose key is one of `object_keys` (lower case), are returned to be written as they are."""
    kept: list[str] = []
    lower = {k.lower(): k for k in settings}
    objects = set(object_keys)
    for raw in (text or "").splitlines():
        line = raw.strip()
        match = _SETTING.fullmatch(line)
        if match and match.group(1).lower() not in objects and " " not in match.group(2):
            settings[lower.get(match.group(1).lower(), match.group(1))] = match.group(2)
        elif line:
            kept.append(line)
    return kept


def one_line(file: str, key: str, value: str, *, secret: bool = False) -> str:
    """`value`, the value of `key` in `file`, if it holds no control character at all (a tab
    too would split a word in Slurm's or spank's reading)."""
    bad = control_character(value)
    if bad is not None:
        shown = "a control character" if secret else character_name(bad)
        raise LineInjectionError(
            f"{file}: {key} holds {shown}, which would break its line",
            hint="the value of this key is one line; remove the character from the config repo",
        )
    return value


def write_lines(file: str, lines: Iterable[str], *, max_length: int | None = None) -> str:
    """`file`'s text: each line ended by a line feed. `max_length`: the longest line its reader
    takes whole (spank's fgets buffer), past which it would read the rest as another line."""
    text = []
    for number, line in enumerate(lines, start=1):
        bad = control_character(line, allowed="\t")
        if bad is not None:
            raise LineInjectionError(
                f"{file} line {number} holds {character_name(bad)}: a value would add a line",
                hint="a value from the config repo or the site profile holds it; remove it",
            )
        if max_length is not None and len(line.encode()) > max_length:
            raise LineInjectionError(
                f"{file} line {number} is longer than the {max_length} bytes its reader takes "
                "as one line",
                hint="shorten the value written on it",
            )
        text.append(line + "\n")
    return "".join(text)


def write_script(key: str, script: str) -> str:
    """A user's script, as written: line feeds and tabs, no other control character (a CR
    breaks the #! line and, with ESC or a backspace, shows a terminal other text than runs)."""
    found = text_control_character(script)
    if found is not None:
        number, bad = found
        raise LineInjectionError(
            f"{key} line {number} holds {character_name(bad)}",
            hint="a script may hold line breaks (LF) and tabs, no other control character",
        )
    return script
