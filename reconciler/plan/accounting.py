"""Slurm accounting (QOS, accounts, users and their associations): desired x live -> changes.

Ownership: what git declares is managed (created, updated, and marked ours). Accounts and QOS of
ours carry our marker at the end of their description (wellknown.accounting_marker); those gone
from git are deleted. A user is ours when every association it has is with an account of ours;
one gone from git is deleted. Anything else Slurm holds and git does not is reported as a warning
and left alone (slurmdbd's own `root` account and user and `normal` QOS silently).

`Change.desired` holds what apply sends to sacctmgr (adapters/sacctmgr.py option names).
"""

from __future__ import annotations

from typing import Any

from reconciler.compile.accounting import (
    DEFAULT_QOS,
    ROOT_ACCOUNT,
    Account,
    Accounting,
    Qos,
    Tres,
    User,
    depth,
)
from reconciler.compile.desired import DesiredState
from reconciler.plan.fields import field_changes
from reconciler.plan.live import LiveAccounting, LiveState
from reconciler.plan.model import (
    SLURM,
    SLURM_ACCOUNT,
    SLURM_QOS,
    SLURM_USER,
    Action,
    Change,
    ObjectRef,
)
from reconciler.wellknown import accounting_marker

SLURM_OWN = {SLURM_ACCOUNT: {ROOT_ACCOUNT}, SLURM_QOS: {DEFAULT_QOS}, SLURM_USER: {"root"}}
UNLIMITED = -1  # what sacctmgr takes to clear a limit

# QOS limits: plan field, sacctmgr option, attribute.
_QOS_LIMITS = (
    ("maxWall", "MaxWall", "max_wall_minutes"),
    ("grpJobs", "GrpJobs", "grp_jobs"),
    ("maxJobsPerUser", "MaxJobsPU", "max_jobs_per_user"),
)
_QOS_TRES = (
    ("grpTRES", "GrpTRES", "grp_tres"),
    ("maxTRESPerJob", "MaxTRES", "max_tres_per_job"),
    ("maxTRESPerUser", "MaxTRESPU", "max_tres_per_user"),
)


def ref(kind: str, name: str) -> ObjectRef:
    return ObjectRef(SLURM, kind, "", name)


def accounting_changes(state: DesiredState, live: LiveState) -> tuple[list[Change], int, list[str]]:
    """QOS, accounts (parents first), users; then deletions of ours: users, accounts
    (children first), QOS. Plus warnings."""
    want = state.accounting
    if live.accounting is None:
        if live.now is not None and not want.empty:  # a live plan, and slurmdbd did not answer
            return (
                [],
                0,
                [
                    "slurmConfig.accounting declares accounts, users or QOS, but no slurmdbd "
                    "answers (sacctmgr): they are not planned; enable accounting "
                    "(AccountingStorageType=accounting_storage/slurmdbd)"
                ],
            )
        have = LiveAccounting()
    else:
        have = live.accounting
    marker = accounting_marker(state.release)
    changes: list[Change] = []
    warnings: list[str] = []
    unchanged = 0
    for qos in want.qos:
        change = _qos_change(qos, have.qos.get(qos.name), marker)
        unchanged += change is None
        changes += [change] if change else []
    for account in want.accounts:
        change = _account_change(account, have.accounts.get(account.name), marker)
        unchanged += change is None
        changes += [change] if change else []
    ours_accounts = _ours_accounts(want, have, marker)
    for user in want.users:
        change = _user_change(user, have.users.get(user.name), ours_accounts)
        unchanged += change is None
        changes += [change] if change else []
    changes += _deletions(want, have, marker, ours_accounts, warnings)
    return changes, unchanged, warnings


def _ours_accounts(want: Accounting, have: LiveAccounting, marker: str) -> set[str]:
    return {a.name for a in want.accounts} | {
        name for name, a in have.accounts.items() if a.description.endswith(marker)
    }


# ---- shapes -------------------------------------------------------------------------------


def tres_text(tres: Tres) -> str:
    return ",".join(f"{name}={count}" + ("M" if name == "mem" else "") for name, count in tres)


def wall_text(minutes: int) -> str:
    days, rest = divmod(minutes, 1440)
    text = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{text}" if days else text


def qos_shape(qos: Qos) -> dict[str, Any]:
    shape: dict[str, Any] = {
        "name": qos.name,
        "description": qos.description,
        "priority": qos.priority,
        "preempt": list(qos.preempt),
        "preemptMode": qos.preempt_mode,
    }
    if qos.max_wall_minutes is not None:
        shape["maxWall"] = wall_text(qos.max_wall_minutes)
    for field, _, attr in _QOS_LIMITS[1:]:
        shape[field] = getattr(qos, attr)
    for field, _, attr in _QOS_TRES:
        shape[field] = tres_text(getattr(qos, attr))
    return _without_empty(shape)


def account_shape(account: Account, like: Account | None = None) -> dict[str, Any]:
    """`like`: the desired account; what it leaves to Slurm (qos, default QOS) is not shown."""
    shape: dict[str, Any] = {
        "name": account.name,
        "description": account.description,
        "organization": account.organization,
        "parent": account.parent,
        "qos": list(account.qos),
        "defaultQos": account.default_qos,
    }
    if like is not None and not like.qos:
        shape.pop("qos")
    if like is not None and like.default_qos is None:
        shape.pop("defaultQos")
    return _without_empty(shape)


def user_shape(user: User) -> dict[str, Any]:
    return {
        "name": user.name,
        "accounts": list(user.accounts),
        "defaultAccount": user.default_account,
    }


def _without_empty(shape: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in shape.items() if value not in (None, [], "")}


# ---- QOS ----------------------------------------------------------------------------------


def qos_options(qos: Qos, have: Qos | None = None) -> dict[str, Any]:
    """sacctmgr options that make `have` (None: a new QOS) into `qos`."""
    options: dict[str, Any] = {}
    if have is None or have.description != qos.description:
        options["Description"] = qos.description
    if have is None or have.priority != qos.priority:
        options["Priority"] = qos.priority
    if (have is None and qos.preempt) or (have is not None and have.preempt != qos.preempt):
        options["Preempt"] = list(qos.preempt)  # empty: cleared
    if (have is None and qos.preempt_mode != "cluster") or (
        have is not None and have.preempt_mode != qos.preempt_mode
    ):
        options["PreemptMode"] = qos.preempt_mode
    for _, option, attr in _QOS_LIMITS:
        value, before = getattr(qos, attr), getattr(have, attr) if have else None
        if value != before:
            options[option] = UNLIMITED if value is None else value
    for _, option, attr in _QOS_TRES:
        value, before = dict(getattr(qos, attr)), dict(getattr(have, attr) if have else ())
        if value != before:
            cleared = {name: UNLIMITED for name in before if name not in value}
            options[option] = ",".join(
                f"{name}={count}" for name, count in sorted({**value, **cleared}.items())
            )
    return options


def _qos_change(qos: Qos, have: Qos | None, marker: str) -> Change | None:
    if have is None:
        return Change(ref(SLURM_QOS, qos.name), Action.CREATE, None, qos_shape(qos),
                      desired=qos_options(qos))  # fmt: skip
    before, after = qos_shape(have), qos_shape(qos)
    fields = tuple(field_changes(before, after))
    if not fields:
        return None
    return Change(ref(SLURM_QOS, qos.name), Action.UPDATE, before, after, fields,
                  notes=_adopted(have.description, marker),
                  desired=qos_options(qos, have))  # fmt: skip


def _adopted(description: str, marker: str) -> tuple[str, ...]:
    if description.endswith(marker):
        return ()
    return (f"not marked ours yet, and declared in git: managed from now on ({marker})",)


# ---- accounts -----------------------------------------------------------------------------


def account_options(account: Account, have: Account | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if have is None or have.description != account.description:
        options["Description"] = account.description
    if have is None or have.organization != account.organization:
        options["Organization"] = account.organization
    if have is None or have.parent != account.parent:
        options["Parent"] = account.parent
    if account.qos and (have is None or have.qos != account.qos):
        options["QOS"] = list(account.qos)
    if account.default_qos and (have is None or have.default_qos != account.default_qos):
        options["DefaultQOS"] = account.default_qos
    return options


def _account_change(account: Account, have: Account | None, marker: str) -> Change | None:
    at = ref(SLURM_ACCOUNT, account.name)
    if have is None:
        return Change(at, Action.CREATE, None, account_shape(account),
                      desired=account_options(account))  # fmt: skip
    before, after = account_shape(have, account), account_shape(account)
    fields = tuple(field_changes(before, after))
    if not fields:
        return None
    return Change(at, Action.UPDATE, before, after, fields,
                  notes=_adopted(have.description, marker),
                  desired=account_options(account, have))  # fmt: skip


# ---- users --------------------------------------------------------------------------------


def _user_change(user: User, have: User | None, ours: set[str]) -> Change | None:
    at = ref(SLURM_USER, user.name)
    if have is None:
        made: dict[str, Any] = {"Accounts": list(user.accounts),
                                "DefaultAccount": user.default_account}  # fmt: skip
        return Change(at, Action.CREATE, None, user_shape(user), desired=made)
    add = sorted(set(user.accounts) - set(have.accounts))
    extra = sorted(set(have.accounts) - set(user.accounts))
    remove = [a for a in extra if a in ours]
    kept = [a for a in extra if a not in ours]
    target = User(user.name, tuple(sorted({*user.accounts, *kept})), user.default_account)
    before, after = user_shape(have), user_shape(target)
    fields = tuple(field_changes(before, after))
    if not fields:
        return None
    desired: dict[str, Any] = {}
    if add:
        desired["Add"] = add
    if have.default_account != user.default_account:
        desired["DefaultAccount"] = user.default_account
    if remove:
        desired["Remove"] = remove
    notes = tuple(
        f"its association with account {a} (not ours, not in git) is left alone" for a in kept
    )
    return Change(at, Action.UPDATE, before, after, fields, notes=notes, desired=desired)


# ---- deletions ----------------------------------------------------------------------------


def _deletions(
    want: Accounting,
    have: LiveAccounting,
    marker: str,
    ours_accounts: set[str],
    warnings: list[str],
) -> list[Change]:
    changes: list[Change] = []
    declared_users = {u.name for u in want.users}
    declared_accounts = {a.name for a in want.accounts}
    declared_qos = {q.name for q in want.qos}
    for name in sorted(set(have.users) - declared_users):
        user = have.users[name]
        if name in SLURM_OWN[SLURM_USER]:
            continue
        if user.accounts and set(user.accounts) <= ours_accounts:
            note = "every association it has is with an account of ours, and it is not in git"
            changes.append(Change(ref(SLURM_USER, name), Action.DELETE, user_shape(user), None,
                                  notes=(note,)))  # fmt: skip
        else:
            warnings.append(
                f"Slurm user {name} is not in git and not ours (it has associations with "
                f"accounts not of ours): left alone"
            )
    gone = [
        a
        for name, a in have.accounts.items()
        if name not in declared_accounts and name not in SLURM_OWN[SLURM_ACCOUNT]
    ]
    for account in sorted(gone, key=lambda a: (-depth(have.accounts, a.name), a.name)):
        if account.description.endswith(marker):
            note = (
                f"ours (description ends with {marker}) and no longer in git; apply refuses "
                "while it has jobs"
            )
            changes.append(Change(ref(SLURM_ACCOUNT, account.name), Action.DELETE,
                                  account_shape(account), None, notes=(note,)))  # fmt: skip
        else:
            warnings.append(
                f"Slurm account {account.name} is not in git and not ours (its description "
                f"does not end with {marker!r}): left alone"
            )
    for name in sorted(set(have.qos) - declared_qos - SLURM_OWN[SLURM_QOS]):
        qos = have.qos[name]
        if qos.description.endswith(marker):
            note = f"ours (description ends with {marker}) and no longer in git"
            changes.append(Change(ref(SLURM_QOS, name), Action.DELETE, qos_shape(qos), None,
                                  notes=(note,)))  # fmt: skip
        else:
            warnings.append(
                f"Slurm QOS {name} is not in git and not ours (its description does not end "
                f"with {marker!r}): left alone"
            )
    return changes
