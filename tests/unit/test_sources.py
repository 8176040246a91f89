"""Config repo sources against real git repositories and directories on disk."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from reconciler.errors import SourceError
from reconciler.sources.directory import DirectorySource, content_hash
from reconciler.sources.git import GitSource, redacted, redacted_text
from tests.unit.git_remote import git, new_remote


@pytest.fixture
def remote(tmp_path: Path) -> tuple[Path, Path]:
    """A bare repo with branch main, and a clone users push from."""
    bare, work = new_remote(tmp_path)
    (work / "values.yaml").write_text("release: a\n")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "first")
    git(work, "push", "-q", "origin", "main")
    return bare, work


def push(work: Path, file: str, text: str | None, message: str) -> str:
    path = work / file
    if text is None:
        git(work, "rm", "-q", file)
    else:
        path.write_text(text)
        git(work, "add", file)
    git(work, "commit", "-q", "-m", message)
    git(work, "push", "-q", "origin", "main")
    return git(work, "rev-parse", "HEAD")


def test_git_source_follows_pushes(remote: tuple[Path, Path], tmp_path: Path) -> None:
    bare, work = remote
    source = GitSource(str(bare), "main", tmp_path / "checkout")
    first = source.fetch()
    assert first.id == git(work, "rev-parse", "HEAD")
    assert (first.path / "values.yaml").read_text() == "release: a\n"
    assert first.summary == "first (Ops)"
    assert source.fetch().id == first.id  # nothing new: the same revision
    second = push(work, "values.yaml", "release: b\n", "second")
    assert source.fetch().id == second
    assert (first.path / "values.yaml").read_text() == "release: b\n"


def test_git_checkout_holds_exactly_the_commit(remote: tuple[Path, Path], tmp_path: Path) -> None:
    bare, work = remote
    source = GitSource(str(bare), "main", tmp_path / "checkout")
    push(work, "extra.yaml", "x: 1\n", "add extra")
    revision = source.fetch()
    (revision.path / "stray.yaml").write_text("nobody committed me\n")
    (revision.path / "values.yaml").write_text("edited by hand\n")
    push(work, "extra.yaml", None, "remove extra")
    revision = source.fetch()
    assert sorted(p.name for p in revision.path.iterdir() if p.name != ".git") == ["values.yaml"]
    assert (revision.path / "values.yaml").read_text() == "release: a\n"


def test_git_source_survives_a_restart(remote: tuple[Path, Path], tmp_path: Path) -> None:
    bare, work = remote
    GitSource(str(bare), "main", tmp_path / "checkout").fetch()
    head = push(work, "values.yaml", "release: c\n", "third")
    assert GitSource(str(bare), "main", tmp_path / "checkout").fetch().id == head


def test_git_source_errors_name_the_branch_and_hide_the_password(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as caught:
        GitSource("https://bot:s3cret@127.0.0.1:9/repo.git", "main", tmp_path / "c").fetch()
    text = str(caught.value)
    assert "s3cret" not in text and "'main'" in text and "bot:***@127.0.0.1:9" in text


def test_git_source_unknown_branch(remote: tuple[Path, Path], tmp_path: Path) -> None:
    bare, _ = remote
    with pytest.raises(SourceError, match="'nope'"):
        GitSource(str(bare), "nope", tmp_path / "checkout").fetch()


def test_redaction() -> None:
    assert redacted("https://u:p@host/r.git") == "https://u:***@host/r.git"
    assert redacted("git@host:r.git") == "git@host:r.git"
    assert "tok" not in redacted_text("fatal: unable to access 'https://x:tok@h/r/': denied")


def test_directory_revision_is_its_content(tmp_path: Path) -> None:
    (tmp_path / "values.yaml").write_text("a: 1\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("whatever")
    source = DirectorySource(tmp_path)
    first = source.fetch()
    (tmp_path / ".git" / "HEAD").write_text("changed, but not content")
    assert source.fetch().id == first.id
    (tmp_path / "values.yaml").write_text("a: 2\n")
    assert source.fetch().id != first.id
    (tmp_path / "values.yaml").write_text("a: 1\n")
    assert source.fetch().id == first.id
    assert content_hash(tmp_path) == first.id


def test_directory_follows_a_swapped_symlink(tmp_path: Path) -> None:
    """git-sync publishes each revision as a new worktree behind a symlink."""
    for name, text in (("rev1", "a: 1\n"), ("rev2", "a: 2\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "values.yaml").write_text(text)
    link = tmp_path / "current"
    link.symlink_to(tmp_path / "rev1")
    source = DirectorySource(link)
    assert source.fetch().path == tmp_path / "rev1"
    tmp = tmp_path / "current.tmp"
    tmp.symlink_to(tmp_path / "rev2")
    tmp.replace(link)
    assert source.fetch().path == tmp_path / "rev2"


def test_directory_changes_are_debounced(tmp_path: Path) -> None:
    source = DirectorySource(tmp_path, debounce_ms=300)
    stop = threading.Event()
    seen: list[float] = []

    def watch() -> None:
        while not stop.is_set():
            if source.wait_for_change(stop, timeout_ms=200):
                seen.append(time.monotonic())

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    time.sleep(0.5)
    for index in range(20):  # a sidecar writing a burst of files
        (tmp_path / f"f{index}.yaml").write_text("x\n")
        time.sleep(0.005)
    time.sleep(1.5)
    stop.set()
    thread.join(timeout=5)
    assert len(seen) == 1, seen


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not a directory"):
        DirectorySource(tmp_path / "absent").fetch()


@pytest.mark.parametrize("member", ["../outside.yaml", "/etc/evil.yaml", "link"])
def test_an_artifact_cannot_write_outside_its_directory(tmp_path: Path, member: str) -> None:
    import io
    import tarfile

    from reconciler.sources.flux import _unpack

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo(member)
        if member == "link":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(info, io.BytesIO(b""))
    with pytest.raises(SourceError, match="refusing member"):
        _unpack(buffer.getvalue(), tmp_path / "rev")
    assert not (tmp_path / "rev").exists() and not (tmp_path / "outside.yaml").exists()
