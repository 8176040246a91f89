"""The I/O edge of config loading: read a repo directory and the shipped layer library."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from reconciler.config.limits import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_REPO_BYTES,
    MIB,
    check_file_size,
)
from reconciler.config.repo import is_repo_file
from reconciler.errors import Location, ReconcilerError


def read_repo(root: str | Path) -> dict[str, str]:
    """Repo-relative path -> text of every file the loader reads (hidden dirs skipped)."""
    return read_files(root, is_repo_file)


def read_files(root: str | Path, wanted: Callable[[str], bool]) -> dict[str, str]:
    """Repo-relative path -> text of the files under `root` whose path `wanted` takes (hidden
    dirs skipped): the one reader of a config repo and of the files beside it (policy tests).

    A file may be a symlink to another file of the repo; one that leads out of it, loops or
    leads nowhere is refused unread, as is a special file (a device, FIFO or socket), so a
    checkout cannot make us read (and echo in an error) a host file, or block on a read.
    Sizes are capped (config/limits.py)."""
    base = Path(root)
    if not base.is_dir():
        raise ReconcilerError(
            f"config repo {str(root)!r} is not a directory",
            hint="pass the path of a checkout that holds values.yaml",
        )
    inside = base.resolve()
    files: dict[str, str] = {}
    total = 0
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base).as_posix()
        if _hidden(rel) or not wanted(rel):
            continue
        real = _resolved(path, rel, inside)
        if not real.is_dir():
            files[rel] = _read_text(real, rel)
            total += len(files[rel])
            _check_repo_size(total, len(files), rel)
    return files


def read_library() -> dict[str, str]:
    """File name -> text of the layers shipped in reconciler/library."""
    folder = resources.files("reconciler") / "library"
    return {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".yaml")
    }


def read_shipped_policies() -> dict[str, str]:
    """File name -> text of the policies shipped in policies/ (packaged as
    reconciler/shipped_policies, a link to it)."""
    folder = resources.files("reconciler") / "shipped_policies"
    return {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".yaml")
    }


def _hidden(rel: str) -> bool:
    return any(part.startswith(".") for part in rel.split("/"))


def _resolved(path: Path, rel: str, inside: Path) -> Path:
    """Where `path` leads, refused unless inside the repo. Neither the target's path nor
    anything of its content goes into a message."""
    try:
        real = path.resolve(strict=True)
    except RuntimeError:  # Python 3.11's resolve() on a loop; 3.13 raises OSError(ELOOP)
        raise _unread(rel, "is a symbolic link that loops") from None
    except OSError as error:
        why = "loops" if error.errno == errno.ELOOP else "leads to nothing"
        raise _unread(rel, f"is a symbolic link that {why}") from None
    if not real.is_relative_to(inside):
        raise _unread(rel, "is a symbolic link to a file outside the config repo")
    return real


def _unread(
    rel: str, problem: str, hint: str = "copy the file into the repo, or link to a file inside it"
) -> ReconcilerError:
    return ReconcilerError(f"{problem}; it was not read", where=Location(rel), hint=hint)


def _read_text(path: Path, rel: str) -> str:
    """The file's text. It is opened without blocking (a FIFO would wait for a writer) and
    checked to be a regular file, then its size is checked before it is read (it may be
    huge, or growing)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as error:
        raise _unread(rel, f"cannot be opened ({error.strerror})", "check its mode") from None
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            problem = "is not a regular file (a device, FIFO or socket)"
            raise _unread(rel, problem, "a config repo holds text files only")
        check_file_size(status.st_size, rel)
        data = handle.read(MAX_FILE_BYTES + 1)
    check_file_size(len(data), rel)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReconcilerError(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})", where=Location(rel)
        ) from None


def _check_repo_size(total: int, count: int, rel: str) -> None:
    if count > MAX_FILES:
        raise ReconcilerError(
            f"the config repo has more than {MAX_FILES} config files (counted up to this one)",
            where=Location(rel),
            hint="merge values.d and compute-defs files; each is parsed and checked on its own",
        )
    if total > MAX_REPO_BYTES:
        raise ReconcilerError(
            f"the config files of the repo exceed {MAX_REPO_BYTES // MIB} MiB in all "
            "(counted up to this file)",
            where=Location(rel),
            hint="a config repo holds values and layers, not data: remove large files",
        )
