"""docs/values.md against the keys' declarations: its key reference is the one they make, and
every key its tables name is one the reconciler reads (or reports)."""

from __future__ import annotations

import re
from pathlib import Path

from reconciler.config.control_plane import NOT_ACTED_ON, PASSED_WHOLE
from reconciler.config.keys import ALL_VALUES
from reconciler.config.values_doc import BEGIN, END, reference, with_reference

PAGE = Path(__file__).resolve().parents[2] / "docs" / "values.md"
SECTIONS = {dotted.split(".")[0] for dotted in ALL_VALUES} | set(NOT_ACTED_ON)


def test_the_key_reference_is_the_one_the_declarations_make() -> None:
    page = PAGE.read_text()
    assert page == with_reference(page), (
        "docs/values.md is stale: python -m reconciler.config.values_doc docs/values.md"
    )


def test_the_reference_lists_every_key_once() -> None:
    sections = reference().split("\n### A")[0]
    rows = re.findall(r"^\| `([^`]+)` \|", sections, flags=re.M)
    assert sorted(rows) == sorted(ALL_VALUES)


def _named_keys(page: str) -> set[str]:
    """The dotted keys the first cell of each row of the prose tables names."""
    prose = page[: page.index(BEGIN)]
    cells = re.findall(r"^\| (.+?) \|", prose, flags=re.M)
    names = {name for cell in cells for name in re.findall(r"`([A-Za-z][\w.]*)", cell)}
    return {name.rstrip(".") for name in names if name.split(".")[0] in SECTIONS}


def _read(name: str) -> bool:
    """A key, or inside one the reconciler passes on whole, or one it reports."""
    parts = name.split(".")
    prefixes = [".".join(parts[:n]) for n in range(1, len(parts) + 1)]
    whole = [p for p in prefixes[:-1] if p in ALL_VALUES and p.endswith(PASSED_WHOLE)]
    return name in ALL_VALUES or bool(whole) or any(p in NOT_ACTED_ON for p in prefixes)


def test_every_key_the_prose_names_is_read_or_reported() -> None:
    named = _named_keys(PAGE.read_text())
    assert len(named) > 80
    assert sorted(name for name in named if not _read(name)) == []


def test_a_key_the_reconciler_no_longer_reads_is_caught() -> None:
    assert not _read("slurmConfig.noSuchKey")
    assert END in PAGE.read_text()
