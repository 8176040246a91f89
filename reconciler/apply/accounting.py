"""Apply the accounting part of a plan with sacctmgr: QOS, accounts, users, then deletions.

Order: QOS are created and updated first without their preempt lists (a QOS may preempt one
created in the same run), then the preempt lists are set; accounts parents first (the plan's
order); users and their associations (add, default account, then removal of associations with
accounts of ours); deletions last: users, accounts (children first), QOS.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reconciler.adapters.sacctmgr import Sacctmgr
from reconciler.errors import ReconcilerError
from reconciler.plan.model import SLURM_ACCOUNT, SLURM_QOS, SLURM_USER, Action, Change, Plan

Say = Callable[[str], None]
KINDS = {SLURM_QOS: "qos", SLURM_ACCOUNT: "account", SLURM_USER: "user"}


class AccountingApplyError(ReconcilerError):
    """An accounting change apply refuses or could not make."""


def accounting_changes_of(plan: Plan) -> list[Change]:
    return [c for c in plan.changes if c.ref.kind in KINDS]


def refuse_busy_accounts(changes: Sequence[Change], sacctmgr: Sacctmgr | None) -> None:
    """Before any change: an account of ours that goes away must have no jobs."""
    deleted = [
        c.ref.name for c in changes if c.ref.kind == SLURM_ACCOUNT and c.action is Action.DELETE
    ]
    if not changes:
        return
    if sacctmgr is None:
        raise AccountingApplyError(
            "the plan changes Slurm accounts, users or QOS, but this target has no sacctmgr",
            hint="enable accounting (slurmdbd) on the cluster",
        )
    busy = {name: sacctmgr.jobs_of_account(name) for name in deleted}
    busy = {name: jobs for name, jobs in busy.items() if jobs}
    if busy:
        text = "; ".join(
            f"account {name} has jobs {', '.join(jobs)}" for name, jobs in busy.items()
        )
        raise AccountingApplyError(
            f"refusing to delete Slurm accounts that still have jobs: {text}",
            hint="wait for the jobs to finish (or scancel them), or keep the account in git; "
            "nothing was changed",
        )


def apply_accounting(changes: Sequence[Change], sacctmgr: Sacctmgr, say: Say) -> None:
    kept = [c for c in changes if c.action is not Action.DELETE]
    for change in (c for c in kept if c.ref.kind == SLURM_QOS):
        options = {k: v for k, v in (change.desired or {}).items() if k != "Preempt"}
        if change.action is Action.CREATE:
            sacctmgr.add_qos(change.ref.name, options)
            say(f"created QOS {change.ref.name}")
        elif options:
            sacctmgr.modify_qos(change.ref.name, options)
            say(f"updated QOS {change.ref.name}")
    for change in (c for c in kept if c.ref.kind == SLURM_QOS):
        if "Preempt" in (change.desired or {}):
            sacctmgr.modify_qos(change.ref.name, {"Preempt": change.desired["Preempt"]})
            preempt = ", ".join(change.desired["Preempt"]) or "nothing"
            say(f"QOS {change.ref.name} preempts {preempt}")
    for change in (c for c in kept if c.ref.kind == SLURM_ACCOUNT):
        if change.action is Action.CREATE:
            sacctmgr.add_account(change.ref.name, change.desired)
            say(f"created account {change.ref.name}")
        else:
            sacctmgr.modify_account(change.ref.name, change.desired)
            say(f"updated account {change.ref.name}")
    for change in (c for c in kept if c.ref.kind == SLURM_USER):
        _apply_user(change, sacctmgr, say)
    gone = [c for c in changes if c.action is Action.DELETE]
    for kind in (SLURM_USER, SLURM_ACCOUNT, SLURM_QOS):
        for change in (c for c in gone if c.ref.kind == kind):
            done = sacctmgr.delete(KINDS[kind], change.ref.name)
            what = f"{KINDS[kind] if kind != SLURM_QOS else 'QOS'} {change.ref.name}"
            say(f"deleted {what}" if done else f"{what} was already gone")


def _apply_user(change: Change, sacctmgr: Sacctmgr, say: Say) -> None:
    name, desired = change.ref.name, change.desired or {}
    if change.action is Action.CREATE:
        sacctmgr.add_user(name, desired["Accounts"], desired.get("DefaultAccount"))
        say(f"created user {name} in {', '.join(desired['Accounts'])}")
        return
    if desired.get("Add"):
        sacctmgr.add_user(name, desired["Add"], None)
        say(f"user {name}: added to {', '.join(desired['Add'])}")
    if desired.get("DefaultAccount"):
        sacctmgr.modify_user(name, {"DefaultAccount": desired["DefaultAccount"]})
        say(f"user {name}: default account {desired['DefaultAccount']}")
    for account in desired.get("Remove") or ():
        sacctmgr.delete("user", name, account=account)
        say(f"user {name}: removed from {account}")
