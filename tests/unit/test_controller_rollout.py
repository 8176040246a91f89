"""When a restarted controller Deployment counts as rolled out: `kubectl rollout status`'s
rule, over Deployment objects as the API server returns them."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.apply.controller import rolled_out


def deployment(wanted: int = 1, **status: int) -> dict[str, Any]:
    return {"spec": {"replicas": wanted}, "status": status}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        # The Deployment controller has not seen the patch yet: the old Pod's readiness counts
        # for nothing.
        (deployment(observedGeneration=1, updatedReplicas=1, replicas=1, readyReplicas=1), False),
        # Recreate: the old Pod is gone, the new one not ready yet.
        (deployment(observedGeneration=2, updatedReplicas=1, replicas=1, readyReplicas=0), False),
        # The new Pod exists beside an old one still terminating.
        (deployment(observedGeneration=2, updatedReplicas=1, replicas=2, readyReplicas=1), False),
        (deployment(observedGeneration=2, updatedReplicas=1, replicas=1, readyReplicas=1), True),
        (deployment(observedGeneration=3, updatedReplicas=1, replicas=1, readyReplicas=1), True),
        # replicas: 0 (the controller scaled down in values): nothing to wait for.
        (deployment(0, observedGeneration=2), True),
        # No status at all (a Deployment just created).
        ({"spec": {"replicas": 1}}, False),
    ],
)
def test_rolled_out(obj: dict[str, Any], expected: bool) -> None:
    assert rolled_out(obj, generation=2) is expected
