"""Slurm hostlists from untrusted text, counted before they are expanded.

`hostlist.expand_hostlist` caps one bracketed part at 100,000 names but not their sum, so 119
bytes (`x0[0-99999],...,x9[0-99999]`) become a million names. Every hostlist a Pod author or a
config repo writes goes through `expand`, which counts the names first (linear in the text,
no allocation per name) and refuses past a limit before the library builds anything.

MAX_NAMES is five times the largest clusters we can justify (Frontier, a Slurm system, has 9,408
nodes; a 100,000-GPU cluster at 8 GPUs a node has 12,500) and far below what would hurt:
65,536 names are about 5 MB of strings (docs/security.md).
"""

from __future__ import annotations

import reprlib

import hostlist

MAX_NAMES = 65_536


class HostlistTooLarge(ValueError):
    """A hostlist names more nodes than the limit; the caller says where it came from."""

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(f"names {count:,} nodes; the limit is {limit:,}")
        self.count = count
        self.limit = limit


def count(text: str) -> int:
    """How many names `hostlist.expand_hostlist(text)` would make, duplicates included.

    Malformed text is counted leniently (a group that is not a range list counts as one
    name): the library refuses it on expansion, which only starts once the count is small.
    """
    total = 0
    for part in _split_top(text):
        names = 1
        for group in _bracket_groups(part):
            names *= _range_count(group)
        total += names if part else 0
    return total


def expand(text: str, limit: int = MAX_NAMES) -> list[str]:
    """The names of a hostlist, in order, refused past `limit` before any is made.

    Raises HostlistTooLarge, or hostlist.BadHostlist for text the library cannot read.
    """
    found = count(text)
    if found > limit:
        raise HostlistTooLarge(found, limit)
    return [str(name) for name in hostlist.expand_hostlist(text)]


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets, as the library does."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def _bracket_groups(part: str) -> list[str]:
    groups, depth, start = [], 0, 0
    for index, char in enumerate(part):
        if char == "[":
            depth += 1
            start = index + 1 if depth == 1 else start
        elif char == "]":
            depth -= 1
            if depth == 0:
                groups.append(part[start:index])
    return groups


def _range_count(group: str) -> int:
    total = 0
    for item in group.split(","):
        low, _, high = item.partition("-")
        if low.isdigit() and high.isdigit():
            total += max(int(high) - int(low) + 1, 1)
        else:
            total += 1
    return total


class HostlistRefused(ValueError):
    """A hostlist `expand_checked` refuses: too many names, or text the library cannot read.
    Its text follows the words "the hostlist": "names 1,000,000 nodes; the limit is 65,536"."""


def expand_checked(text: str, limit: int = MAX_NAMES) -> list[str]:
    """`expand`, with both refusals as one error for callers that say the same of either
    (the text is shortened in it: a hostile one may be megabytes long)."""
    try:
        return expand(text, limit)
    except HostlistTooLarge as error:
        raise HostlistRefused(str(error)) from None
    except hostlist.BadHostlist as error:
        raise HostlistRefused(f"{reprlib.repr(text)} cannot be read ({error})") from None
