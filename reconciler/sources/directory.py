"""A directory something else keeps fresh (git-sync, an Argo CD CMP, a mounted checkout).

Its revision is a hash of its files' paths and contents, so the same files give the same id
whatever their timestamps. Changes are noticed with watchfiles and debounced: a sidecar that
writes twenty files yields one new revision, not twenty.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import watchfiles

from reconciler.errors import SourceError
from reconciler.sources import Revision

DEFAULT_DEBOUNCE_MS = 500
# What tools that keep a directory fresh leave beside the content.
IGNORED_NAMES = frozenset({".git", ".gitsync", "__pycache__"})


class DirectorySource:
    def __init__(self, path: Path, *, debounce_ms: int = DEFAULT_DEBOUNCE_MS) -> None:
        self.path = Path(path)
        self._debounce_ms = debounce_ms

    @property
    def origin(self) -> str:
        return f"directory {self.path}"

    def fetch(self) -> Revision:
        # git-sync swaps a symlink to a new worktree: resolve it for each revision.
        real = self.path.resolve()
        if not real.is_dir():
            raise SourceError(
                f"{self.path} is not a directory",
                hint="mount the config repo there, or point --source-dir at it",
            )
        return Revision(content_hash(real), real, self.origin)

    def wait_for_change(self, stop: threading.Event, timeout_ms: int | None = None) -> bool:
        """Block until the directory changes (True) or `stop` is set or the timeout passes."""
        for _changes in watchfiles.watch(
            self.path.parent if self.path.is_symlink() else self.path,
            debounce=self._debounce_ms,
            stop_event=stop,
            rust_timeout=timeout_ms or 0,
            yield_on_timeout=timeout_ms is not None,
            recursive=True,
        ):
            return bool(_changes)
        return False


def content_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(_files(root)):
        relative = path.relative_to(root).as_posix()
        digest.update(relative.encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _files(root: Path) -> list[Path]:
    found: list[Path] = []
    for directory, names, files in os.walk(root):
        names[:] = [n for n in names if n not in IGNORED_NAMES]
        found.extend(Path(directory) / f for f in files if f not in IGNORED_NAMES)
    return found
