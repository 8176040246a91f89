"""What a Kubernetes object is to this code: its decoded JSON. One alias for every module (the
pure core, the adapters, the local stack, the scheduler) so they read and hand on the same
type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]  # an object as decoded, which its holder may change
ReadObj = Mapping[str, Any]  # an object only read
