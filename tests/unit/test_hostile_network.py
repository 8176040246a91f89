"""Issue 31, the network and the config source: hostile clients and hostile pushes, each
reproduced as an attacker would do it (real sockets on 127.0.0.1, real git repositories)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from reconciler.cli.run import _webhook_secret
from reconciler.daemon.webhook import judge
from reconciler.errors import ReconcilerError

# ---- item 6: an empty webhook secret file -----------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"\n", b"  \t\r\n"])
def test_an_empty_webhook_secret_file_stops_startup(tmp_path: Path, content: bytes) -> None:
    secret = tmp_path / "webhook-secret"
    secret.write_bytes(content)
    with pytest.raises(ReconcilerError) as caught:
        _webhook_secret(argparse.Namespace(webhook_secret_file=secret))
    assert str(secret) in caught.value.message and "empty" in caught.value.message
    assert "\n" not in caught.value.message


def test_an_empty_secret_authenticates_nothing() -> None:
    """Defence in depth: were an empty secret ever to reach the webhook, the HMAC of a body
    under an empty key (which anyone can compute) is not accepted."""
    import hashlib
    import hmac

    body = b'{"ref": "refs/heads/main"}'
    forged = hmac.new(b"", body, hashlib.sha256).hexdigest()
    for headers in ({"X-Hub-Signature-256": f"sha256={forged}"}, {"X-Gitea-Signature": forged},
                    {"X-Gitlab-Token": ""}):  # fmt: skip
        assert judge(headers, body, b"", "main").status == 401
