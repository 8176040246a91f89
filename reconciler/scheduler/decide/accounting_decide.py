"""Pods that name a Slurm account or QOS on a cluster without Slurm accounting (pure).

SUNK's default install runs accounting, and its "Schedule Kubernetes Pods with Slurm" page
offers `sunk.coreweave.com/account` ("List available accounts with sacctmgr list account") and
`sunk.coreweave.com/qos`. Ours runs it only with `accounting.enabled`. Without it slurmctld takes
any account or QOS name as plain text: the job carries it, nothing is charged, no limit or
access is enforced, and `sacct` has no record. The Pod still runs, so nothing would say so: a
Warning Event tells it, once per Pod (intake.py), naming the key that turns accounting on.

`accounting` is what the scheduler knows (settings.py): True or False from the config repo's
values, None when it runs without a repo (then nothing is said).
"""

from __future__ import annotations

from reconciler import wellknown as wk
from reconciler.compile.accounting_off import ACCOUNTING_KEY


def unaccounted(account: str | None, qos: str | None, accounting: bool | None) -> str | None:
    """The Event's message for a Pod that names `account` or `qos`, or None: nothing to say."""
    if accounting is not False:
        return None
    named = [f"{key}={value!r}" for key, value in ((wk.ANNOTATION_ACCOUNT, account),
                                                   (wk.ANNOTATION_QOS, qos)) if value]  # fmt: skip
    if not named:
        return None
    return (
        f"Slurm accounting is off on this cluster: {' and '.join(named)} "
        f"{'goes' if len(named) == 1 else 'go'} to Slurm as a plain name, which it neither "
        "charges nor enforces (any name is accepted, and sacct keeps no record of the job); "
        f"turn accounting on with {ACCOUNTING_KEY}: true in the config repo's values "
        "(slurmConfig.accounting then declares the accounts, users and QOS)"
    )
