"""slurmConfig.accounting: Slurm accounts, users and QOS declared in git, checked per file (pure).

    slurmConfig:
      accounting:
        qos:
          low: {priority: 10}
          high: {priority: 100, preempt: [low], preemptMode: requeue, maxWall: '4:00:00'}
        accounts:
          research: {description: Research, organization: acme, parent: root,
                     qos: [normal, low, high], defaultQos: normal}
        users:
          alice: {accounts: [research], defaultAccount: research}

Each entry is checked where it is written, so an error names its file and line; what needs the
merged values (parents and QOS that exist, a default account among the user's accounts) is
checked when they are compiled (compile/accounting.py). `null` removes an entry an earlier file
declared. sacctmgr keeps names, descriptions and organizations in lowercase (checked on
slurmdbd 22.05), so names must be lowercase and free text is compared in lowercase.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NoReturn

from reconciler.config.yamlfile import KeyPath, YamlFile, format_path
from reconciler.errors import ConfigTypeError, Location
from reconciler.suggest import did_you_mean

SECTIONS = ("qos", "accounts", "users")
QOS_KEYS: dict[str, str] = {
    "description": "string",
    "priority": "integer",
    "preempt": "string or list of strings",
    "preemptMode": "string",
    "maxWall": "string or integer",
    "grpTRES": "string",
    "maxTRESPerJob": "string",
    "maxTRESPerUser": "string",
    "grpJobs": "integer",
    "maxJobsPerUser": "integer",
}
ACCOUNT_KEYS: dict[str, str] = {
    "description": "string",
    "organization": "string",
    "parent": "string",
    "qos": "string or list of strings",
    "defaultQos": "string",
}
USER_KEYS: dict[str, str] = {
    "accounts": "string or list of strings",
    "defaultAccount": "string",
}
KEYS = {"qos": QOS_KEYS, "accounts": ACCOUNT_KEYS, "users": USER_KEYS}
WHAT = {"qos": "QOS", "accounts": "account", "users": "user"}
PREEMPT_MODES = ("off", "cancel", "requeue", "suspend", "cluster")
TRES_NAMES = re.compile(r"cpu|mem|node|energy|billing|gres/[a-z0-9_]+(:[a-z0-9_]+)?")
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_TEXT = re.compile(r"[A-Za-z0-9_.,:;/@#()+\- ]+")
_DURATION = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")
_TRES_ITEM = re.compile(r"([a-z0-9/_:]+)=(\d+)([KMGT]?)")
_MEM_UNITS = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
MAX_NAME = 64
MAX_TEXT = 200


class AccountingValueError(ValueError):
    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


# ---- values -------------------------------------------------------------------------------


def accounting_name(value: object) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value) or len(value) > MAX_NAME:
        hint = None
        if isinstance(value, str) and _NAME.fullmatch(value.lower()):
            hint = f"sacctmgr keeps names in lowercase: write {value.lower()!r}"
        raise AccountingValueError(
            f"{value!r} cannot name a Slurm account, user or QOS",
            hint=hint or "lowercase letters, digits, `_ . -`, starting with a letter or digit",
        )
    return value


def accounting_names(value: object) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise AccountingValueError(f"expected a name or a list of names, got {value!r}")
    return tuple(accounting_name(item) for item in items)


def accounting_text(value: object) -> str:
    """Free text (description, organization), as sacctmgr keeps it: in lowercase."""
    if not isinstance(value, str) or not _TEXT.fullmatch(value) or len(value) > MAX_TEXT:
        raise AccountingValueError(
            f"{value!r} is not a description sacctmgr can store",
            hint="letters, digits, spaces and _ . , : ; / @ # ( ) + -, at most "
            f"{MAX_TEXT} characters",
        )
    if value != value.strip():
        raise AccountingValueError(f"{value!r} has leading or trailing spaces")
    return value.lower()


def preempt_mode(value: object) -> str:
    if not isinstance(value, str) or value.lower() not in PREEMPT_MODES:
        raise AccountingValueError(
            f"preemptMode must be one of {', '.join(PREEMPT_MODES)}, got {value!r}"
        )
    return value.lower()


def wall_minutes(value: object) -> int:
    """Minutes, or [D-]HH:MM[:SS] as Slurm writes a time limit (seconds are rounded up)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise AccountingValueError(f"maxWall must be more than 0 minutes, got {value}")
        return value
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise AccountingValueError(
            f"{value!r} is not a time limit", hint="minutes (90), or '[D-]HH:MM:SS' ('1-00:00:00')"
        )
    days, first, second, third = match.groups()
    if second is None:  # "D-HH" or plain minutes
        minutes = int(first) * 60 if days else int(first)
        seconds = 0
    elif third is None:  # HH:MM
        minutes, seconds = int(first) * 60 + int(second), 0
    else:  # HH:MM:SS
        minutes, seconds = int(first) * 60 + int(second), int(third)
    total = int(days or 0) * 1440 + minutes + (1 if seconds else 0)
    if total <= 0:
        raise AccountingValueError(f"maxWall must be more than 0 minutes, got {value!r}")
    return total


def tres_limits(value: object) -> tuple[tuple[str, int], ...]:
    """`cpu=8,mem=2G,gres/gpu=1` -> sorted (name, count) pairs, memory in megabytes."""
    if not isinstance(value, str) or not value:
        raise AccountingValueError(f"expected TRES limits such as cpu=8,mem=16G, got {value!r}")
    out: dict[str, int] = {}
    for item in value.split(","):
        match = _TRES_ITEM.fullmatch(item.strip())
        if match is None or not TRES_NAMES.fullmatch(match.group(1)):
            raise AccountingValueError(
                f"{item!r} is not a TRES limit",
                hint="name=count with names cpu, mem, node, billing, gres/gpu; mem takes M, G, T",
            )
        name, count, unit = match.groups()
        if unit and name != "mem":
            raise AccountingValueError(f"{item!r}: only mem takes a unit")
        if name in out:
            raise AccountingValueError(f"TRES {name} is given twice in {value!r}")
        out[name] = int(int(count) * _MEM_UNITS[unit]) if name == "mem" else int(count)
    return tuple(sorted(out.items()))


def non_negative(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AccountingValueError(f"expected an integer >= 0, got {value!r}")
    return value


PARSERS: dict[str, dict[str, Callable[[object], Any]]] = {
    "qos": {
        "description": accounting_text,
        "priority": non_negative,
        "preempt": accounting_names,
        "preemptMode": preempt_mode,
        "maxWall": wall_minutes,
        "grpTRES": tres_limits,
        "maxTRESPerJob": tres_limits,
        "maxTRESPerUser": tres_limits,
        "grpJobs": non_negative,
        "maxJobsPerUser": non_negative,
    },
    "accounts": {
        "description": accounting_text,
        "organization": accounting_text,
        "parent": accounting_name,
        "qos": accounting_names,
        "defaultQos": accounting_name,
    },
    "users": {"accounts": accounting_names, "defaultAccount": accounting_name},
}


# ---- per file -----------------------------------------------------------------------------


def check_accounting(doc: YamlFile) -> None:
    """Each entry of slurmConfig.accounting in one file: names, keys and values."""
    slurm_config = doc.data.get("slurmConfig") if isinstance(doc.data, dict) else None
    if not isinstance(slurm_config, dict) or slurm_config.get("accounting") is None:
        return
    base: KeyPath = ("slurmConfig", "accounting")
    accounting = slurm_config["accounting"]
    if not isinstance(accounting, dict):
        _fail(doc, base, f"slurmConfig.accounting must be a mapping of {', '.join(SECTIONS)}")
    for section, entries in accounting.items():
        if section not in SECTIONS:
            close = did_you_mean(str(section), SECTIONS)
            _fail(
                doc,
                (*base, section),
                f"unknown accounting section {section!r}" + (f"; {close}" if close else ""),
                hint="sections are " + ", ".join(SECTIONS),
            )
        if entries is None:
            continue
        if not isinstance(entries, dict):
            _fail(doc, (*base, section), f"{format_path((*base, section))} must be a mapping")
        for name, entry in entries.items():
            _check_entry(doc, section, (*base, section, name), name, entry)


def _check_entry(doc: YamlFile, section: str, path: KeyPath, name: Any, entry: Any) -> None:
    what = WHAT[section]
    try:
        accounting_name(name)
    except AccountingValueError as error:
        _fail(doc, path, f"{what} name: {error}", hint=error.hint)
    if entry is None:  # removes what an earlier file declared
        return
    if not isinstance(entry, dict):
        _fail(doc, path, f"{format_path(path)} must be a mapping (a {what})")
    keys = KEYS[section]
    for key, value in entry.items():
        if key not in keys:
            close = did_you_mean(str(key), keys)
            _fail(
                doc,
                (*path, key),
                f"unknown {what} key {key!r}" + (f"; {close}" if close else ""),
                hint=f"{what} keys are " + ", ".join(keys),
            )
        if value is None:
            continue
        try:
            PARSERS[section][key](value)
        except AccountingValueError as error:
            _fail(doc, (*path, key), f"{format_path((*path, key))}: {error}", hint=error.hint)


def note_accounting(doc: YamlFile, locations: dict[str, Location]) -> None:
    """Where each entry was last written, keyed `<section>/<name>`."""
    slurm_config = doc.data.get("slurmConfig") if isinstance(doc.data, dict) else None
    accounting = (slurm_config or {}).get("accounting") if isinstance(slurm_config, dict) else None
    for section, entries in (accounting or {}).items():
        for name, entry in (entries or {}).items():
            key = f"{section}/{name}"
            if entry is None:
                locations.pop(key, None)
            else:
                locations[key] = doc.location(("slurmConfig", "accounting", section, name))


def _fail(doc: YamlFile, path: KeyPath, message: str, hint: str | None = None) -> NoReturn:
    raise ConfigTypeError(message, where=doc.location(path), hint=hint)
