"""Slurm accounting (QOS, accounts, users, associations) through the `sacctmgr` binary.

slurmrestd v0.0.38's dbv0.0.38 lacks verbs we need (modifying a QOS's preempt list, ...), so
apply runs `sacctmgr -i` (immediate: no confirmation prompt). Auth is the cluster's (MUNGE, or
SLURM_JWT when a token source is given: the token travels in the environment, never on the
command line).

Argument policy, as in scontrol_args.py: reject, never quote. No shell, one `Key=value` per argv
element, keys only from the tables below, each value checked against the grammar of its kind;
anything else is refused with SlurmArgumentError before sacctmgr starts. sacctmgr keeps names,
descriptions and organizations in lowercase, so names must be lowercase here.

Reading: `sacctmgr -n -P show ...` (no header, `|` separated), parsed into the plan's shapes.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from reconciler.adapters.client_env import EnvSource, child_env, current_env, find_program
from reconciler.adapters.scontrol_args import check_text, option_args
from reconciler.adapters.slurm.jwt import TokenSource
from reconciler.compile.accounting import Account, Qos, User
from reconciler.config.accounting import AccountingValueError, tres_limits, wall_minutes
from reconciler.errors import ReconcilerError, SlurmArgumentError
from reconciler.slurm_release import SlurmRelease, release_in

DEFAULT_TIMEOUT_SECONDS = 30.0
MAX_NAME = 64

Checker = Callable[[str, object], str]
OptionValue = str | int | Sequence[str]

_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_TRES = re.compile(
    r"(cpu|mem|node|energy|billing|gres/[a-z0-9_]+(:[a-z0-9_]+)?)=(-1|\d+[KMGT]?)"
    r"(,(cpu|mem|node|energy|billing|gres/[a-z0-9_]+(:[a-z0-9_]+)?)=(-1|\d+[KMGT]?))*"
)
PREEMPT_MODES: Final = frozenset({"off", "cancel", "requeue", "suspend", "cluster"})


class SacctmgrError(ReconcilerError):
    """`sacctmgr` (or `squeue`) failed; `output` holds what it said."""

    def __init__(self, command: Sequence[str], *, exit_code: int | None, message: str,
                 hint: str | None = None) -> None:  # fmt: skip
        status = f" (exit {exit_code})" if exit_code is not None else ""
        super().__init__(f"{' '.join(command)}: {message}{status}", hint=hint)
        self.command = tuple(command)
        self.exit_code = exit_code
        self.output = message


def check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value) or len(value) > MAX_NAME:
        raise SlurmArgumentError(
            what, value, "expected lowercase letters, digits, `_ . -`, not starting with -"
        )
    return value


def _names(what: str, value: object) -> str:
    """A comma list of names; an empty list clears (Preempt=)."""
    names = value.split(",") if isinstance(value, str) and value else value
    if isinstance(names, list | tuple) and not names:
        return ""
    if not isinstance(names, list | tuple):
        raise SlurmArgumentError(what, value, "expected a list of names")
    return ",".join(check_name(what, name) for name in names)


def _integer_or_clear(what: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise SlurmArgumentError(what, value, "expected an integer >= 0, or -1 to clear")
    return str(value)


def _tres(what: str, value: object) -> str:
    if not isinstance(value, str) or len(value) > 512 or not _TRES.fullmatch(value):
        raise SlurmArgumentError(what, value, "expected name=count,... (count -1 clears)")
    return value


def _preempt_mode(what: str, value: object) -> str:
    if not isinstance(value, str) or value.lower() not in PREEMPT_MODES:
        raise SlurmArgumentError(what, value, f"expected one of {', '.join(sorted(PREEMPT_MODES))}")
    return value.lower()


def _text(what: str, value: object) -> str:
    return check_text(what, value)


QOS_OPTIONS: Final[Mapping[str, Checker]] = {
    "Description": _text,
    "Priority": _integer_or_clear,
    "Preempt": _names,
    "PreemptMode": _preempt_mode,
    "MaxWall": _integer_or_clear,  # minutes
    "GrpJobs": _integer_or_clear,
    "MaxJobsPU": _integer_or_clear,
    "GrpTRES": _tres,
    "MaxTRES": _tres,
    "MaxTRESPU": _tres,
}
ACCOUNT_OPTIONS: Final[Mapping[str, Checker]] = {
    "Description": _text,
    "Organization": _text,
    "Parent": check_name,
    "QOS": _names,
    "DefaultQOS": check_name,
}
USER_OPTIONS: Final[Mapping[str, Checker]] = {
    "Account": _names,
    "DefaultAccount": check_name,
}


def add_args(kind: str, name: str, options: Mapping[str, OptionValue]) -> list[str]:
    table = {"qos": QOS_OPTIONS, "account": ACCOUNT_OPTIONS, "user": USER_OPTIONS}[kind]
    return ["add", kind, check_name(kind, name), *option_args(kind, table, options)]


def modify_args(
    kind: str, name: str, options: Mapping[str, OptionValue], *, account: str | None = None
) -> list[str]:
    """`modify <kind> where name=<name> [account=<account>] set ...`."""
    table = {"qos": QOS_OPTIONS, "account": ACCOUNT_OPTIONS, "user": USER_OPTIONS}[kind]
    if not options:
        raise SlurmArgumentError(f"{kind} options", options, "nothing to set")
    where = ["where", f"name={check_name(kind, name)}"]
    if account is not None:
        where.append(f"account={check_name('account', account)}")
    return ["modify", kind, *where, "set", *option_args(kind, table, options)]


def delete_args(kind: str, name: str, *, account: str | None = None) -> list[str]:
    """Delete a QOS, an account, a user, or (with `account`) one association of a user."""
    where = ["where", f"name={check_name(kind, name)}"]
    if account is not None:
        if kind != "user":
            raise SlurmArgumentError("delete", kind, "only a user's association names an account")
        where.append(f"account={check_name('account', account)}")
    return ["delete", kind, *where]


# ---- reading ------------------------------------------------------------------------------

QOS_FORMAT = (
    "Name,Description,Priority,Preempt,PreemptMode,MaxWall,GrpJobs,MaxJobsPU,GrpTRES,MaxTRES,"
    "MaxTRESPU"
)
ACCOUNT_FORMAT = "Account,Description,Organization"
ASSOC_FORMAT = "Account,User,ParentName,QOS,DefaultQOS"
USER_FORMAT = "User,DefaultAccount"


def parse_qos(text: str) -> dict[str, Qos]:
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        (name, description, priority, preempt, mode, wall, grp_jobs, max_jobs_pu,
         grp_tres, max_tres, max_tres_pu) = line.split("|")[:11]  # fmt: skip
        out[name] = Qos(
            name=name,
            description=description,
            priority=int(priority or 0),
            preempt=tuple(sorted(p for p in preempt.split(",") if p)),
            preempt_mode=mode or "cluster",
            max_wall_minutes=_wall(wall),
            grp_tres=_tres_value(grp_tres),
            max_tres_per_job=_tres_value(max_tres),
            max_tres_per_user=_tres_value(max_tres_pu),
            grp_jobs=int(grp_jobs) if grp_jobs else None,
            max_jobs_per_user=int(max_jobs_pu) if max_jobs_pu else None,
        )
    return out


def _wall(text: str) -> int | None:
    if not text:
        return None
    try:
        return wall_minutes(text)
    except AccountingValueError:
        return None


def _tres_value(text: str) -> tuple[tuple[str, int], ...]:
    if not text:
        return ()
    try:
        return tres_limits(text)
    except AccountingValueError:  # a TRES we do not manage: shown as nothing we set
        return ()


def parse_accounts(
    accounts_text: str, assoc_text: str, users_text: str
) -> tuple[dict[str, Account], dict[str, User]]:
    """Accounts with their account association (parent, QOS); users with their associations."""
    described = {}
    for line in accounts_text.splitlines():
        if line.strip():
            name, description, organization = line.split("|")[:3]
            described[name] = (description, organization)
    account_assoc: dict[str, tuple[str, tuple[str, ...], str | None]] = {}
    user_accounts: dict[str, list[str]] = {}
    for line in assoc_text.splitlines():
        if not line.strip():
            continue
        account, user, parent, qos, default_qos = line.split("|")[:5]
        if user:
            user_accounts.setdefault(user, []).append(account)
        else:
            names = tuple(sorted(q for q in qos.split(",") if q))
            account_assoc[account] = (parent, names, default_qos or None)
    accounts = {}
    for name, (description, organization) in described.items():
        above, allowed, default = account_assoc.get(name, ("", (), None))
        accounts[name] = Account(name, description, organization, above, allowed, default)
    users = {}
    for line in users_text.splitlines():
        if line.strip():
            name, default_account = line.split("|")[:2]
            users[name] = User(name, tuple(sorted(user_accounts.get(name, []))), default_account)
    return accounts, users


_MISSING = "Nothing deleted"


def parse_slurmdbd_release(text: str) -> SlurmRelease | None:
    """ "SLURMDBD_VERSION        = 24.11.5" in `sacctmgr show configuration`, or None."""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "SLURMDBD_VERSION":
            return release_in(value)
    return None


class Sacctmgr:
    """Runs sacctmgr (and squeue, for the jobs of an account) against one cluster."""

    def __init__(
        self,
        *,
        env: EnvSource,
        tokens: TokenSource | None = None,
        cluster: str | None = None,
        binary: str = "sacctmgr",
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self._env = env if callable(env) else dict(env)
        self._tokens = tokens
        self._cluster = check_name("cluster", cluster) if cluster else None
        self._binary = binary
        self._timeout = timeout

    # -- reading
    def qos(self) -> dict[str, Qos]:
        return parse_qos(self.run(["-n", "-P", "show", "qos", f"format={QOS_FORMAT}"]))

    def accounts_and_users(self) -> tuple[dict[str, Account], dict[str, User]]:
        where = [f"cluster={self._cluster}"] if self._cluster else []
        accounts = self.run(["-n", "-P", "show", "account", f"format={ACCOUNT_FORMAT}"])
        assoc = self.run(["-n", "-P", "show", "association", *where, f"format={ASSOC_FORMAT}"])
        users = self.run(["-n", "-P", "show", "user", f"format={USER_FORMAT}"])
        return parse_accounts(accounts, assoc, users)

    def slurmdbd_release(self) -> SlurmRelease | None:
        """The release slurmdbd runs: SLURMDBD_VERSION in `sacctmgr show configuration`
        (slurmdbd's own part of it; SLURM_VERSION there is sacctmgr's)."""
        return parse_slurmdbd_release(self.run(["show", "configuration"]))

    def jobs_of_account(self, account: str) -> list[str]:
        """Job ids (pending or running) charged to `account`, from squeue."""
        out = self.run(["-h", "-A", check_name("account", account), "-o", "%i"], binary="squeue")
        return [line.strip() for line in out.splitlines() if line.strip()]

    # -- writing
    def add_qos(self, name: str, options: Mapping[str, OptionValue]) -> None:
        self.run(["-i", *add_args("qos", name, options)])

    def modify_qos(self, name: str, options: Mapping[str, OptionValue]) -> None:
        self.run(["-i", *modify_args("qos", name, options)])

    def add_account(self, name: str, options: Mapping[str, OptionValue]) -> None:
        self.run(["-i", *add_args("account", name, options), *self._cluster_arg()])

    def modify_account(self, name: str, options: Mapping[str, OptionValue]) -> None:
        self.run(["-i", *modify_args("account", name, options)])

    def add_user(self, name: str, accounts: Sequence[str], default_account: str | None) -> None:
        options: dict[str, OptionValue] = {"Account": list(accounts)}
        if default_account:
            options["DefaultAccount"] = default_account
        self.run(["-i", *add_args("user", name, options), *self._cluster_arg()])

    def modify_user(self, name: str, options: Mapping[str, OptionValue]) -> None:
        self.run(["-i", *modify_args("user", name, options)])

    def delete(self, kind: str, name: str, *, account: str | None = None,
               missing_ok: bool = True) -> bool:  # fmt: skip
        """True when deleted; False when there was nothing to delete and missing_ok."""
        try:
            self.run(["-i", *delete_args(kind, name, account=account)])
        except SacctmgrError as error:
            if missing_ok and _MISSING in error.output:
                return False
            raise
        return True

    def _cluster_arg(self) -> list[str]:
        return [f"Cluster={self._cluster}"] if self._cluster else []

    def run(self, args: Sequence[str], *, binary: str | None = None) -> str:
        """sacctmgr (or `binary`) with already validated args; stdout, else SacctmgrError."""
        program = binary or self._binary
        caller = current_env(self._env)
        found = find_program(program, caller)
        if found is None:
            raise SacctmgrError([program], exit_code=None, message="not found on PATH",
                                hint="install slurm-client")  # fmt: skip
        token = self._tokens.token() if self._tokens is not None else None
        try:
            done = subprocess.run(
                [found, *args],
                env=child_env(os.environ, caller, token),
                capture_output=True,
                text=True,
                timeout=self._timeout,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SacctmgrError([program, *args], exit_code=None,
                                message=f"no answer within {self._timeout:g} s",
                                hint="is slurmdbd up?") from None  # fmt: skip
        text = (done.stderr + "\n" + done.stdout).strip()
        if done.returncode != 0:
            summary = "; ".join(line.strip() for line in text.splitlines() if line.strip())
            raise SacctmgrError([program, *args], exit_code=done.returncode,
                                message=summary or "no message")  # fmt: skip
        return done.stdout

    def __repr__(self) -> str:
        return f"Sacctmgr(binary={self._binary!r}, cluster={self._cluster!r})"
