"""A list answer of slurmrestd decoded as it arrives, each object of its list reduced to what
the caller keeps as soon as it is decoded. Pure: chunks of bytes in, plain data out.

Why: `GET /jobs` answers about 5.6 KB of JSON per job. Decoded whole (`json.loads`), a
50,000-job answer is held three times over at its peak: the bytes (280 MiB), their text (280
MiB more) and every job's objects (most of a GiB), more than the daemon's memory limit. Here
only one chunk of text and one job's objects are held at a time, besides what `reduce` keeps.

The standard library's decoder does the work (`JSONDecoder.raw_decode`, in C): this module
only walks the top-level object and the one list between the values it decodes. Not ijson: its
C backend (yajl) refuses integers above 2^63-1 ("integer overflow"), which slurmrestd writes
(NO_VAL64 is 2^64-2), and its pure-Python backend is several times slower than this.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from reconciler.adapters.bounded_read import ReadLimitError

T = TypeVar("T")

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, as json.decoder skips it
_NUMBER_GOES_ON = frozenset("0123456789.eE+-")  # what may follow a number's first part


def stream_listing(
    chunks: Iterable[bytes],
    key: str,
    reduce: Callable[[dict[str, Any]], T],
    *,
    max_items: int | None = None,
    max_value_chars: int | None = None,
) -> dict[str, Any]:
    """The answer's top-level object, as `json.loads` would decode it, except that each object
    of the list under `key` is `reduce(object)`. Anything else there (a list item that is not
    an object, a `key` that is not a list) is left as decoded, for the caller to refuse.
    Raises ValueError (json.JSONDecodeError, UnicodeDecodeError) for what is not JSON, and
    ReadLimitError for a list of more than `max_items` or a value (a list item, or a value at
    the top level) of more than `max_value_chars`: each would otherwise be held whatever its
    size."""
    text = _Text(chunks, max_value_chars, max_items)
    text.expect("{")
    body: dict[str, Any] = {}
    if text.peek() == "}":
        text.at += 1
    else:
        while True:
            name = text.value()
            if not isinstance(name, str):
                raise text.error("Expecting property name enclosed in double quotes")
            text.expect(":")
            # Repeated keys: the last wins, as with json.loads.
            body[name] = text.items(reduce) if name == key and text.peek() == "[" else text.value()
            if text.separator("}"):
                break
    if text.peek():
        raise text.error("Extra data")
    return body


class _Text:
    """The answer's text from `at` on: chunks are decoded as needed and what was read is
    dropped when the next one is appended."""

    def __init__(
        self, chunks: Iterable[bytes], max_value_chars: int | None, max_items: int | None
    ) -> None:
        self._chunks = iter(chunks)
        self._max_value = max_value_chars
        self._max_items = max_items
        self._utf8 = codecs.getincrementaldecoder("utf-8")()  # a character may span chunks
        self.text = ""
        self.at = 0
        self.ended = False

    def more(self, at_least: int = 1) -> bool:
        """Append at least `at_least` characters (or all that is left); False at the end."""
        if self.ended:
            return False
        added: list[str] = []
        size = 0
        while size < at_least:
            chunk = next(self._chunks, None)
            piece = self._utf8.decode(chunk or b"", final=chunk is None)
            added.append(piece)
            size += len(piece)
            if chunk is None:
                self.ended = True
                break
        self.text = self.text[self.at :] + "".join(added)
        self.at = 0
        return True

    def peek(self) -> str:
        """The next character after whitespace ("" at the end), which `at` then points at."""
        while True:
            self.at = _SPACE.match(self.text, self.at).end()  # type: ignore[union-attr]
            if self.at < len(self.text):
                return self.text[self.at]
            if not self.more():
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self.error(f"Expecting {char!r}")
        self.at += 1

    def separator(self, closing: str) -> bool:
        """Past a "," (False) or the `closing` bracket (True)."""
        found = self.peek()
        if found not in (",", closing):
            raise self.error(f"Expecting ',' or {closing!r}")
        self.at += 1
        return found == closing

    def value(self) -> Any:
        """The next JSON value, read on until it is whole."""
        self.peek()
        while True:
            try:
                found, end = _DECODER.raw_decode(self.text, self.at)
            except json.JSONDecodeError:
                if self.ended:
                    raise
            else:
                # A number may go on in the next chunk: "12" of "123", "0" of "0.5".
                cut = end == len(self.text) or (
                    isinstance(found, int | float) and self.text[end] in _NUMBER_GOES_ON
                )
                if not cut or self.ended:
                    self.at = end
                    return found
            unfinished = len(self.text) - self.at
            if self._max_value is not None and unfinished > self._max_value:
                raise ReadLimitError(f"a value of more than {self._max_value:,} characters")
            # Twice the unfinished text at least: a value of many chunks is decoded again
            # a few times, not once per chunk.
            self.more(at_least=max(unfinished, 1))

    def items(self, reduce: Callable[[dict[str, Any]], T]) -> list[T | Any]:
        """The list at `at`, each object reduced as soon as it is decoded."""
        self.expect("[")
        found: list[T | Any] = []
        if self.peek() == "]":
            self.at += 1
            return found
        while True:
            if self._max_items is not None and len(found) >= self._max_items:
                raise ReadLimitError(f"more than {self._max_items:,} objects in the list")
            item = self.value()
            found.append(reduce(item) if isinstance(item, dict) else item)
            if self.separator("]"):
                return found

    def error(self, message: str) -> json.JSONDecodeError:
        return json.JSONDecodeError(message, self.text, self.at)
