"""A fetched revision's repo, loaded once: the daemon's start reads the revision to learn its
release and scheduler settings, and its first convergence applies that same revision; a
resync of an unchanged revision re-plans from the config already loaded."""

from __future__ import annotations

from pathlib import Path

from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import Config, load_config


class RevisionLoader:
    """Loads with the release and namespace the command line fixed (None: reconciler.yaml)."""

    def __init__(self, release: str | None = None, namespace: str | None = None) -> None:
        self._flags = (release, namespace)
        self._last: tuple[tuple[str, Path], Config] | None = None
        self.count = 0  # repos loaded (for the "loads once" test)

    def load(self, revision_id: str, path: Path) -> Config:
        """The config of the revision `revision_id` checked out at `path`; a revision id names
        its content (a commit, a digest), so the same id at the same path is not read again."""
        key = (revision_id, path)
        if self._last is None or self._last[0] != key:
            release, namespace = self._flags
            config = load_config(read_repo(path), read_library(), release=release,
                                 namespace=namespace)  # fmt: skip
            self.count += 1
            self._last = (key, config)
        return self._last[1]
