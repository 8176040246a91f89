"""A long comment as numbered parts, each under a forge's size limit, none cut (pure).

The comment is a sequence of blocks; a block continued in the next part is closed at the
end of one part (its `tail`: a code fence, `</details>`) and opened again at the start of the
next (its `head`: a table's header, `<details>` and the fence), so every part renders on its
own. Sizes are counted in UTF-16 code units, which is at least the number of characters
however a forge counts them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

# GitHub refuses a comment body over 65,536 characters.
GITHUB_COMMENT_LIMIT = 65536
# Room kept for each part's header (its marker and "part 1 of 3"): at most this many parts.
_MAX_PARTS = 999_999


class CommentLimitError(ValueError):
    """The limit leaves no room for a part's header and one line."""


@dataclass(frozen=True)
class Block:
    lines: tuple[str, ...]
    head: tuple[str, ...] = ()  # opens the block, again in each part it continues in
    tail: tuple[str, ...] = ()  # closes it, at the end of each part it is in


Header = Callable[[int, int], str]  # (part, parts) -> the text each part starts with


def size(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def split_comment(blocks: Sequence[Block], header: Header, limit: int) -> list[str]:
    """The parts, each `header(i, n)` then whole lines of the blocks, each at most `limit`."""
    budget = limit - size(header(_MAX_PARTS, _MAX_PARTS))
    smallest = max((_cost(b.head) + _cost(b.tail) for b in blocks), default=0) + 80
    if budget < smallest:
        raise CommentLimitError(
            f"a comment limit of {limit} characters leaves no room for a part's header, a "
            f"block's opening and closing lines and one line; give at least "
            f"{limit - budget + smallest}"
        )
    parts = _pack(blocks, budget)
    return [header(i, len(parts)) + "\n".join(p) + "\n" for i, p in enumerate(parts, 1)]


def _pack(blocks: Sequence[Block], budget: int) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    used = 0
    for block in blocks:
        room = budget - _cost(block.head) - _cost(block.tail)
        opened = False
        for line in (piece for whole in block.lines for piece in _pieces(whole, room)):
            need = _cost((line,)) + _cost(block.tail) + (0 if opened else _cost(block.head))
            if used + need > budget and parts[-1]:
                if opened:
                    parts[-1] += block.tail
                parts.append([])
                used, opened = 0, False
            if not opened:
                parts[-1] += block.head
                used += _cost(block.head)
                opened = True
            parts[-1].append(line)
            used += _cost((line,))
        if opened:
            parts[-1] += block.tail
            used += _cost(block.tail)
    return parts


def _pieces(line: str, room: int) -> list[str]:
    """A line too long for any part, in pieces that fit (a minified blob in a ConfigMap);
    every other line whole."""
    if _cost((line,)) <= room:
        return [line]
    step = max(1, room // 2 - 1)  # a character is at most two UTF-16 units
    return [line[i : i + step] for i in range(0, len(line), step)]


def _cost(lines: Sequence[str]) -> int:
    return sum(size(line) + 1 for line in lines)
