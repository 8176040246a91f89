"""Where the daemon gets the config repo from: a git remote, a directory something else keeps
fresh (git-sync, an Argo CD CMP, a mounted checkout), or a Flux artifact.

Every source answers the same two questions: what is the current revision (an id and a
directory holding exactly that revision's files), and has anything changed since.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Revision:
    id: str  # a commit sha, a content hash, or a Flux artifact revision
    path: Path  # the repo's files at this revision
    origin: str  # for people: "git <url>@<branch>", "directory <path>"
    summary: str = ""  # e.g. the commit's subject and author

    def __str__(self) -> str:
        short = self.id[:12]
        return f"{short} ({self.summary})" if self.summary else short


class Source(Protocol):
    def fetch(self) -> Revision:
        """Bring the local copy up to date and say which revision it holds now."""
        ...
