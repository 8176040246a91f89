"""A Pod naming a Slurm account or QOS where Slurm accounting is off (scheduler/
accounting_decide.py): SUNK's "Schedule Kubernetes Pods with Slurm" offers the
`sunk.coreweave.com/account` and `sunk.coreweave.com/qos` annotations, and SUNK's default install
runs accounting; ours does not unless `accounting.enabled`, and then Slurm charges and enforces
neither, so the Pod is told."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.cli import build_parser
from reconciler.cli.schedule import scheduler_settings
from reconciler.scheduler.decide.accounting_decide import unaccounted
from reconciler.scheduler.settings import settings_from_values
from reconciler.scheduler.state import SchedulerState


def test_an_account_without_accounting_is_told_naming_the_key_that_turns_it_on() -> None:
    said = unaccounted("root", None, accounting=False)
    assert said == (
        "Slurm accounting is off on this cluster: sunk.coreweave.com/account='root' goes to "
        "Slurm as a plain name, which it neither charges nor enforces (any name is accepted, "
        "and sacct keeps no record of the job); turn accounting on with accounting.enabled: "
        "true in the config repo's values (slurmConfig.accounting then declares the accounts, "
        "users and QOS)"
    )


def test_account_and_qos_are_both_named() -> None:
    said = unaccounted("research", "high", accounting=False)
    assert said is not None
    assert "sunk.coreweave.com/account='research' and sunk.coreweave.com/qos='high' go to" in said


@pytest.mark.parametrize(
    ("account", "qos", "accounting"),
    [("root", "normal", True),  # accounting on: Slurm checks them itself
     ("root", "normal", None),  # not known (no config repo): nothing said
     (None, None, False), ("", "", False)],  # nothing named
)  # fmt: skip
def test_nothing_is_said_otherwise(
    account: str | None, qos: str | None, accounting: bool | None
) -> None:
    assert unaccounted(account, qos, accounting) is None


def test_settings_know_accounting_from_the_values() -> None:
    off = settings_from_values({}, release="r", namespace="n")
    on = settings_from_values({"accounting": {"enabled": True}}, release="r", namespace="n")
    assert (off.accounting, on.accounting) == (False, True)


def test_schedule_without_a_repo_does_not_know(tmp_path: Path) -> None:
    assert scheduler_settings(build_parser().parse_args(["schedule"])).accounting is None
    (tmp_path / "values.yaml").write_text("accounting: {enabled: true}\n")
    args = build_parser().parse_args(["schedule", str(tmp_path)])
    assert scheduler_settings(args).accounting is True


def test_what_a_pod_was_told_once_goes_with_the_pod() -> None:
    state = SchedulerState()
    pod = {"metadata": {"uid": "u1", "name": "p", "namespace": "ns"}, "spec": {}}
    state.on_pod("ADDED", pod)
    state.told_once.setdefault("u1", set()).add("SlurmAccountingOff")
    state.on_pod("MODIFIED", pod)
    assert state.told_once == {"u1": {"SlurmAccountingOff"}}
    state.on_pod("DELETED", pod)
    assert state.told_once == {}
