"""JWT tokens for slurmrestd and for `scontrol` (auth/jwt).

A token source hands out a token that stays valid for at least `refresh_margin` seconds, so a
request never leaves with a token that expires in flight. Tokens and key bytes are secrets: no
repr, str, log line or exception message here ever contains one.

slurmctld answers an expired or wrongly signed token with a generic error (errno -1 "Unspecified
error", or 5005 "Zero Bytes were transmitted or received"), never with "expired": so expiry is
checked here, before sending, and reported as `SlurmAuthError`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import jwt

from reconciler.errors import SlurmAuthError, SlurmKeyMissingError

DEFAULT_LIFETIME_SECONDS = 1800
DEFAULT_REFRESH_MARGIN_SECONDS = 60
ENV_VAR = "SLURM_JWT"
_ALGORITHM = "HS256"

Clock = Callable[[], float]


class TokenSource(Protocol):
    """Anything that can produce a currently valid token for one Slurm user."""

    @property
    def user(self) -> str: ...

    def token(self) -> str:
        """A token valid for at least the refresh margin; raises SlurmAuthError otherwise."""
        ...


def mint_token(key: bytes, user: str, *, now: int, lifetime: int) -> str:
    """An HS256 token with the claims slurmctld's auth/jwt checks: exp, iat, sun (user name)."""
    return jwt.encode({"exp": now + lifetime, "iat": now, "sun": user}, key, algorithm=_ALGORITHM)


def read_claims(token: str, *, origin: str) -> dict[str, object]:
    """Claims of a token without verifying its signature (only slurmctld holds the key)."""
    try:
        return jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        # `from None`: the library's message could quote parts of the token.
        raise SlurmAuthError(
            "not a readable JWT", endpoint=origin, hint="check what writes the token"
        ) from None


class MintedTokens:
    """Mints tokens from the cluster's HS256 key file, re-minting shortly before expiry, and
    at once when the file is replaced (a key Secret made anew, as kubelet updates it)."""

    def __init__(
        self,
        key_file: Path,
        user: str,
        *,
        lifetime: int = DEFAULT_LIFETIME_SECONDS,
        refresh_margin: int = DEFAULT_REFRESH_MARGIN_SECONDS,
        clock: Clock = time.time,
    ) -> None:
        if lifetime <= refresh_margin:
            raise ValueError("token lifetime must be longer than the refresh margin")
        self._key_file = Path(key_file)
        self._user = user
        self._lifetime = lifetime
        self._margin = refresh_margin
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[str, int, tuple[int, int]] | None = None  # (token, exp, file id)

    @property
    def user(self) -> str:
        return self._user

    def token(self) -> str:
        now = int(self._clock())
        with self._lock:
            file_id = self._file_id()
            cached = self._cached
            if cached is None or cached[1] - self._margin <= now or cached[2] != file_id:
                cached = (self._mint(now), now + self._lifetime, file_id)
                self._cached = cached
            return cached[0]

    def _file_id(self) -> tuple[int, int]:
        """Which file holds the key now: replaced files (atomic writes) get a new inode."""
        try:
            stat = self._key_file.stat()
        except OSError:
            return (0, 0)  # _mint says what is wrong
        return (stat.st_ino, stat.st_mtime_ns)

    def _mint(self, now: int) -> str:
        try:
            key = self._key_file.read_bytes()
        except FileNotFoundError:
            raise SlurmKeyMissingError(
                f"the JWT key file {self._key_file} does not exist (yet)",
                endpoint="jwt",
                hint="it comes from the JWT key Secret that apply creates (mounted into this "
                "Pod), or AuthAltParameters=jwt_key=... in slurm.conf",
            ) from None
        except OSError as error:
            raise SlurmAuthError(
                f"cannot read JWT key file {self._key_file}: {error.strerror}",
                endpoint="jwt",
                hint="the key is AuthAltParameters=jwt_key=... in slurm.conf",
            ) from None
        return mint_token(key, self._user, now=now, lifetime=self._lifetime)

    def __repr__(self) -> str:
        return f"MintedTokens(user={self._user!r}, key_file={str(self._key_file)!r})"


class ProvidedToken:
    """A token someone else mints: read from a file (re-read when near expiry) or from env.

    The user defaults to the token's `sun` claim. A token that is expired, or expires within the
    refresh margin and cannot be re-read, raises SlurmAuthError before any request is sent.
    """

    def __init__(
        self,
        read: Callable[[], str],
        *,
        origin: str,
        user: str | None = None,
        refresh_margin: int = DEFAULT_REFRESH_MARGIN_SECONDS,
        clock: Clock = time.time,
    ) -> None:
        self._read = read
        self._origin = origin
        self._margin = refresh_margin
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[str, int | None] = self._load()
        self._user = user or _claimed_user(self._cached[0], origin)

    @classmethod
    def from_file(
        cls, path: Path, *, user: str | None = None, clock: Clock = time.time
    ) -> ProvidedToken:
        def read() -> str:
            try:
                return Path(path).read_text().strip()
            except OSError as error:
                raise SlurmAuthError(
                    f"cannot read token file {path}: {error.strerror}", endpoint="jwt"
                ) from None

        return cls(read, origin=f"token file {path}", user=user, clock=clock)

    @classmethod
    def from_env(
        cls, var: str = ENV_VAR, *, user: str | None = None, clock: Clock = time.time
    ) -> ProvidedToken:
        def read() -> str:
            value = os.environ.get(var, "").strip()
            if not value:
                raise SlurmAuthError(f"environment variable {var} is not set", endpoint="jwt")
            return value

        return cls(read, origin=f"${var}", user=user, clock=clock)

    @property
    def user(self) -> str:
        return self._user

    def token(self) -> str:
        now = int(self._clock())
        with self._lock:
            if _expires_soon(self._cached[1], now, self._margin):
                self._cached = self._load()
            token, exp = self._cached
        if exp is not None and exp <= now:
            raise SlurmAuthError(
                f"the token from {self._origin} expired {now - exp} s ago",
                endpoint="jwt",
                hint="mint a new one (scontrol token) or give the key file instead",
            )
        return token

    def _load(self) -> tuple[str, int | None]:
        token = self._read()
        exp = read_claims(token, origin=self._origin).get("exp")
        return token, exp if isinstance(exp, int) else None

    def __repr__(self) -> str:
        return f"ProvidedToken(user={self._user!r}, origin={self._origin!r})"


def _expires_soon(exp: int | None, now: int, margin: int) -> bool:
    return exp is not None and exp - margin <= now


def _claimed_user(token: str, origin: str) -> str:
    user = read_claims(token, origin=origin).get("sun")
    if not isinstance(user, str) or not user:
        raise SlurmAuthError(
            f"the token from {origin} has no `sun` (user name) claim",
            endpoint="jwt",
            hint="pass the user name explicitly",
        )
    return user
