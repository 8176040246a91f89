"""Whether Slurm accounting is on, and the plan's word on what a repo relies on it for while it
is off, or on and not enforced (pure).

SUNK's default install runs accounting: the listing on SUNK's "Slurm Workload Manager" page
shows `slurm-accounting` and `slurm-mysql-0` Pods. Ours renders no slurmdbd or database unless
`accounting.enabled` is true (docs/values.md says why). Without it slurmctld keeps a job's
account and QOS as plain names and checks neither (an unknown `--account` or `--qos` is
accepted), `sacct` has no record, and `slurmConfig.accounting` has no slurmdbd to be applied
to. A repo written for SUNK's default may rely on all of that without knowing it is off: each
such reliance is a warning naming where it is written and the key that turns accounting on.

With accounting on, Slurm still takes any account or QOS a job names until
AccountingStorageEnforce includes associations; we do not set it for you, since it refuses
every job of a user with no association (the scheduler's Pods' users included), so declared
accounts without it are a warning too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler import wellknown as wk
from reconciler.compile.accounting import Accounting
from reconciler.compile.node_memory import conf_setting
from reconciler.compile.slurm_conf import Partition
from reconciler.compile.slurmdbd import accounting_plan
from reconciler.config.policy_file import Override, Policy
from reconciler.errors import Location, Warning_

ACCOUNTING_KEY = "accounting.enabled"  # what turns accounting on (slurmdbd, and its database)
_OFF = ("", "accounting_storage/none")
# Partition options Slurm checks against the accounts and QOS slurmdbd keeps.
_PARTITION_OPTIONS = ("AllowAccounts", "DenyAccounts", "AllowQos", "DenyQos", "QOS")
# slurm.conf settings that do something only with accounting: each with the values it has off.
_CONF_SETTINGS = {"AccountingStorageEnforce": ("", "0", "none"),
                  "PriorityWeightFairshare": ("", "0"), "PriorityWeightQOS": ("", "0")}  # fmt: skip
_ANNOTATIONS = (wk.ANNOTATION_ACCOUNT, wk.ANNOTATION_QOS)
# AccountingStorageEnforce words that check a job's association (Slurm's slurm.conf page:
# limits, qos, safe and all each set associations too).
_ENFORCING = frozenset({"associations", "limits", "qos", "safe", "all"})


def accounting_on(values: Mapping[str, Any]) -> bool:
    """slurm.conf names an accounting storage: `accounting.enabled`, or an extraConfig
    AccountingStorageType (which replaces ours)."""
    extra = str((values.get("slurmConfig") or {}).get("extraConfig") or "")
    written = conf_setting(extra, "AccountingStorageType")
    if written is not None:
        return written.lower() not in _OFF
    return accounting_plan("", dict(values)).enabled


def accounting_off_warnings(
    values: Mapping[str, Any],
    accounting: Accounting,
    partitions: Iterable[Partition],
    partitions_where: str,
    slurm_conf: str,
    policies: Iterable[Policy | Override],
) -> list[Warning_]:
    """One warning per thing the repo relies on accounting for, when it is off."""
    if accounting_on(values):
        return unenforced_warnings(accounting, slurm_conf)
    warnings = []
    declared = [e.where for group in (accounting.qos, accounting.accounts, accounting.users)
                for e in group]  # fmt: skip
    if declared:
        warnings.append(_off(declared[0], "slurmConfig.accounting declares accounts, users or "
                             "QOS", "there is no slurmdbd to apply them to"))  # fmt: skip
    for partition in partitions:
        used = [key for key in _PARTITION_OPTIONS if partition.option(key) is not None]
        if used:
            warnings.append(_off(partitions_where, f"partition {partition.name!r} sets "
                                 f"{', '.join(used)}", "Slurm takes any account or QOS name a "
                                 "job gives, so it restricts no one"))  # fmt: skip
    for key, off in _CONF_SETTINGS.items():
        value = conf_setting(slurm_conf, key)
        if value is not None and value.lower() not in off:
            warnings.append(_off("slurmConfig.extraConfig", f"slurm.conf sets {key}={value}",
                                 "it has no associations, QOS or usage to work on"))  # fmt: skip
    preempt = conf_setting(slurm_conf, "PreemptType")
    if preempt is not None and preempt.lower() == "preempt/qos":
        warnings.append(_off("slurmConfig.extraConfig", f"slurm.conf sets PreemptType={preempt}",
                             "no QOS exists to preempt by"))  # fmt: skip
    for policy in policies:
        reading = _reading_annotations(policy) if isinstance(policy, Policy) else None
        if reading is not None:
            warnings.append(_off(str(reading), f"policy {policy.name!r} reads "
                                 f"{' or '.join(_ANNOTATIONS)}", "the account or QOS a Pod "
                                 "names is neither charged nor enforced by Slurm"))  # fmt: skip
    return warnings


def unenforced_warnings(accounting: Accounting, slurm_conf: str) -> list[Warning_]:
    """Accounts or users declared while Slurm checks no job against them (accounting on)."""
    declared = [e.where for group in (accounting.accounts, accounting.users) for e in group]
    enforce = conf_setting(slurm_conf, "AccountingStorageEnforce") or ""
    if not declared or _ENFORCING & {w.strip().lower() for w in enforce.split(",")}:
        return []
    return [Warning_(declared[0], "slurmConfig.accounting declares accounts or users, and "
                     "Slurm charges jobs to them but lets a job name any account or QOS "
                     f"(AccountingStorageEnforce={enforce or 'unset'}): add "
                     "AccountingStorageEnforce=associations (with limits,qos to apply QOS "
                     "limits) to slurmConfig.extraConfig")]  # fmt: skip


def _reading_annotations(policy: Policy) -> Location | None:
    """Where the policy's first CEL expression that names the account or QOS annotation is."""
    expressions = [c.expression for c in policy.match_conditions]
    for v in policy.validations:
        expressions += [v.expression, *([v.message_expression] if v.message_expression else [])]
    found = (e for e in expressions if any(key in e.text for key in _ANNOTATIONS))
    return next((e.where for e in found), None)


def _off(where: str, what: str, consequence: str) -> Warning_:
    return Warning_(where, f"{what}, but Slurm accounting is off ({ACCOUNTING_KEY} is not true; "
                    "SUNK's default install runs it, ours does not): "
                    f"{consequence}; set {ACCOUNTING_KEY}: true to run slurmdbd and its "
                    "database")  # fmt: skip
