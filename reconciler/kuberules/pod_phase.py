"""Whether a Pod still holds anything, by its phase (pure): a Pod that succeeded or failed holds
nothing, as kube-scheduler's cache and the kubelet count it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})


def finished(pod: Mapping[str, Any]) -> bool:
    """The Pod succeeded or failed: it holds nothing any more."""
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES
