"""A forge on loopback for the CI examples' scripts: GitHub's issue comments and labels, or
GitLab's merge request notes, labels and current user, as their REST APIs answer them. It
records every request, so a test sees what the scripts sent (a leaked secret included).

GitHub lets a token that may write issues edit and delete anyone's comment; GitLab refuses to
edit another author's note (403), as the real forges do."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

BOT_LOGIN = "github-actions[bot]"  # who GITHUB_TOKEN's comments are by
BOT_ID = 7  # GitLab: the project access token's user


@dataclass(frozen=True)
class Sent:
    method: str
    path: str
    body: Any


@dataclass
class Forge:
    kind: Literal["github", "gitlab"]
    url: str = ""
    sent: list[Sent] = field(default_factory=list)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    labels: set[str] = field(default_factory=set)
    _next: int = 100

    def add_comment(self, body: str, *, by_bot: bool) -> int:
        """A comment (GitHub) or note (GitLab) already on the request."""
        self._next += 1
        if self.kind == "github":
            user = (
                {"login": BOT_LOGIN, "type": "Bot"}
                if by_bot
                else {"login": "mallory", "type": "User"}
            )
            self.comments[self._next] = {"id": self._next, "body": body, "user": user}
        else:
            author = {"id": BOT_ID if by_bot else 99, "username": "bot" if by_bot else "mallory"}
            self.comments[self._next] = {
                "id": self._next,
                "body": body,
                "author": author,
                "system": False,
            }
        return self._next

    def everything_sent(self) -> str:
        return json.dumps([(s.method, s.path, s.body) for s in self.sent])

    def answer(
        self, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        self.sent.append(Sent(method, path, body))
        return (self._github if self.kind == "github" else self._gitlab)(method, path, query, body)

    def _page(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        size, page = int(query.get("per_page", ["30"])[0]), int(query.get("page", ["1"])[0])
        return list(self.comments.values())[(page - 1) * size : page * size]

    def _new(self, body: str, author: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        key = "user" if self.kind == "github" else "author"
        self.comments[self._next] = {"id": self._next, "body": body, key: author}
        return self.comments[self._next]

    def _github(
        self, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        if re.fullmatch(r"/repos/[^/]+/[^/]+/issues/\d+/comments", path):
            if method == "GET":
                return 200, self._page(query)
            return 201, self._new(body["body"], {"login": BOT_LOGIN, "type": "Bot"})
        if found := re.fullmatch(r"/repos/[^/]+/[^/]+/issues/comments/(\d+)", path):
            comment = self.comments.get(int(found[1]))
            if comment is None:
                return 404, {"message": "Not Found"}
            if method == "DELETE":
                del self.comments[comment["id"]]
                return 204, None
            comment["body"] = body["body"]
            return 200, comment
        if re.fullmatch(r"/repos/[^/]+/[^/]+/issues/\d+/labels", path):
            self.labels |= set(body["labels"])
            return 200, [{"name": n} for n in sorted(self.labels)]
        if found := re.fullmatch(r"/repos/[^/]+/[^/]+/issues/\d+/labels/(.+)", path):
            if unquote(found[1]) not in self.labels:
                return 404, {"message": "Label does not exist"}
            self.labels.discard(unquote(found[1]))
            return 200, []
        return 404, {"message": f"no such route {method} {path}"}

    def _gitlab(
        self, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        if path == "/api/v4/user":
            return 200, {"id": BOT_ID, "username": "bot"}
        notes = r"/api/v4/projects/\d+/merge_requests/\d+/notes"
        if re.fullmatch(notes, path):
            if method == "GET":
                return 200, self._page(query)
            return 201, self._new(body["body"], {"id": BOT_ID, "username": "bot"})
        if found := re.fullmatch(notes + r"/(\d+)", path):
            note = self.comments.get(int(found[1]))
            if note is None:
                return 404, {"message": "404 Not found"}
            if method == "DELETE":
                del self.comments[note["id"]]
                return 204, None
            if note["author"]["id"] != BOT_ID:
                return 403, {"message": "403 Forbidden"}
            note["body"] = body["body"]
            return 200, note
        if re.fullmatch(r"/api/v4/projects/\d+/merge_requests/\d+", path) and method == "PUT":
            self.labels -= set(filter(None, body.get("remove_labels", "").split(",")))
            self.labels |= set(filter(None, body.get("add_labels", "").split(",")))
            return 200, {"labels": sorted(self.labels)}
        return 404, {"message": f"no such route {method} {path}"}


@contextmanager
def forge_on_loopback(kind: Literal["github", "gitlab"]) -> Iterator[Forge]:
    forge = Forge(kind)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            split = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            with lock:
                status, data = forge.answer(
                    self.command,
                    split.path,
                    parse_qs(split.query),
                    json.loads(raw) if raw else None,
                )
            payload = b"" if data is None else json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    forge.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield forge
    finally:
        server.shutdown()
        server.server_close()
