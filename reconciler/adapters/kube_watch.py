"""A watch that survives 410 Gone: list, watch from the list's resourceVersion, relist on expiry.

Iterating a KubeWatch yields (event_type, object_dict) with event_type ADDED, MODIFIED or
DELETED; bookmarks only move the resourceVersion. When the server says the resourceVersion is
too old (410, as an HTTP status or as an ERROR event), the watch relists and reports the
difference against what it has yielded so far: objects that appeared or changed come as ADDED or
MODIFIED, objects that vanished in the gap come as DELETED (with a stub: apiVersion, kind and
metadata name/namespace/uid/resourceVersion). A caller that starts from its own
resource_version and gets a 410 sees every live object as ADDED: treat ADDED as an upsert.
Only keys and resourceVersions are remembered, never whole objects. A `shape` (the object and
the size of its JSON -> what the caller keeps) is applied to each object as it is decoded, in a
list page (`decode_list`) as in an event, so a caller that keeps a small part of large objects
never holds more than one of them whole.

A caller that lists first and reconnects with new watches (after an error, an API server
outage) hands each one the same WatchMemory (`carry`): the watch resumes from the last version
it saw and, relisting after a 410, reports as DELETED what vanished while nobody watched,
including what the caller's own list reported. Without it an outage longer than etcd's
compaction leaves deleted objects in the caller's cache for good.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import urllib3

from reconciler.errors import KubeApiError
from reconciler.objects import Obj

Event = tuple[str, Obj]
Shape = Callable[[Obj, int], Obj]
MAX_CONNECTION_SECONDS = 300
_READ_SLACK_SECONDS = 15.0


class WatchSource(Protocol):
    """What a watch needs from the client (kube.Kube provides it)."""

    def list_path(
        self, path: str, selectors: list[tuple[str, str]], *, shape: Shape | None = None
    ) -> Any: ...

    def open_stream(self, path: str, query: list[tuple[str, str]], read_timeout: float) -> Any: ...


class _Gone(Exception):
    """The resourceVersion we watch from was compacted away."""


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def stub_of(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    keep = ("name", "namespace", "uid", "resourceVersion")
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {k: meta[k] for k in keep if k in meta},
    }


def relist_events(known: dict[str, Obj], items: tuple[Obj, ...]) -> list[Event]:
    """What changed between the stubs we know and a fresh list (pure; updates `known`)."""
    live = {object_key(item): item for item in items}
    events: list[Event] = [("DELETED", known.pop(key)) for key in list(known) if key not in live]
    for key, item in live.items():
        before = known.get(key)
        now = stub_of(item)
        known[key] = now
        if before is None:
            events.append(("ADDED", item))
        elif before["metadata"].get("resourceVersion") != now["metadata"].get("resourceVersion"):
            events.append(("MODIFIED", item))
    return events


def decode_list(payload: bytes, shape: Shape) -> Obj:
    """A list response, each of its items shaped as soon as it is decoded: beside the text,
    one whole item at a time (json.loads would hold the whole page's objects at once)."""
    text = payload.decode("utf-8")
    decoder = json.JSONDecoder()
    out: Obj = {}
    at = _past(text, _space(text, 0), "{")
    while text[_space(text, at)] != "}":
        key, at = decoder.raw_decode(text, _space(text, at))
        at = _space(text, _past(text, _space(text, at), ":"))
        if key == "items" and text.startswith("[", at):
            out["items"], at = _shaped_items(text, at + 1, decoder, shape)
        else:
            out[key], at = decoder.raw_decode(text, at)
        at = _space(text, at)
        if text.startswith(",", at):
            at += 1
    return out


def _shaped_items(
    text: str, at: int, decoder: json.JSONDecoder, shape: Shape
) -> tuple[list[Obj], int]:
    items: list[Obj] = []
    at = _space(text, at)
    while not text.startswith("]", at):
        item, end = decoder.raw_decode(text, at)
        items.append(shape(item, end - at))
        at = _space(text, end)
        if text.startswith(",", at):
            at = _space(text, at + 1)
    return items, at + 1


def _space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    if at >= len(text):
        raise ValueError("a list response ended early")
    return at


def _past(text: str, at: int, token: str) -> int:
    if not text.startswith(token, at):
        raise ValueError(f"a list response has {text[at : at + 20]!r} where {token!r} belongs")
    return at + 1


def lines_of(stream: Any, chunk_size: int = 64 * 1024) -> Iterator[bytes]:
    """The stream's lines as chunks arrive. Not `readline()`: urllib3 2's response has no
    peek(), so io's readline reads it one byte per call (about 4 ms of CPU per 2 KB event)."""
    pending = b""
    for chunk in stream.stream(chunk_size, decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from complete
    if pending:
        yield pending


@dataclass
class WatchMemory:
    """What a list and its watches reported, kept by the caller across reconnects: the
    resourceVersion to resume from, and a stub of every object reported live."""

    resource_version: str
    known: dict[str, Obj] = field(default_factory=dict)

    @classmethod
    def of_listing(cls, items: tuple[Obj, ...], resource_version: str) -> WatchMemory:
        return cls(resource_version, {object_key(item): stub_of(item) for item in items})


class KubeWatch:
    """Iterable of (event_type, object); see the module docstring. `relists` counts 410s."""

    def __init__(
        self,
        source: WatchSource,
        path: str,
        *,
        selectors: list[tuple[str, str]],
        resource_version: str | None,
        timeout_seconds: float | None,
        clock: Callable[[], float] = time.monotonic,
        shape: Shape | None = None,
    ) -> None:
        self._source = source
        self._shape = shape
        self._path = path
        self._selectors = selectors
        self._clock = clock
        self._deadline = None if timeout_seconds is None else clock() + timeout_seconds
        self._known: dict[str, Obj] = {}
        self._memory: WatchMemory | None = None
        self._stopped = False
        self.resource_version = resource_version
        self.relists = 0

    def carry(self, memory: WatchMemory) -> None:
        """Resume from `memory` and keep it up to date (see the module docstring); call
        before iterating."""
        self._memory = memory
        self._known = memory.known
        self.resource_version = memory.resource_version

    def __iter__(self) -> Generator[Event, None, None]:
        return self._events()

    def stop(self) -> None:
        """End the iteration at the next event or connection timeout."""
        self._stopped = True

    def _events(self) -> Generator[Event, None, None]:
        if self.resource_version is None:
            yield from self._relist()
        while not self._finished():
            try:
                yield from self._one_connection()
            except _Gone:
                self.relists += 1
                yield from self._relist()

    def _finished(self) -> bool:
        return self._stopped or (self._deadline is not None and self._clock() >= self._deadline)

    def _relist(self) -> Iterator[Event]:
        listing = self._source.list_path(self._path, self._selectors, shape=self._shape)
        events = relist_events(self._known, listing.items)
        self._moved_to(listing.resource_version)
        yield from events

    def _moved_to(self, version: str) -> None:
        self.resource_version = version
        if self._memory is not None:
            self._memory.resource_version = version

    def _one_connection(self) -> Iterator[Event]:
        seconds = self._connection_seconds()
        query = [
            *self._selectors,
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version or "0"),
            ("timeoutSeconds", str(seconds)),
        ]
        try:
            stream = self._source.open_stream(self._path, query, seconds + _READ_SLACK_SECONDS)
        except KubeApiError as error:
            if error.status == 410:
                raise _Gone from None
            raise
        try:
            for line in lines_of(stream):
                event = self._accept(line)
                if event is not None:
                    yield event
                if self._finished():
                    return
        except (urllib3.exceptions.ProtocolError, urllib3.exceptions.ReadTimeoutError):
            return  # the connection broke: the caller's loop reconnects from resource_version
        finally:
            stream.close()
            stream.release_conn()

    def _connection_seconds(self) -> int:
        if self._deadline is None:
            return MAX_CONNECTION_SECONDS
        remaining = self._deadline - self._clock()
        return max(1, min(MAX_CONNECTION_SECONDS, math.ceil(remaining)))

    def _accept(self, line: bytes) -> Event | None:
        """Track one raw event line; the event to yield, or None (blank line, bookmark)."""
        if not line.strip():
            return None
        event = json.loads(line)
        kind, obj = event.get("type"), event.get("object") or {}
        if self._shape is not None and kind in ("ADDED", "MODIFIED", "DELETED"):
            obj = self._shape(obj, len(line))
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone
            raise KubeApiError(
                str(obj.get("message", "watch error")),
                status=obj.get("code"),
                reason=str(obj.get("reason", "")),
                target=self._path,
            )
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self._moved_to(version)
        if kind == "BOOKMARK":
            return None
        if kind == "DELETED":
            self._known.pop(object_key(obj), None)
        else:
            self._known[object_key(obj)] = stub_of(obj)
        return kind, obj


class OpenWatches:
    """The watches a component has open, so that stopping it ends them all. A watch leaves as
    its loop ends: a component makes a new one after every error (each API server outage makes
    one a second per loop), and a list that only grew kept every one of them for good."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[KubeWatch] = set()
        self._stopped = False

    @contextlib.contextmanager
    def holding(self, watch: KubeWatch) -> Iterator[KubeWatch]:
        """WATCH is open for the block; stopped at once when stop_all() came first."""
        with self._lock:
            if self._stopped:
                watch.stop()
            self._open.add(watch)
        try:
            yield watch
        finally:
            with self._lock:
                self._open.discard(watch)

    def stop_all(self) -> None:
        with self._lock:
            self._stopped = True
            watches = list(self._open)
        for watch in watches:
            watch.stop()

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)
