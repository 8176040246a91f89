"""The one rule for text we write into a line-oriented file: which characters end a line, or
hide one, for some reader of it.

Slurm's parsers, sssd's ini reader, spank's fgets and sudo's lexer split lines at a line feed;
Python's `splitlines` (and so our own readers) also at CR, VT, FF, FS-RS, NEL (U+0085) and the
Unicode line and paragraph separators (U+2028, U+2029); a C parser stops a string at NUL; a
terminal, a `cat` or a `git diff` lets CR, ESC and backspace overwrite what was shown, so the
file reads otherwise than it runs. So a value that is one line holds none of the C0 and C1
controls, DEL, or U+2028/U+2029; text that is many lines by nature (extraConfig, a script)
holds line feeds and tabs, and none of the others.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls (NEL is U+0085), and the two Unicode line separators.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMES = {"\n": "a line feed", "\r": "a carriage return", "\t": "a tab", "\x00": "a NUL",
          "\x1b": "an escape", "\x85": "a next line (NEL)", "\u2028": "a line separator",
          "\u2029": "a paragraph separator"}  # fmt: skip


def control_character(text: str, allowed: str = "") -> str | None:
    """The first control character (or line separator) of `text` not in `allowed`."""
    for found in _CONTROL.finditer(text):
        if found.group() not in allowed:
            return found.group()
    return None


def text_control_character(text: str) -> tuple[int, str] | None:
    """(1-based line, character) of the first control character of multi-line text that is
    neither the line feed that ends a line nor a tab."""
    for number, line in enumerate(text.split("\n"), start=1):
        bad = control_character(line, allowed="\t")
        if bad is not None:
            return number, bad
    return None


def character_name(character: str) -> str:
    """`a line feed (U+000A)`: what the user sees of a refused character (never the value)."""
    return f"{_NAMES.get(character, 'a control character')} (U+{ord(character):04X})"
