"""For a daemon under test that must never reach a cluster: its converger's connection."""

from __future__ import annotations

from reconciler.pipeline.clients import Clients


def unconnected() -> Clients:
    raise AssertionError("this test's converger connects to no cluster")
