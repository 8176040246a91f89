"""A git remote and branch, fetched on demand into a repository in a work directory.

The checkout is moved to the fetched head with a hard reset, so it always holds exactly that
commit: files a commit removes are gone, files nobody committed are not there. With
--verify-signatures the head is checked against --trusted-keys before the reset, so a head
that is unsigned or signed by another key is never checked out.

Every git command runs with a time limit (a remote that stops answering mid-fetch would
otherwise hold the daemon's worker forever) and never prompts for credentials. The URL may
carry a token (`https://TOKEN@host/...`): it is shown redacted everywhere, and is never
written into the repository's config, since each fetch names the URL itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from reconciler.errors import SourceError
from reconciler.sources import Revision
from reconciler.sources.redact import redacted, redacted_text
from reconciler.sources.signatures import verifier_for

__all__ = ["GIT_TIMEOUT_SECONDS", "GitSource", "redacted", "redacted_text"]

log = logging.getLogger(__name__)

# A config repo fetches in seconds; a first fetch of a long history over a slow link may take
# minutes. Past this, the remote is taken to be hung (--git-timeout changes it).
GIT_TIMEOUT_SECONDS = 300.0
_COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_FETCH_HINT = "check the URL, the branch name and the credentials"


class GitSource:
    def __init__(
        self,
        url: str,
        branch: str,
        workdir: Path,
        *,
        subdir: str = "",
        verify_signatures: bool = False,
        trusted_keys: Path | None = None,
        timeout: float = GIT_TIMEOUT_SECONDS,
        applied: Callable[[], tuple[str, str]] | None = None,
        allow_non_descendant: bool = False,
    ) -> None:
        """`applied()`: the last revision applied ("" when none) and the origin it came from;
        a head fetched must descend from it, when it came from here, unless
        `allow_non_descendant`."""
        if timeout <= 0:
            raise SourceError(
                f"--git-timeout {timeout:g}: expected seconds > 0",
                hint=f"the default is {GIT_TIMEOUT_SECONDS:g}",
            )
        self.url = url
        self.branch = branch
        self._workdir = Path(workdir)
        self._subdir = subdir.strip("/")
        self._timeout = timeout
        self._lock = threading.Lock()  # a webhook and the poll may ask at once
        # Its GNUPGHOME goes beside the checkout: inside it, `git clean` would remove it.
        self._verifier = verifier_for(verify_signatures, trusted_keys, self._workdir.parent)
        self._verified: str | None = None  # the last head found trusted: not checked again
        self._applied = applied or (lambda: ("", ""))
        self._allow_non_descendant = allow_non_descendant
        self._not_compared = ""  # an applied revision from elsewhere, said once
        if self._verifier is not None:
            log.info("source: commits must be signed by one of %d keys of %s",
                     len(self._verifier.fingerprints), self._verifier.keyring)  # fmt: skip

    def __repr__(self) -> str:
        return f"GitSource({self.origin!r})"

    @property
    def origin(self) -> str:
        return f"git {redacted(self.url)}@{self.branch}"

    def fetch(self) -> Revision:
        """The branch's head, checked out (after its signature is verified)."""
        with self._lock:
            self._init()
            refspec = f"+refs/heads/{self.branch}:refs/remotes/origin/{self.branch}"
            self._run("fetch", "--prune", "--no-tags", "--", self.url, refspec, remote=True)
            fetched = f"refs/remotes/origin/{self.branch}^{{commit}}"
            sha = self._run("rev-parse", "--verify", fetched)
            self._require_descent(sha)  # before the checkout, as the signature
            return self._checkout(sha)

    def require_descent(self, sha: str) -> None:
        """Refuse commit `sha` unless it descends from the last revision applied; for a
        daemon that learns which one that is only after its first fetch (the status
        ConfigMap's name is in the repo)."""
        with self._lock:
            self._require_descent(sha)

    def at(self, sha: str) -> Revision:
        """Revision `sha` (the last one applied) checked out, fetched by id when it is not
        here yet; for a daemon starting while the head cannot be used."""
        if not _COMMIT_ID.fullmatch(sha):
            raise SourceError(f"{sha!r} is not a git commit id", hint="a full sha1 or sha256")
        with self._lock:
            self._init()
            if not self._has(sha):
                self._run("fetch", "--no-tags", "--", self.url, sha, remote=True)
            return self._checkout(self._run("rev-parse", "--verify", f"{sha}^{{commit}}"))

    def _checkout(self, sha: str) -> Revision:
        self._verify(sha)  # before the reset: a refused commit is never checked out
        self._run("reset", "-q", "--hard", sha)
        self._run("clean", "-ffdxq")
        subject, _, author = self._run("log", "-1", "--format=%s%x00%an", sha).partition("\0")
        return Revision(sha, self._tree(sha), self.origin, f"{subject} ({author})")

    def _tree(self, sha: str) -> Path:
        """The config repo's folder in the checkout of `sha`. A commit may turn --git-subdir
        (or a folder above it) into a symlink: resolved, it must still be inside the checkout
        and outside .git, or the daemon would read whatever the link names as the repo."""
        if not self._subdir:
            return self._workdir
        root = self._workdir.resolve()
        resolved = (self._workdir / self._subdir).resolve()
        if resolved.is_relative_to(root) and not resolved.is_relative_to(root / ".git"):
            return self._workdir / self._subdir
        raise SourceError(
            f"refusing commit {sha[:12]} of branch {self.branch!r} of {redacted(self.url)}: "
            f"--git-subdir {self._subdir!r} is or passes through a symlink leading out of the "
            "checkout",
            revision=sha,
            hint="make the folder a real directory (or a link within the repo) again",
        )

    def _require_descent(self, sha: str) -> None:
        """A signed commit stays signed: re-pushing an old one (or another branch's) would
        roll the cluster back with every signature check passing. The head must have the
        last applied commit in its history."""
        applied, origin = self._applied()
        if self._allow_non_descendant or not applied or applied == sha:
            return
        # Applied from another source (a directory, Flux, another URL or branch): no history
        # to compare with. "" is a status written before origins were recorded.
        if origin not in ("", self.origin) or not _COMMIT_ID.fullmatch(applied):
            if self._not_compared != applied:  # once, not at every fetch
                self._not_compared = applied
                log.info("source: the last revision applied came from %s, not %s: heads are "
                         "not checked against it", origin, self.origin)  # fmt: skip
            return
        if not self._has(applied):  # a new Pod's empty workdir: fetch it by id if still there
            with contextlib.suppress(SourceError):
                self._run("fetch", "--no-tags", "--", self.url, applied, remote=True)
        if self._has(applied) and self._run("rev-list", "--count", f"{sha}..{applied}") == "0":
            return
        gone = "" if self._has(applied) else " (it is no longer on the remote)"
        raise SourceError(
            f"refusing commit {sha[:12]} of branch {self.branch!r} of {redacted(self.url)}: it "
            f"does not descend from {applied[:12]}, the last revision applied{gone}; "
            "--allow-non-descendant allows it",
            revision=sha,
            hint=f"a force push back or another branch's commit: push a revert on top of "
            f"{applied[:12]} instead, or, to apply {sha[:12]} on purpose, set "
            "--allow-non-descendant (RECONCILER_ALLOW_NON_DESCENDANT=true) until it is applied",
        )

    def _verify(self, sha: str) -> None:
        if self._verifier is None or sha == self._verified:
            return
        verdict = self._verifier.verify(self._workdir, sha)
        if not verdict.trusted:
            raise SourceError(
                f"refusing commit {sha[:12]} of branch {self.branch!r} of {redacted(self.url)}: "
                f"{verdict.reason}",
                revision=sha,
                hint=verdict.hint,
            )
        log.info("source: %s is signed by trusted key 0x%s", sha[:12], verdict.signer)
        self._verified = sha

    def _init(self) -> None:
        """An empty repository on first use (each fetch names the URL: nothing to clone)."""
        if not (self._workdir / ".git").is_dir():
            log.info("source: fetching %s into %s", self.origin, self._workdir)
            self._workdir.mkdir(parents=True, exist_ok=True)
            self._run("-c", "init.defaultBranch=main", "init", "-q", ".")

    def _has(self, sha: str) -> bool:
        try:
            self._run("cat-file", "-e", f"{sha}^{{commit}}")
        except SourceError:
            return False
        return True

    def _run(self, *args: str, remote: bool = False) -> str:
        """Run git in the work directory; its stdout, or a SourceError that says what failed
        with any URL in it redacted."""
        what = "fetch" if remote else f"git {args[0]}"
        try:
            return run_git(self._workdir, list(args), self._timeout)
        except GitTimeout:
            raise SourceError(
                f"{what} of branch {self.branch!r} of {redacted(self.url)} did not finish in "
                f"{self._timeout:g} s; gave up (the next fetch tries again)",
                hint="check that the remote answers (network, proxy, DNS); a slow remote "
                "needs a longer --git-timeout",
            ) from None
        except GitFailed as error:
            raise SourceError(
                f"cannot {what.removeprefix('git ')} branch {self.branch!r} of "
                f"{redacted(self.url)}: {error}",
                hint=_FETCH_HINT,
            ) from None


class GitTimeout(Exception):
    """git ran past its time limit and was killed (with its helpers)."""


class GitFailed(Exception):
    """git exited non-zero; the message is its last line of stderr, URLs redacted."""


def run_git(cwd: Path, args: list[str], timeout: float) -> str:
    """git in a session of its own, so a timeout kills its helpers too (git-remote-https,
    ssh); never prompting for credentials on a terminal."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        process = subprocess.Popen(
            ["git", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
    except OSError as error:
        raise GitFailed(f"cannot run git: {error.strerror}") from None
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise GitTimeout from None
    if process.returncode != 0:
        raise GitFailed(_last_line(err) or f"git {args[0]} exited {process.returncode}")
    return out.strip()


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone, helpers and all
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return redacted_text(lines[-1]) if lines else ""
