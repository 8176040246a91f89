"""The key reference of docs/values.md, made from the keys' own declarations (pure).

Each `Key` says its type, default, allowed values, what it becomes and whether it reaches a Slurm
config file; this module writes them as Markdown tables, one per section, so the docs cannot
drift from what the reconciler checks and renders. `tests/unit/test_values_doc.py` fails when
docs/values.md's copy differs. Regenerate it in place with

    python -m reconciler.config.values_doc docs/values.md
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reconciler.config.keys import ALL_VALUES, NESTED
from reconciler.config.value_types import NO_DEFAULT, Key, Table, range_text

BEGIN = "<!-- BEGIN key reference: made by python -m reconciler.config.values_doc -->"
END = "<!-- END key reference -->"
_HEAD = "| Key | Type | Default | Allowed | What it becomes |\n|---|---|---|---|---|"
_SLURM = {"word": "; one Slurm word", "text": "; Slurm config text"}


def reference() -> str:
    """The Markdown between BEGIN and END: one table per top-level key, then nested tables."""
    parts = [BEGIN, ""]
    for section in sorted({dotted.split(".")[0] for dotted in ALL_VALUES}, key=str.lower):
        keys = {d: k for d, k in ALL_VALUES.items() if d.split(".")[0] == section}
        parts += [f"### `{section}`", "", _HEAD, *_rows(keys), ""]
    for nested in NESTED:
        parts += [f"### {nested.title}: `{nested.written}`", "", _HEAD, *_rows(nested.table), ""]
    return "\n".join([*parts, END])


def _rows(table: Table) -> Iterator[str]:
    for dotted in sorted(table):
        key = table[dotted]
        doc = (key.doc + _SLURM.get(key.slurm or "", "")).replace("|", "\\|")
        yield f"| `{dotted}` | {key.type} | {_default(key)} | {_allowed(key)} | {doc} |"


def _default(key: Key) -> str:
    return "" if key.default is NO_DEFAULT else f"`{_shown(key.default)}`"


def _allowed(key: Key) -> str:
    if key.choices:
        return ", ".join(f"`{_shown(choice)}`" for choice in key.choices)
    if key.minimum is not None or key.maximum is not None:
        return range_text(key)
    return ""


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return "{}" if value == {} else str(value)


def with_reference(page: str) -> str:
    """`page` with its key reference replaced by the current one."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the page has no {BEGIN!r} ... {END!r} block")
    return page[:start] + reference() + page[end + len(END) :]


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/values.md")
    target.write_text(with_reference(target.read_text()))
