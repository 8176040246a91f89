"""The status ConfigMap's data: camelCase keys a kubectl user reads, and a lossless round trip."""

from __future__ import annotations

from reconciler.daemon.status import Status, status_name


def test_status_round_trips_through_configmap_data() -> None:
    status = Status(revision="abc", state="failed", error="values.yaml:3: bad", drift_corrected="2")
    data = status.as_data()
    assert data["appliedRevision"] == "" and data["driftCorrected"] == "2"
    assert Status.from_data(data) == status


def test_status_configmap_is_named_for_the_release() -> None:
    assert status_name("slurm") == "slurm-reconciler-status"
