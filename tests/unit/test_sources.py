"""Config repo sources against real git repositories and directories on disk."""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import socket
import tarfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    assert "s3cret" not in text and "'main'" in text and "https://***@127.0.0.1:9" in text


def test_git_source_unknown_branch(remote: tuple[Path, Path], tmp_path: Path) -> None:
    bare, _ = remote
    with pytest.raises(SourceError, match="'nope'"):
        GitSource(str(bare), "nope", tmp_path / "checkout").fetch()


def test_redaction() -> None:
    assert redacted("https://u:p@host/r.git") == "https://***@host/r.git"
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


# ---- credentials in the URL, time limits, artifact size limits --------------------------------

TOKEN = "ghp_0123456789abcdefTOKEN"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://{TOKEN}@git.example.org/hpc/c.git", "https://***@git.example.org/hpc/c.git"),
        (f"https://x-access-token:{TOKEN}@github.com/o/r.git", "https://***@github.com/o/r.git"),
        (f"https://{TOKEN}:x-oauth-basic@github.com/o/r.git", "https://***@github.com/o/r.git"),
        (f"http://{TOKEN}@127.0.0.1:8080/r.git", "http://***@127.0.0.1:8080/r.git"),
        ("ssh://git@host/r.git", "ssh://git@host/r.git"),
        ("git@host:r.git", "git@host:r.git"),
        ("https://host/r.git", "https://host/r.git"),
    ],
)
def test_a_token_in_the_user_part_of_a_url_is_never_shown(url: str, shown: str) -> None:
    assert redacted(url) == shown
    message = f"fatal: unable to access '{url}/':\n  The requested URL returned error: 403"
    assert TOKEN not in redacted_text(message)
    assert redacted_text(message).endswith("\n  The requested URL returned error: 403")


class _Forbidden(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def forbidding_remote() -> Iterator[int]:
    """A git HTTP remote that refuses every request (git then quotes the URL in its error)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Forbidden)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_a_token_in_the_git_url_is_in_no_error_origin_or_log(
    forbidding_remote: int, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"http://{TOKEN}@127.0.0.1:{forbidding_remote}/hpc/config.git"
    source = GitSource(url, "main", tmp_path / "checkout")
    with pytest.raises(SourceError) as caught:
        source.fetch()
    assert "403" in str(caught.value), caught.value  # git's own words reached the error
    for text in (str(caught.value), source.origin, repr(source), caplog.text):
        assert TOKEN not in text, text
    assert f"http://***@127.0.0.1:{forbidding_remote}/hpc/config.git" in str(caught.value)
    config = (tmp_path / "checkout" / ".git" / "config").read_text()
    assert TOKEN not in config  # not kept on disk either: each fetch names the URL


@pytest.fixture
def silent_remote() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung remote or proxy)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    listener.close()


def _git_processes_for(port: int) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if f"127.0.0.1:{port}" in text:
                found.append(text)
    return found


def test_a_first_fetch_from_a_hung_remote_gives_up_at_its_timeout(
    silent_remote: int, tmp_path: Path
) -> None:
    url = f"http://{TOKEN}@127.0.0.1:{silent_remote}/config.git"
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        GitSource(url, "main", tmp_path / "checkout", timeout=1).fetch()
    assert time.monotonic() - started < 10
    assert "did not finish in 1 s" in str(caught.value) and TOKEN not in str(caught.value)
    assert "--git-timeout" in str(caught.value)
    assert _git_processes_for(silent_remote) == []  # git and its https helper were killed


def test_a_fetch_that_hangs_gives_up_and_the_next_one_works(
    remote: tuple[Path, Path], silent_remote: int, tmp_path: Path
) -> None:
    bare, work = remote
    checkout = tmp_path / "checkout"
    first = GitSource(str(bare), "main", checkout).fetch()
    hung = GitSource(f"http://127.0.0.1:{silent_remote}/config.git", "main", checkout, timeout=1)
    with pytest.raises(SourceError, match="did not finish in 1 s"):
        hung.fetch()
    head = push(work, "values.yaml", "release: d\n", "after the hang")
    assert GitSource(str(bare), "main", checkout).fetch().id == head != first.id


def test_the_last_applied_revision_can_be_checked_out_again(
    remote: tuple[Path, Path], tmp_path: Path
) -> None:
    """What a daemon starting on a bad head runs from."""
    bare, work = remote
    applied = git(work, "rev-parse", "HEAD")
    push(work, "values.yaml", "compute: [\n", "broken")
    source = GitSource(str(bare), "main", tmp_path / "fresh")  # a new Pod: nothing fetched yet
    revision = source.at(applied)
    assert revision.id == applied and revision.summary == "first (Ops)"
    assert (revision.path / "values.yaml").read_text() == "release: a\n"
    with pytest.raises(SourceError, match="not a git commit id"):
        source.at("--upload-pack=touch /tmp/x")


def _serve_bytes(body: bytes, *, declare_length: bool) -> tuple[ThreadingHTTPServer, str]:
    class Artifact(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            if declare_length:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the client may hang up once it has enough
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Artifact)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/artifact.tar.gz"


@pytest.mark.parametrize("declare_length", [True, False])
def test_a_flux_artifact_larger_than_the_limit_is_not_downloaded(declare_length: bool) -> None:
    from reconciler.sources.flux import _download

    body = os.urandom(64 * 1024)
    server, url = _serve_bytes(body, declare_length=declare_length)
    try:
        with pytest.raises(SourceError) as caught:
            _download(url, hashlib.sha256(body).hexdigest(), "flux x/y", max_bytes=16 * 1024)
        assert "larger than 16 KiB" in str(caught.value) and "hint:" in str(caught.value)
        assert _download(url, hashlib.sha256(body).hexdigest(), "flux x/y") == body
    finally:
        server.shutdown()
        server.server_close()


def _tarball(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_a_flux_artifact_that_unpacks_too_large_is_refused(tmp_path: Path) -> None:
    from reconciler.sources.flux import _unpack

    bomb = _tarball({"values.yaml": b"a: 1\n", "zeros.bin": bytes(4 * 1024 * 1024)})
    assert len(bomb) < 64 * 1024  # zeros compress: the download limit alone would let it by
    with pytest.raises(SourceError, match="more than 1 MiB") as caught:
        _unpack(bomb, tmp_path / "rev", max_bytes=1024 * 1024)
    assert "hint:" in str(caught.value)
    assert not (tmp_path / "rev").exists() and list(tmp_path.iterdir()) == []
    many = _tarball({f"f{index}.yaml": b"x: 1\n" for index in range(30)})
    with pytest.raises(SourceError, match="more than 10 files"):
        _unpack(many, tmp_path / "rev", max_files=10)
    _unpack(many, tmp_path / "rev")
    assert len(list((tmp_path / "rev").iterdir())) == 30
