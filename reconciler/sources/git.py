"""A git remote and branch, cloned once into a work directory and fetched on demand.

The checkout is moved to the fetched head with a hard reset, so it always holds exactly that
commit: files a commit removes are gone, files nobody committed are not there. Credentials
belong in the URL's credential helper or an SSH key, never in logs: the URL is shown without
its password. With --verify-signatures the fetched head is checked against --trusted-keys
before the reset, so a head that is unsigned or signed by another key is never checked out.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import git

from reconciler.errors import SourceError
from reconciler.sources import Revision
from reconciler.sources.signatures import verifier_for

log = logging.getLogger(__name__)


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
    ) -> None:
        self.url = url
        self.branch = branch
        self._workdir = Path(workdir)
        self._subdir = subdir.strip("/")
        self._lock = threading.Lock()  # a webhook and the poll may ask at once
        self._repo: git.Repo | None = None
        # Its GNUPGHOME goes beside the checkout: inside it, `git clean` would remove it.
        self._verifier = verifier_for(verify_signatures, trusted_keys, self._workdir.parent)
        self._verified: str | None = None  # the last head found trusted: not checked again
        if self._verifier is not None:
            log.info("source: commits must be signed by one of %d keys of %s",
                     len(self._verifier.fingerprints), self._verifier.keyring)  # fmt: skip

    @property
    def origin(self) -> str:
        return f"git {redacted(self.url)}@{self.branch}"

    def fetch(self) -> Revision:
        with self._lock:
            repo = self._open()
            try:
                repo.remotes.origin.fetch(
                    f"+refs/heads/{self.branch}:refs/remotes/origin/{self.branch}", prune=True
                )
                head = repo.commit(f"origin/{self.branch}")
                self._verify(head.hexsha)  # before the reset: a refused head is never checked out
                repo.git.reset("--hard", head.hexsha)
                repo.git.clean("-ffdx")
            except (git.GitCommandError, git.BadName, ValueError) as error:
                raise SourceError(
                    f"cannot fetch branch {self.branch!r} of {redacted(self.url)}: "
                    f"{_git_message(error)}",
                    hint="check the URL, the branch name and the credentials",
                ) from None
            return Revision(
                head.hexsha,
                self._workdir / self._subdir if self._subdir else self._workdir,
                self.origin,
                f"{head.summary} ({head.author.name})",
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

    def _open(self) -> git.Repo:
        if self._repo is not None:
            return self._repo
        if (self._workdir / ".git").is_dir():
            self._repo = git.Repo(self._workdir)
            return self._repo
        log.info("source: cloning %s", self.origin)
        try:
            # No checkout yet: fetch() makes it, after the head's signature is verified.
            self._repo = git.Repo.clone_from(
                self.url, self._workdir, branch=self.branch, single_branch=True, no_checkout=True
            )
        except git.GitCommandError as error:
            raise SourceError(
                f"cannot clone {redacted(self.url)} (branch {self.branch!r}): "
                f"{_git_message(error)}",
                hint="check the URL, the branch name and the credentials",
            ) from None
        return self._repo


def redacted(url: str) -> str:
    """The URL without a password or token in it."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _git_message(error: Exception) -> str:
    text = getattr(error, "stderr", "") or str(error)
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return redacted_text(lines[-1] if lines else str(error))


def redacted_text(text: str) -> str:
    """Git quotes URLs in its errors: take any password out of them."""
    words = []
    for word in text.split():
        stripped = word.strip("'\"")
        words.append(word.replace(stripped, redacted(stripped)) if "://" in stripped else word)
    return " ".join(words)
