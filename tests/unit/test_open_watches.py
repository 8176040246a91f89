"""OpenWatches: the watches a component has open, for its stop to end them all."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters.kube_watch import KubeWatch, OpenWatches


class _NoSource:
    def list_path(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("never listed")

    def open_stream(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("never opened")


def _watch() -> KubeWatch:
    return KubeWatch(_NoSource(), "/api/v1/pods", selectors=[], resource_version="1",
                     timeout_seconds=None)  # fmt: skip


def test_a_watch_leaves_when_its_loop_ends_however_it_ends() -> None:
    watches = OpenWatches()
    for _ in range(100):  # a loop that fails and makes a new watch, as in an outage
        with pytest.raises(RuntimeError), watches.holding(_watch()):
            assert len(watches) == 1
            raise RuntimeError("API server unreachable")
    assert len(watches) == 0


def test_stop_all_stops_the_open_ones_and_any_opened_after() -> None:
    watches = OpenWatches()
    first = _watch()
    with watches.holding(first):
        watches.stop_all()
        assert list(first) == []  # stopped: it ends without a connection
    late = _watch()
    with watches.holding(late):
        assert list(late) == []
