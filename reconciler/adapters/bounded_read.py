"""The answer of a server we do not control (slurmrestd, slurmctld's metrics), read within a
size and a time: a server that sends without end, or a byte at a time, is cut off with a
ReadLimitError, and the daemon holds at most the limit in memory, never what it was sent.

requests' timeout is per socket read, not total: a server that drips a byte every few seconds
is never timed out, and `iter_content(n)` waits until n bytes came. So the answer is read with
urllib3's `read1` (whatever has arrived, up to n bytes, decompressed within n bytes: a gzip
bomb is cut off too), and the size and the deadline are checked after each read. A read waits
at most the session's per-read timeout, so the deadline is overrun by that at the most.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import requests
import urllib3.exceptions

CHUNK_BYTES = 1 << 16  # what one read asks for (it returns what has arrived, up to this)
MIB = 1 << 20


class ReadLimitError(Exception):
    """An answer went past its limit: `limit` says which (e.g. "more than 64 MiB")."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


@dataclass(frozen=True)
class ReadLimits:
    max_bytes: int  # the answer's body, decompressed
    deadline_seconds: float  # from the first byte asked to the last read
    max_lines: int | None = None  # newlines in the body (OpenMetrics: a sample a line at most)

    def describe(self) -> str:
        lines = f", {self.max_lines:,} lines" if self.max_lines is not None else ""
        return f"{_size(self.max_bytes)}{lines} in {self.deadline_seconds:g} s"


def body_chunks(
    answer: requests.Response,
    limits: ReadLimits,
    *,
    chunk_bytes: int = CHUNK_BYTES,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[bytes]:
    """The body of `answer` (sent with stream=True) as it arrives; ReadLimitError past a limit,
    requests' own exceptions for a connection that fails."""
    ends = clock() + limits.deadline_seconds
    declared = answer.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limits.max_bytes:
        raise ReadLimitError(f"{int(declared):,} bytes announced, more than the "
                             f"{_size(limits.max_bytes)} allowed")  # fmt: skip
    read = lines = 0
    while True:
        if clock() > ends:
            raise ReadLimitError(f"not whole after {limits.deadline_seconds:g} s")
        try:
            chunk = answer.raw.read1(chunk_bytes, decode_content=True)
        except urllib3.exceptions.ReadTimeoutError as error:
            raise requests.ReadTimeout(error) from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise requests.ConnectionError(error) from None
        if not chunk:
            return
        read += len(chunk)
        if read > limits.max_bytes:
            raise ReadLimitError(f"more than {_size(limits.max_bytes)}")
        if limits.max_lines is not None:
            lines += chunk.count(b"\n")
            if lines > limits.max_lines:
                raise ReadLimitError(f"more than {limits.max_lines:,} lines")
        yield chunk


def read_body(answer: requests.Response, limits: ReadLimits) -> bytearray:
    """The whole body of `answer` (sent with stream=True), within `limits`: held once (no
    list of chunks joined at the end)."""
    body = bytearray()
    for chunk in body_chunks(answer, limits):
        body += chunk
    return body


def shown_url(url: str) -> str:
    """The URL as an error may show it: no user part (credentials), no query."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a URL that does not parse>"
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _size(count: int) -> str:
    return f"{count / MIB:g} MiB" if count >= MIB else f"{count:,} bytes"
