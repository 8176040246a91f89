"""kube-scheduler 1.20.2's own verdicts, replayed against kuberules.feasibility without a
control plane.

Each row of data/kube_scheduler_verdicts.json is an example the differential test
(tests/integration/test_kube_scheduler_oracle.py) gave the real kube-scheduler, with what it
did: the Node it bound the Pod to, or its FailedScheduling message. The rows were picked to
cover every reason kube-scheduler gave and every kind of rule that let a Pod through; the
first ones are counter-examples the oracle found in our code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.kuberules.feasibility import filter_nodes, unavailable_message

ROWS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "kube_scheduler_verdicts.json").read_text()
)


@pytest.mark.parametrize("row", ROWS, ids=[row["name"] for row in ROWS])
def test_we_agree_with_kube_scheduler(row: dict[str, Any]) -> None:
    reasons = filter_nodes(row["pod"], row["nodes"], row["bound"])
    if row["node"]:
        assert reasons[row["node"]] == [], reasons
    else:
        assert unavailable_message(reasons) == row["message"]


def test_the_rows_cover_both_verdicts_and_every_filter() -> None:
    bound = [row for row in ROWS if row["node"]]
    messages = " ".join(row["message"] for row in ROWS)
    assert len(bound) >= 5 and len(ROWS) - len(bound) >= 10
    for reason in ("were unschedulable", "had taint", "Pod's node affinity", "Insufficient",
                   "spread constraints", "pod affinity rules"):  # fmt: skip
        assert reason in messages, reason
