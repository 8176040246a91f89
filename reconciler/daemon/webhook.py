"""Push webhooks from GitHub, Gitea and GitLab: is this request from the forge (shared
secret), and is it a push to our branch? Pure: headers and body in, a verdict out.

- GitHub: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 of the body;
- Gitea (and Forgejo): `X-Gitea-Signature: <hex>`, the same HMAC without the prefix;
- GitLab: `X-Gitlab-Token: <secret>`, the secret itself.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    status: int  # HTTP status to answer
    message: str
    fetch: bool = False  # a push to our branch: fetch now


def judge(headers: Mapping[str, str], body: bytes, secret: bytes, branch: str) -> Verdict:
    lower = {k.lower(): v for k, v in headers.items()}
    if not _authentic(lower, body, secret):
        return Verdict(401, "signature missing or wrong")
    try:
        payload = json.loads(body or b"{}")
    except ValueError:
        return Verdict(400, "the body is not JSON")
    ref = payload.get("ref") if isinstance(payload, dict) else None
    if ref is None:
        return Verdict(202, "not a push (no ref): nothing to do")
    if ref != f"refs/heads/{branch}":
        return Verdict(202, f"a push to {ref}, not to {branch}: nothing to do")
    return Verdict(202, f"a push to {branch}: fetching", fetch=True)


def _authentic(headers: Mapping[str, str], body: bytes, secret: bytes) -> bool:
    if not secret:  # anyone can sign with an empty key; startup refuses one, this is a backstop
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
    if "x-hub-signature-256" in headers:
        given = headers["x-hub-signature-256"].removeprefix("sha256=").strip()
        return hmac.compare_digest(expected, given.encode())
    if "x-gitea-signature" in headers:
        return hmac.compare_digest(expected, headers["x-gitea-signature"].strip().encode())
    if "x-gitlab-token" in headers:
        return hmac.compare_digest(secret, headers["x-gitlab-token"].encode())
    return False
