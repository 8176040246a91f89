"""slurmConfig.accounting -> the Slurm accounts, users and QOS apply keeps in place (pure).

Each file's entries were checked where they were written (config/accounting.py); what only the
merged values can say is checked here: parents, QOS and accounts named exist (in git, or Slurm's
own `root` account and `normal` QOS), account parents form no cycle, a default account is one of
the user's accounts, a default QOS one of the account's QOS.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.config.accounting import PARSERS
from reconciler.errors import CompileError, Location
from reconciler.suggest import did_you_mean
from reconciler.wellknown import accounting_marker

ROOT_ACCOUNT = "root"  # slurmdbd's own, parent of every account
DEFAULT_QOS = "normal"  # slurmdbd's own

Tres = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Qos:
    name: str
    description: str  # as Slurm keeps it: lowercase, ending with our marker
    priority: int = 0
    preempt: tuple[str, ...] = ()  # sorted
    preempt_mode: str = "cluster"  # Slurm's default: the cluster's PreemptMode
    max_wall_minutes: int | None = None
    grp_tres: Tres = ()
    max_tres_per_job: Tres = ()
    max_tres_per_user: Tres = ()
    grp_jobs: int | None = None
    max_jobs_per_user: int | None = None
    where: str = ""


@dataclass(frozen=True)
class Account:
    name: str
    description: str  # lowercase, ending with our marker
    organization: str  # lowercase; Slurm's default is the parent's name
    parent: str
    qos: tuple[str, ...] = ()  # sorted; empty: inherited from the parent
    default_qos: str | None = None
    where: str = ""


@dataclass(frozen=True)
class User:
    name: str
    accounts: tuple[str, ...]  # sorted
    default_account: str
    where: str = ""


@dataclass(frozen=True)
class Accounting:
    qos: tuple[Qos, ...] = ()
    accounts: tuple[Account, ...] = ()  # parents before children
    users: tuple[User, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.qos or self.accounts or self.users)


def compile_accounting(
    release: str, values: Mapping[str, Any], locations: Mapping[str, Location]
) -> Accounting:
    section = (values.get("slurmConfig") or {}).get("accounting") or {}
    marker = accounting_marker(release)
    entries = {
        kind: {n: _parsed(kind, e) for n, e in (section.get(kind) or {}).items() if e is not None}
        for kind in ("qos", "accounts", "users")
    }

    def at(kind: str, name: str) -> Location:
        return locations.get(f"{kind}/{name}") or Location(
            "values.yaml", None, f"slurmConfig.accounting.{kind}.{name}"
        )

    qos_names = {DEFAULT_QOS, *entries["qos"]}
    account_names = {ROOT_ACCOUNT, *entries["accounts"]}
    qos = []
    for name in sorted(entries["qos"]):
        entry = entries["qos"][name]
        for other in entry.get("preempt", ()):
            _known(other, qos_names, "QOS", f"QOS {name!r} preempts", at("qos", name))
            if other == name:
                raise CompileError(f"QOS {name!r} preempts itself", where=at("qos", name))
        qos.append(
            Qos(
                name=name,
                description=_described(entry.get("description", name), marker),
                priority=entry.get("priority", 0),
                preempt=tuple(sorted(set(entry.get("preempt", ())))),
                preempt_mode=entry.get("preemptMode", "cluster"),
                max_wall_minutes=entry.get("maxWall"),
                grp_tres=entry.get("grpTRES", ()),
                max_tres_per_job=entry.get("maxTRESPerJob", ()),
                max_tres_per_user=entry.get("maxTRESPerUser", ()),
                grp_jobs=entry.get("grpJobs"),
                max_jobs_per_user=entry.get("maxJobsPerUser"),
                where=_where(at("qos", name)),
            )
        )
    accounts = {}
    for name in sorted(entries["accounts"]):
        entry, where = entries["accounts"][name], at("accounts", name)
        if name == ROOT_ACCOUNT:
            raise CompileError("account root is slurmdbd's own and cannot be declared", where=where)
        parent = entry.get("parent", ROOT_ACCOUNT)
        _known(parent, account_names, "account", f"account {name!r} has parent", where)
        listed = tuple(sorted(set(entry.get("qos", ()))))
        for one in listed:
            _known(one, qos_names, "QOS", f"account {name!r} allows", where)
        default = entry.get("defaultQos")
        if default is not None:
            _known(default, qos_names, "QOS", f"account {name!r} has default", where)
            if listed and default not in listed:
                raise CompileError(
                    f"account {name!r}: defaultQos {default!r} is not one of its qos "
                    f"({', '.join(listed)})",
                    where=where,
                    hint=f"add {default!r} to its qos list",
                )
        accounts[name] = Account(
            name=name,
            description=_described(entry.get("description", name), marker),
            organization=entry.get("organization", parent),
            parent=parent,
            qos=listed,
            default_qos=default,
            where=_where(where),
        )
    _no_cycles(accounts, at)
    users = []
    for name in sorted(entries["users"]):
        entry, where = entries["users"][name], at("users", name)
        names = tuple(sorted(set(entry.get("accounts", ()))))
        if not names:
            raise CompileError(
                f"user {name!r} has no accounts; Slurm needs at least one",
                where=where,
                hint="add `accounts: [research]`",
            )
        for account in names:
            _known(account, account_names, "account", f"user {name!r} is in", where)
        default = entry.get("defaultAccount", names[0] if len(names) == 1 else None)
        if default is None or default not in names:
            raise CompileError(
                f"user {name!r}: "
                + (
                    "defaultAccount is needed with more than one account"
                    if default is None
                    else f"defaultAccount {default!r} is not one of its accounts"
                ),
                where=where,
                hint="accounts: " + ", ".join(names),
            )
        users.append(User(name, names, default, _where(where)))
    return Accounting(tuple(qos), tuple(_parents_first(accounts)), tuple(users))


def _parsed(kind: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: PARSERS[kind][key](value)
        for key, value in entry.items()
        if value is not None and key in PARSERS[kind]
    }


def _described(text: str, marker: str) -> str:
    return f"{text.lower()} {marker}"


def _known(name: str, known: Iterable[str], what: str, context: str, where: Location) -> None:
    options = sorted(known)
    if name in options:
        return
    close = did_you_mean(name, options)
    raise CompileError(
        f"{context} {what} {name!r}, which git does not declare",
        where=where,
        hint=(f"{close} " if close else "")
        + f"declare it under slurmConfig.accounting ({what}s: {', '.join(options)})",
    )


def _no_cycles(accounts: Mapping[str, Account], at: Any) -> None:
    for name in accounts:
        seen = [name]
        parent = accounts[name].parent
        while parent in accounts:
            if parent in seen:
                raise CompileError(
                    "account parents form a cycle: " + " -> ".join([*seen, parent]),
                    where=at("accounts", name),
                )
            seen.append(parent)
            parent = accounts[parent].parent


def depth(accounts: Mapping[str, Account], name: str) -> int:
    level = 0
    while name in accounts:
        name = accounts[name].parent
        level += 1
    return level


def _parents_first(accounts: Mapping[str, Account]) -> list[Account]:
    return sorted(accounts.values(), key=lambda a: (depth(accounts, a.name), a.name))


def _where(at: Location) -> str:
    return f"{at.file}:{at.line}" if at.line is not None else at.file
