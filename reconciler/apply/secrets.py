"""The data of a generated Secret: made here, once, and sent only to the API server."""

from __future__ import annotations

import base64
import secrets
import string
from typing import Any

from reconciler.compile.secrets import GeneratedSecret

_PASSWORD_ALPHABET = string.ascii_letters + string.digits


def generate(spec: GeneratedSecret) -> dict[str, Any]:
    """The Secret with fresh random data (os-level randomness, via `secrets`)."""
    if spec.text:
        raw = "".join(secrets.choice(_PASSWORD_ALPHABET) for _ in range(spec.size)).encode()
    else:
        raw = secrets.token_bytes(spec.size)
    return {**spec.manifest(), "data": {spec.key: base64.b64encode(raw).decode()}}
