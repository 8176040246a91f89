"""The HTTP transport to slurmrestd: one request with a token, its answer parsed into errors,
warnings and body, and Slurm's `errors` array turned into the typed errors callers catch."""

from __future__ import annotations

import json as json_module
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from reconciler.adapters.bounded_read import (
    MIB,
    ReadLimitError,
    ReadLimits,
    body_chunks,
    read_body,
    shown_url,
)
from reconciler.adapters.slurm.jwt import TokenSource
from reconciler.adapters.slurm.stream import stream_listing
from reconciler.errors import (
    SlurmAnswerLimitError,
    SlurmApiError,
    SlurmAuthError,
    SlurmUnavailableError,
)

DEFAULT_TIMEOUT_SECONDS = 30.0

# Told of every request a client sends: the operation (the SlurmRestApi method's name: "jobs",
# "submit", "cancel", ...), its seconds, and whether it succeeded. A failure is a transport
# error, an HTTP error or Slurm's `errors` array; an answer such as "no such job" from `job()`
# or 304 from `jobs(since=...)` is a success. It runs on the caller's thread: keep it cheap,
# and it must not raise.
SlurmObserver = Callable[[str, float, bool], None]


POOL_CONNECTIONS = 32  # kept-alive connections to slurmrestd per client
# A streamed answer is read this much at a time: big enough that the per-chunk work (a
# socket read, a decode, a copy of the unfinished value) is small beside the JSON's.
STREAM_CHUNK_BYTES = 1 << 20


# How much of slurmrestd's answers is read (bounded_read.py); past a limit the answer is cut
# off and the call that asked fails with SlurmAnswerLimitError.
# An answer decoded whole (`request`): its Python objects are about 15 times its JSON (5,000
# jobs: 61.2 MiB of JSON, 896 MiB at the peak; bench/README.md), so 64 MiB is about the most
# that fits in deploy/base's 1 GiB: a bigger one would have the daemon killed. The biggest
# such read is a whole job list (`jobs()`: the plan's live read, the scheduler's poll after a
# gap), 5,000 to 12,000 jobs at 5 to 12.5 KiB a job. A saturated slurmrestd wrote 2,000 jobs
# (25 MB) in 25 s: 64 MiB in about a minute, so 120 s.
ANSWER_LIMITS = ReadLimits(max_bytes=64 * MIB, deadline_seconds=120.0)
# A list decoded as it arrives (`listing`: the metrics' job summaries, the scheduler's and the
# drain's filtered job lists), whose memory does not follow its size: 2 GiB is 200,000 jobs of
# 10 KiB. slurmrestd writes about 1 ms a job idle, 10 saturated: 50,000 jobs in up to 500 s.
LISTING_LIMITS = ReadLimits(max_bytes=2048 * MIB, deadline_seconds=600.0)
# Objects in that list: 50 times Slurm's default MaxJobCount (an endless list of `{}` would
# otherwise hold one object per 3 bytes).
LISTED_ITEMS_LIMIT = 500_000
# One value of that answer: a job is 5 to 12.5 KiB (a string without end would be held whole).
VALUE_CHARS_LIMIT = 16 * MIB


@dataclass(frozen=True)
class AnswerLimits:
    answer: ReadLimits = ANSWER_LIMITS
    listing: ReadLimits = LISTING_LIMITS
    listed_items: int = LISTED_ITEMS_LIMIT
    value_chars: int = VALUE_CHARS_LIMIT


DEFAULT_LIMITS = AnswerLimits()


@dataclass(frozen=True)
class WireError:
    """One entry of a response's `errors` array, whichever key spelling the endpoint used."""

    number: int | None
    text: str
    description: str = ""
    source: str = ""

    def __str__(self) -> str:
        text = self.text
        if self.description and self.description != self.text:
            text = f"{self.description} ({self.text})" if self.text else self.description
        return f"{text} [{self.number}]" if self.number is not None else text


def wire_errors(body: Mapping[str, Any], key: str = "errors") -> list[WireError]:
    """The `errors` (or `warnings`) array: v0.0.38 spells the number error_number, error_code
    or errno."""
    found = []
    entries = body.get(key)
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping):
            continue
        number = next(
            (
                entry[k]
                for k in ("error_number", "error_code", "errno")
                if isinstance(entry.get(k), int)
            ),
            None,
        )
        found.append(
            WireError(
                number=number,
                text=str(entry.get("error") or ""),
                description=str(entry.get("description") or ""),
                source=str(entry.get("source") or ""),
            )
        )
    return found


# slurmctld rejects a bad token with these (22.05: "Unspecified error", 5005; 24.11: 1007
# "Protocol authentication error", HTTP 511), not with an auth error (see jwt.py).
_MAYBE_AUTH_NUMBERS = frozenset({-1, 5005, 1007})


def api_error(endpoint: str, status: int | None, errors: list[WireError]) -> SlurmApiError:
    first = next((e for e in errors if e.number is not None), errors[0] if errors else None)
    text = "; ".join(str(e) for e in errors) or "no error details"
    hint = None
    if first is not None and first.number in _MAYBE_AUTH_NUMBERS:
        hint = (
            "slurmctld answers a token that is expired or signed with another key this way: "
            "check the JWT key and user"
        )
    prefix = f"HTTP {status}: " if status is not None and status >= 300 else ""
    return SlurmApiError(
        prefix + text,
        endpoint=endpoint,
        status=status,
        error_number=first.number if first else None,
        error_text=first.text if first else "",
        hint=hint,
    )


@dataclass
class Response:
    status: int
    body: dict[str, Any]
    errors: list[WireError] = field(default_factory=list)
    warnings: list[WireError] = field(default_factory=list)


class Transport:
    """HTTP to slurmrestd with a fresh token per request; JSON in, JSON out, typed errors."""

    def __init__(
        self,
        url: str,
        tokens: TokenSource,
        *,
        timeout: float,
        limits: AnswerLimits | None = None,
    ) -> None:
        """LIMITS: how much of an answer is read (default: the module's DEFAULT_LIMITS)."""
        self.url = url.rstrip("/")
        self._tokens = tokens
        self._timeout = timeout
        self._limits = limits or DEFAULT_LIMITS
        self._session = requests.Session()
        # One client serves the scheduler's workers, its start watch, poll and hook threads at
        # once: with requests' default pool of 10, connections beyond it were opened and thrown
        # away per request ("Connection pool is full" in the scale benchmark).
        adapter = HTTPAdapter(pool_maxsize=POOL_CONNECTIONS)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        allow: frozenset[int] = frozenset(),
    ) -> Response:
        """Send; raise for transport failures and for any status not 2xx/304 unless allowed."""
        endpoint = f"{method} {path}"
        with self._send(endpoint, params=params, json=json) as raw:
            return self._parse(endpoint, raw, self._read(endpoint, raw), allow)

    def listing(
        self,
        path: str,
        key: str,
        reduce: Callable[[dict[str, Any]], object],
        *,
        params: Mapping[str, Any] | None = None,
    ) -> Response:
        """GET a list answer whose `key` list is decoded as it arrives, each object of it
        `reduce`d at once (stream.py): a big answer is never held whole, as bytes, text or
        objects. Answers other than 2xx are read as `request` reads them."""
        endpoint = f"GET {path}"
        limits = self._limits
        with self._send(endpoint, params=params) as raw:
            if not 200 <= raw.status_code < 300:
                return self._parse(endpoint, raw, self._read(endpoint, raw), frozenset())
            chunks = body_chunks(raw, limits.listing, chunk_bytes=STREAM_CHUNK_BYTES)
            try:
                body = stream_listing(
                    chunks, key, reduce, max_items=limits.listed_items,
                    max_value_chars=limits.value_chars,
                )  # fmt: skip
            except requests.RequestException as error:
                raise self._unreachable(endpoint, error) from None
            except ReadLimitError as error:
                raise self._cut_off(endpoint, raw, error, limits.listing) from None
            except ValueError as error:
                raise SlurmUnavailableError(
                    f"HTTP {raw.status_code}, not a JSON object: {error}",
                    endpoint=endpoint,
                    status=raw.status_code,
                ) from None
        return Response(raw.status_code, body, wire_errors(body), wire_errors(body, "warnings"))

    def _send(
        self,
        endpoint: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
    ) -> requests.Response:
        """The answer's status and headers; its body is read within the limits (`_read`)."""
        method, _, path = endpoint.partition(" ")
        headers = {
            "X-SLURM-USER-NAME": self._tokens.user,
            "X-SLURM-USER-TOKEN": self._tokens.token(),
        }
        try:
            return self._session.request(
                method,
                self.url + path,
                params=params,
                json=json,
                headers=headers,
                timeout=self._timeout,
                stream=True,
            )
        except requests.RequestException as error:
            raise self._unreachable(endpoint, error) from None

    def _unreachable(self, endpoint: str, error: Exception) -> SlurmUnavailableError:
        return SlurmUnavailableError(
            f"slurmrestd at {self.url} unreachable: {type(error).__name__}", endpoint=endpoint
        )

    def _read(self, endpoint: str, raw: requests.Response) -> bytearray:
        """The whole body, within the limits of an answer decoded whole."""
        try:
            return read_body(raw, self._limits.answer)
        except requests.RequestException as error:
            raise self._unreachable(endpoint, error) from None
        except ReadLimitError as error:
            raise self._cut_off(endpoint, raw, error, self._limits.answer) from None

    def _cut_off(
        self, endpoint: str, raw: requests.Response, error: ReadLimitError, limits: ReadLimits
    ) -> SlurmAnswerLimitError:
        return SlurmAnswerLimitError(
            f"slurmrestd at {shown_url(self.url)} answered HTTP {raw.status_code}, cut off: "
            f"{error.limit} (the limit is {limits.describe()})",
            endpoint=endpoint,
            status=raw.status_code,
            hint="a slurmrestd under load may write this slowly; one writing without end, or "
            "a proxy in its place, is refused",
        )

    def _parse(
        self, endpoint: str, raw: requests.Response, data: bytearray, allow: frozenset[int]
    ) -> Response:
        if raw.status_code == 304:
            return Response(304, {})
        shown = data[:400].decode("utf-8", errors="replace").strip()[:200]
        if raw.status_code == 401:
            raise SlurmAuthError(
                f"slurmrestd refused authentication: {shown}",
                endpoint=endpoint,
                status=401,
                hint="slurmrestd needs -a rest_auth/jwt and both X-SLURM-USER-* headers",
            )
        try:
            body = json_module.loads(data)
        except ValueError:
            raise SlurmUnavailableError(
                f"HTTP {raw.status_code}, not JSON: {shown!r}",
                endpoint=endpoint,
                status=raw.status_code,
            ) from None
        if not isinstance(body, dict):
            # Every slurmrestd answer is an object; taken as {} a list would read as empty.
            raise SlurmUnavailableError(
                f"HTTP {raw.status_code}, JSON but not an object: {shown!r}",
                endpoint=endpoint,
                status=raw.status_code,
            )
        errors = wire_errors(body)
        if not 200 <= raw.status_code < 300 and raw.status_code not in allow:
            raise api_error(endpoint, raw.status_code, errors)
        return Response(raw.status_code, body, errors, wire_errors(body, "warnings"))

    def close(self) -> None:
        self._session.close()


def as_of_now() -> int:
    """The `since` to remember for a request that is about to leave (see Snapshot)."""
    return int(time.time()) - 1
