"""The `directoryService` keys of a SUNK values file (SUNK's "Slurm Workload Manager" page,
"Directory Service" and "Google Secure LDAP"): which keys a directory entry has, their types, and
the value checks whose wrong value would only fail inside the sssd sidecar, at login time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from reconciler.config.value_types import Key, Table, check_table
from reconciler.config.yamlfile import KeyPath, YamlFile, lookup
from reconciler.errors import ConfigTypeError
from reconciler.suggest import did_you_mean

SCHEMAS = ("rfc2307", "rfc2307bis")
DIRECTORY_VALUES: Table = {
    "directoryService": Key("mapping", "users and groups from LDAP through an sssd sidecar"),
    "directoryService.sudoGroups": Key(
        "string or list of strings", "groups given sudo on every directory's hosts"
    ),
    "directoryService.directories": Key(
        "list of mappings", "LDAP directories, one SSSD domain each"
    ),
}

DIRECTORY_ENTRY: Table = {
    "name": Key("string", "the SSSD domain's name", "default"),
    "enabled": Key("boolean", "whether sssd uses it", True),
    # YAML reads the 0x0200 of SUNK's "Slurm Workload Manager" page as the integer 512.
    "debugLevel": Key("string or integer", "sssd's debug_level: 0-9 or a bit mask", 0x0200),
    "ldapUri": Key("string", "ldap:// or ldaps:// server"),
    "user": Key("mapping", "the bind user"),
    "user.bindDn": Key("string", "its DN"),
    "user.searchBase": Key("string", "the search base"),
    "user.password": Key("string", "its password (put in a Secret we render)"),
    "user.canary": Key("string", "a user that must resolve, for the readiness check"),
    "user.existingSecret": Key("string", "a Secret you create with the SSSD snippet"),
    "defaultShell": Key("string", "sssd's default_shell", "/bin/bash"),
    "fallbackHomeDir": Key("string", "sssd's fallback_homedir", "/home/%u"),
    "overrideHomeDir": Key("string", "sssd's override_homedir"),
    "ldapsCert": Key("string", "a CA certificate for ldaps"),
    "sudoGroups": Key("string or list of strings", "groups given sudo"),
    "schema": Key(
        "string",
        "sssd's ldap_schema",
        "rfc2307",
        choices=SCHEMAS,
        hint="Google Secure LDAP and Active Directory groups need rfc2307bis",
    ),
}

URI_SCHEMES = ("ldap://", "ldaps://")
# A directory's name becomes an SSSD domain ([domain/<name>]) and part of file names.
_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
# POSIX portable user/group names, plus what LDAP/AD group names commonly hold (space, @).
_GROUP = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_. @-]*")
_ENTRIES: KeyPath = ("directoryService", "directories")


def check_directory_service(doc: YamlFile) -> None:
    """Each directory entry's types (DIRECTORY_ENTRY), then its values."""
    entries, found = lookup(doc.data, list(_ENTRIES))
    if not found or not isinstance(entries, list):
        return
    for index, entry in enumerate(entries):
        check_table(doc, (*_ENTRIES, index), entry, DIRECTORY_ENTRY)
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        path: KeyPath = (*_ENTRIES, index)
        name = entry.get("name", "default")
        _check(doc, (*path, "name"), bool(_NAME.fullmatch(name)),
               f"directory name {name!r} must be lowercase letters, digits and '-'",
               "it names the SSSD domain and the files rendered for it")  # fmt: skip
        _check(doc, (*path, "name"), name not in seen, f"directory {name!r} is defined twice")
        seen.add(name)
        if entry.get("enabled", True) is False:
            continue
        uri = entry.get("ldapUri") or ""
        _check(doc, (*path, "ldapUri"), uri.startswith(URI_SCHEMES),
               f"ldapUri must start with ldap:// or ldaps://, got {uri!r}",
               "an enabled directory needs a server: ldaps://ldap.google.com:636")  # fmt: skip
        user = entry.get("user") or {}
        _check(doc, (*path, "user", "password"),
               not (user.get("password") and user.get("existingSecret")),
               "user.password and user.existingSecret are both set",
               "keep one: the existingSecret's SSSD snippet, or the password we put in a "
               "Secret")  # fmt: skip
        level = entry.get("debugLevel")
        _check(doc, (*path, "debugLevel"), level is None or _is_debug_level(level),
               f"debugLevel must be 0-9 or a bit mask such as 0x0200, got {level!r}")  # fmt: skip
        for group_path, group in _groups(entry.get("sudoGroups"), (*path, "sudoGroups")):
            _check_group(doc, group_path, group)
    for group_path, group in _groups(lookup(doc.data, ["directoryService", "sudoGroups"])[0],
                                     ("directoryService", "sudoGroups")):  # fmt: skip
        _check_group(doc, group_path, group)


def unknown_directory_keys(data: Any) -> Iterator[tuple[KeyPath, str]]:
    """(path, why) for keys inside a directory entry that we do not read."""
    entries, found = lookup(data, list(_ENTRIES))
    if not found or not isinstance(entries, list):
        return
    tops = [k for k in DIRECTORY_ENTRY if "." not in k]
    users = [k.partition(".")[2] for k in DIRECTORY_ENTRY if k.startswith("user.")]
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        path: KeyPath = (*_ENTRIES, index)
        for key in entry:
            if key not in tops:
                yield (*path, key), _unknown(f"{key}", tops)
        user = entry.get("user")
        user = user if isinstance(user, dict) else {}
        for key in user:
            if key not in users:
                yield (*path, "user", key), _unknown(f"user.{key}", users, prefix="user.")


def sudo_group_list(value: Any) -> list[str]:
    """SUNK's "Slurm Workload Manager" page writes sudoGroups as a list, with `""` as its default:
    both mean the same."""
    if isinstance(value, str):
        return [g.strip() for g in value.split(",") if g.strip()]
    return [str(g) for g in value or []]


def _groups(value: Any, path: KeyPath) -> Iterator[tuple[KeyPath, str]]:
    if isinstance(value, list):
        yield from (((*path, i), str(g)) for i, g in enumerate(value))
    elif isinstance(value, str):
        yield from ((path, g) for g in sudo_group_list(value))


def _check_group(doc: YamlFile, path: KeyPath, group: str) -> None:
    _check(doc, path, bool(_GROUP.fullmatch(group)),
           f"sudo group {group!r} has characters a group name cannot hold",
           "letters, digits, '_', '.', '-', '@' and spaces")  # fmt: skip


def _is_debug_level(level: Any) -> bool:
    if isinstance(level, bool):
        return False
    if isinstance(level, int):
        return 0 <= level <= 0xFFFF
    return bool(re.fullmatch(r"[0-9]|0x[0-9A-Fa-f]{1,4}", level.strip()))


def _check(doc: YamlFile, path: KeyPath, ok: bool, message: str, hint: str | None = None) -> None:
    if not ok:
        raise ConfigTypeError(message, where=doc.location(path), hint=hint)


def _unknown(key: str, known: list[str], prefix: str = "") -> str:
    close = did_you_mean(key.removeprefix(prefix), known, prefix=prefix)
    text = f"directory key {key!r} is not a key this reconciler reads; it is ignored"
    return text + (f"; {close}" if close else "")
