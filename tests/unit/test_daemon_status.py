"""The status ConfigMap's data: camelCase keys a kubectl user reads, and a lossless round trip."""

from __future__ import annotations

from reconciler.daemon.status import Status, status_name


def test_status_round_trips_through_configmap_data() -> None:
    status = Status(revision="abc", state="failed", error="values.yaml:3: bad", drift_corrected="2")
    data = status.as_data()
    assert data["appliedRevision"] == "" and data["driftCorrected"] == "2"
    assert Status.from_data(data) == status
    names = Status(scheduler_names="slurm-slurm-slurm-scheduler, slurm-slurm")
    assert names.as_data()["schedulerNames"] == "slurm-slurm-slurm-scheduler, slurm-slurm"


def test_status_configmap_is_named_for_the_release() -> None:
    assert status_name("slurm") == "slurm-reconciler-status"


def test_no_credential_in_a_url_reaches_the_configmap() -> None:
    """The origin and an error quoting the remote, as git writes them."""
    token = "ghp_0123456789abcdefTOKEN"
    status = Status(
        origin=f"git https://{token}@git.example.org/hpc/config.git@main",
        error=f"cannot fetch branch 'main' of https://x-access-token:{token}@github.com/o/r.git:"
        f"\n  fatal: unable to access 'https://{token}@github.com/o/r.git/': 403",
    )
    data = status.as_data()
    assert token not in str(data)
    assert data["origin"] == "git https://***@git.example.org/hpc/config.git@main"
    assert data["error"].endswith(
        "\n  fatal: unable to access 'https://***@github.com/o/r.git/': 403"
    )
