""" "Did you mean ...?": the names a user most likely meant by one this reconciler does not know
(a values key, a layer, a reservation flag, an account). One home, so every such message ranks
alike: best match first, ties alphabetical (difflib alone breaks them backwards), case ignored,
nothing under difflib's usual 0.6 similarity.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CUTOFF = 0.6


def closest(name: str, known: Iterable[str], limit: int = 1) -> list[str]:
    """Up to `limit` of `known` nearest `name`, best first."""
    scored = []
    for candidate in set(known):
        score = difflib.SequenceMatcher(None, name.lower(), candidate.lower()).ratio()
        if score >= CUTOFF:
            scored.append((-score, candidate))
    return [candidate for _, candidate in sorted(scored)[:limit]]


def did_you_mean(name: str, known: Iterable[str], limit: int = 1, prefix: str = "") -> str:
    """ "did you mean 'x'?" ("'x', 'y'" with a `limit` above one; each after `prefix`), or ""
    where nothing is near."""
    close = closest(name, known, limit)
    if not close:
        return ""
    return "did you mean " + ", ".join(repr(prefix + c) for c in close) + "?"
