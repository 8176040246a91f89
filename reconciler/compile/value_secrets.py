"""Secrets whose data a values file gives (directoryService's `user.password`): rendered and
planned without their data, sent whole only to the API server.

Unlike generated Secrets (secrets.py), apply keeps these equal to values: created when missing,
updated when the live data differs. The comparison is by digest, in memory; neither the data
nor its digest is ever in a render, a plan or a log.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler import wellknown as wk
from reconciler.compile.secrets import secret_manifest


@dataclass(frozen=True)
class ValueSecret:
    name: str
    namespace: str
    release: str
    key: str  # the one data key
    source: str  # the values key the data comes from, for the user
    data: str = field(repr=False)

    def manifest(self) -> dict[str, Any]:
        """The Secret as render and plan show it: metadata only."""
        described = {wk.ANNOTATION_FROM_VALUES: f"{self.key}: {self.source}"}
        return secret_manifest(self.name, self.namespace, self.release, described)

    def with_data(self) -> dict[str, Any]:
        """What apply sends: the manifest and its data."""
        return {**self.manifest(), "data": {self.key: _b64(self.data.encode())}}

    def digest(self) -> str:
        return data_digest({self.key: self.data.encode()})


def data_digest(data: Mapping[str, bytes]) -> str:
    """Of a Secret's decoded data: equal exactly when the data is."""
    digest = hashlib.sha256()
    for key in sorted(data):
        digest.update(hashlib.sha256(key.encode()).digest())
        digest.update(hashlib.sha256(data[key]).digest())
    return digest.hexdigest()


def live_digest(secret: Mapping[str, Any]) -> str:
    data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
    return data_digest(data)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()
