"""The I/O edge of config loading: read a repo directory and the shipped layer library."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from reconciler.config.repo import is_repo_file
from reconciler.errors import ReconcilerError


def read_repo(root: str | Path) -> dict[str, str]:
    """Repo-relative path -> text of every file the loader reads (hidden dirs skipped)."""
    base = Path(root)
    if not base.is_dir():
        raise ReconcilerError(
            f"config repo {str(root)!r} is not a directory",
            hint="pass the path of a checkout that holds values.yaml",
        )
    files: dict[str, str] = {}
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base).as_posix()
        if path.is_file() and not _hidden(rel) and is_repo_file(rel):
            files[rel] = _read_text(path, rel)
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


def _read_text(path: Path, rel: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ReconcilerError(f"{rel}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
