"""What a repo relies on Slurm accounting for while it is off (compile/accounting_off.py).

SUNK's default install runs accounting (the `slurm-accounting` and `slurm-mysql-0` Pods of the
listing on SUNK's "Slurm Workload Manager" page); ours does not unless `accounting.enabled`.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconciler.compile.accounting_off import accounting_on
from reconciler.compile.desired import DesiredState

OFF = "but Slurm accounting is off (accounting.enabled is not true; SUNK's default install runs it"
FIX = "set accounting.enabled: true to run slurmdbd and its database"
ACCOUNTS = """\
slurmConfig:
  accounting:
    accounts:
      research: {description: Research}
    users:
      alice: {accounts: [research]}
"""
PARTITIONS = """\
compute:
  partitions: |
    PartitionName=all Nodes=ALL Default=YES
    PartitionName=paid Nodes=ALL AllowAccounts=research AllowQos=normal
"""
EXTRA = """\
slurmConfig:
  extraConfig: |
    AccountingStorageEnforce=associations,limits,qos
    PreemptType=preempt/qos
    PriorityWeightFairshare=0
"""
# A repo policy a SUNK user might write: every Pod names the account it is charged to.
POLICY = """\
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata:
  name: pods-name-an-account
spec:
  target: pod
  validationActions: [Deny]
  validations:
    - expression: >-
        has(object.metadata.annotations) &&
        'sunk.coreweave.com/account' in object.metadata.annotations
      message: every Pod names its Slurm account
"""


def _off(state: DesiredState) -> list[str]:
    return [str(w) for w in state.warnings if OFF in str(w)]


def test_declared_accounts_without_accounting_are_warned_where_written(
    compile_values: Callable[..., DesiredState],
) -> None:
    [warning] = _off(compile_values(ACCOUNTS))
    assert warning.startswith("values.yaml:4: warning: slurmConfig.accounting declares accounts, "
                              f"users or QOS, {OFF}")  # fmt: skip
    assert warning.endswith(f"there is no slurmdbd to apply them to; {FIX}")


def test_partition_account_and_qos_options_without_accounting_are_warned(
    compile_values: Callable[..., DesiredState],
) -> None:
    [warning] = _off(compile_values(PARTITIONS))
    assert warning.startswith("values.yaml:2 (compute.partitions): warning: partition 'paid' "
                              f"sets AllowAccounts, AllowQos, {OFF}")  # fmt: skip
    assert "Slurm takes any account or QOS name a job gives, so it restricts no one" in warning


def test_slurm_conf_settings_that_need_accounting_are_warned_and_a_zero_weight_is_not(
    compile_values: Callable[..., DesiredState],
) -> None:
    warnings = _off(compile_values(EXTRA))
    assert [w.split(", but")[0] for w in warnings] == [
        "slurmConfig.extraConfig: warning: slurm.conf sets "
        "AccountingStorageEnforce=associations,limits,qos",
        "slurmConfig.extraConfig: warning: slurm.conf sets PreemptType=preempt/qos",
    ]


def test_a_repo_policy_reading_the_account_annotation_is_warned(
    compile_values: Callable[..., DesiredState],
) -> None:
    [warning] = _off(compile_values("{}\n", {"policies/accounts.yaml": POLICY}))
    assert warning.startswith(
        "policies/accounts.yaml:9 (spec.validations[0].expression): warning: policy "
        "'pods-name-an-account' reads sunk.coreweave.com/account or sunk.coreweave.com/qos"
    )
    assert "the account or QOS a Pod names is neither charged nor enforced by Slurm" in warning


@pytest.mark.parametrize(
    "on",
    ["accounting: {enabled: true}\n",
     "slurmConfig:\n  extraConfig: |\n    AccountingStorageType=accounting_storage/slurmdbd\n"],
)  # fmt: skip
def test_nothing_is_warned_with_accounting_on(
    compile_values: Callable[..., DesiredState], on: str
) -> None:
    accounts = ACCOUNTS.replace("slurmConfig:\n", "") if on.startswith("slurmConfig") else ACCOUNTS
    both = on + accounts
    state = compile_values(both + PARTITIONS, {"policies/accounts.yaml": POLICY})
    assert _off(state) == []


def test_a_repo_that_relies_on_nothing_is_not_warned(
    compile_values: Callable[..., DesiredState],
) -> None:
    assert _off(compile_values("{}\n")) == []


@pytest.mark.parametrize(
    ("values", "on"),
    [({}, False), ({"accounting": {"enabled": True}}, True),
     ({"accounting": {"enabled": True},
       "slurmConfig": {"extraConfig": "AccountingStorageType=accounting_storage/none\n"}}, False),
     ({"slurmConfig": {"extraConfig": "accountingstoragetype=accounting_storage/slurmdbd"}},
      True)],
)  # fmt: skip
def test_accounting_on_follows_the_key_and_an_extra_config_line(
    values: dict[str, object], on: bool
) -> None:
    assert accounting_on(values) is on


UNENFORCED = "Slurm charges jobs to them but lets a job name any account or QOS"


@pytest.mark.parametrize(
    ("enforce", "warned"),
    # Slurm's slurm.conf page: limits, qos, safe and all each set associations too.
    [("", True), ("AccountingStorageEnforce=wckeys\n", True),
     ("AccountingStorageEnforce=nojobs\n", True),
     ("AccountingStorageEnforce=associations\n", False),
     ("AccountingStorageEnforce=limits\n", False), ("AccountingStorageEnforce=QOS\n", False),
     ("AccountingStorageEnforce=safe\n", False), ("AccountingStorageEnforce=all\n", False),
     ("AccountingStorageEnforce=associations,limits,qos\n", False)],
)  # fmt: skip
def test_declared_accounts_slurm_does_not_enforce_are_warned(
    compile_values: Callable[..., DesiredState], enforce: str, warned: bool
) -> None:
    extra = "  extraConfig: |\n    " + enforce if enforce else ""
    state = compile_values("accounting: {enabled: true}\n" + ACCOUNTS + extra)
    found = [str(w) for w in state.warnings if UNENFORCED in str(w)]
    if not warned:
        assert found == []
        return
    [warning] = found
    assert warning.startswith("values.yaml:5: warning: slurmConfig.accounting declares accounts")
    assert warning.endswith("add AccountingStorageEnforce=associations (with limits,qos to "
                            "apply QOS limits) to slurmConfig.extraConfig")  # fmt: skip
