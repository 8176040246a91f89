"""Push webhooks: only the forge with the shared secret is heard, and only pushes to our branch
start a fetch. Bodies and headers as GitHub, Gitea and GitLab send them."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from reconciler.daemon.webhook import judge

SECRET = b"s3cret"
PUSH = json.dumps({"ref": "refs/heads/main", "after": "abc"}).encode()


def sign(body: bytes, secret: bytes = SECRET) -> str:
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Hub-Signature-256": f"sha256={sign(PUSH)}", "X-GitHub-Event": "push"},
        {"X-Gitea-Signature": sign(PUSH), "X-Gitea-Event": "push"},
        {"X-Gitlab-Token": "s3cret", "X-Gitlab-Event": "Push Hook"},
    ],
)
def test_a_signed_push_to_our_branch_fetches(headers: dict[str, str]) -> None:
    verdict = judge(headers, PUSH, SECRET, "main")
    assert (verdict.status, verdict.fetch) == (202, True)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Hub-Signature-256": f"sha256={sign(PUSH, b'other')}"},
        {"X-Hub-Signature-256": sign(PUSH + b" ")},
        {"X-Gitea-Signature": "0" * 64},
        {"X-Gitlab-Token": "guess"},
    ],
)
def test_unsigned_or_wrongly_signed_requests_are_refused(headers: dict[str, str]) -> None:
    verdict = judge(headers, PUSH, SECRET, "main")
    assert (verdict.status, verdict.fetch) == (401, False)


def test_a_push_to_another_branch_or_a_ping_does_nothing() -> None:
    other = json.dumps({"ref": "refs/heads/dev"}).encode()
    ping = json.dumps({"zen": "Keep it simple."}).encode()
    for body in (other, ping):
        verdict = judge({"X-Hub-Signature-256": f"sha256={sign(body)}"}, body, SECRET, "main")
        assert (verdict.status, verdict.fetch) == (202, False), verdict


def test_a_signed_body_that_is_not_json_is_a_bad_request() -> None:
    verdict = judge({"X-Gitea-Signature": sign(b"{")}, b"{", SECRET, "main")
    assert verdict.status == 400
