"""The I/O edge of config loading: read a repo directory and the shipped layer library."""

from __future__ import annotations

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
    """Repo-relative path -> text of every file the loader reads (hidden dirs skipped).

    A file may be a symlink to another file of the repo; one that leads out of it is
    refused unread, so a checkout cannot make us read (and echo in an error) a host file."""
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
        if _hidden(rel) or not is_repo_file(rel):
            continue
        real = path.resolve()
        if not real.is_relative_to(inside):
            raise _outside(rel)
        if real.is_file():
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


def _outside(rel: str) -> ReconcilerError:
    # Neither the target's path nor anything of its content goes into the message.
    return ReconcilerError(
        "is a symbolic link to a file outside the config repo; it was not read",
        where=Location(rel),
        hint="copy the file into the repo, or link to a file inside it",
    )


def _read_text(path: Path, rel: str) -> str:
    """The file's text; its size is checked before it is read (it may be huge, or growing)."""
    check_file_size(path.stat().st_size, rel)
    with path.open("rb") as handle:
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
