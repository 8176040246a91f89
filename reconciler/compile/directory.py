"""The directory service (SUNK's "Slurm Workload Manager" page, `directoryService`): users and
groups from LDAP through an sssd sidecar, sudo for `sudoGroups`, and SSH keys from LDAP's
`sshPublicKey`.

What a Pod gets when an enabled directory is configured:
- an `sssd` sidecar (the Pod's own image, as SUNK's images carry sssd) that builds /etc/sssd
  from our ConfigMap plus the Secrets values name, then runs `sssd -i`; its readiness probe
  resolves each directory's canary user;
- the `sss` emptyDir at /var/lib/sss in the sidecar and the main container: the NSS and SSH
  responders' sockets and the memory cache, which the main container's libnss_sss reads;
- /etc/nsswitch.conf with `sss` for passwd and group, and /etc/sudoers.d/sunk-directory;
- on login Pods, /etc/ssh/sshd_config.d/sunk-directory.conf: keys from sss_ssh_authorizedkeys.

No password is ever in the ConfigMap: the bind password comes from the SSSD snippet in the Secret
`user.existingSecret` names (SUNK's "Slurm Workload Manager" page), or, from `user.password`, in the
Secret `<release>-directory-<name>-authtok` we render (value_secrets.py), copied into
/etc/sssd/conf.d at start.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler.compile import probes
from reconciler.compile.lines import one_line, write_lines
from reconciler.compile.resources import sidecar_resources
from reconciler.compile.value_secrets import ValueSecret
from reconciler.config.directory import DIRECTORY_ENTRY, sudo_group_list
from reconciler.config.value_types import default_in
from reconciler.objects import Obj

SSSD_CONTAINER = "sssd"
SSS_VOLUME = "sss"
SSS_DIR = "/var/lib/sss"
CONF_VOLUME = "directory"
CONF_DIR = "/etc/sunk/directory"  # the ConfigMap, as the sidecar reads it
SECRETS_DIR = "/etc/sunk/directory/secrets"  # user.existingSecret, one folder per directory
TLS_DIR = "/etc/sunk/directory/tls"  # ldapsCert, one folder per directory
SUDOERS_PATH = "/etc/sudoers.d/sunk-directory"
SSHD_SNIPPET_PATH = "/etc/ssh/sshd_config.d/sunk-directory.conf"
NSSWITCH_PATH = "/etc/nsswitch.conf"
AUTHORIZED_KEYS_COMMAND = "/usr/bin/sss_ssh_authorizedkeys"
# The sssd.conf keys whose value a directory entry writes, and that entry's key.
_USER_KEYS = {"ldap_uri": "ldapUri", "ldap_search_base": "user.searchBase",
              "ldap_default_bind_dn": "user.bindDn", "default_shell": "defaultShell",
              "fallback_homedir": "fallbackHomeDir",
              "override_homedir": "overrideHomeDir"}  # fmt: skip

# The sidecar's start: /etc/sssd as sssd demands it (root-owned, 0600 files, snippets in
# conf.d), the emptyDir's folders sssd expects the package to have made, a CA from ldapsCert
# when its Secret has one, then sssd in the foreground, logging to the container's output.
SSSD_START = f"""set -eu
install -d -m 0755 {SSS_DIR} {SSS_DIR}/pipes {SSS_DIR}/pubconf {SSS_DIR}/gpo_cache
install -d -m 0775 {SSS_DIR}/mc
install -d -m 0700 {SSS_DIR}/db {SSS_DIR}/secrets {SSS_DIR}/pipes/private {SSS_DIR}/deskprofile
install -d -m 0711 /etc/sssd /etc/sssd/conf.d
install -m 0600 {CONF_DIR}/sssd.conf /etc/sssd/sssd.conf
for f in {SECRETS_DIR}/*/*.conf; do [ -e "$f" ] && install -m 0600 "$f" /etc/sssd/conf.d/; done
for d in {TLS_DIR}/*; do
  [ -f "$d/ca.crt" ] || continue
  printf '[domain/%s]\\nldap_tls_cacert = %s/ca.crt\\n' "${{d##*/}}" "$d" \\
    > "/etc/sssd/conf.d/50-${{d##*/}}-ca.conf"
  chmod 0600 "/etc/sssd/conf.d/50-${{d##*/}}-ca.conf"
done
exec sssd -i --logger=stderr
"""


def enabled_directories(values: Obj) -> list[Obj]:
    return [d for _, d in _enabled(values)]


def _enabled(values: Obj) -> list[tuple[int, Obj]]:
    """(index in directoryService.directories, entry) of each enabled directory."""
    return [(i, d) for i, d in enumerate(_all_directories(values))
            if d.get("enabled", _default("enabled")) is not False]  # fmt: skip


def directory_enabled(values: Obj) -> bool:
    return bool(enabled_directories(values))


def config_map_name(release: str) -> str:
    return f"{release}-directory"


def password_secret_name(release: str, directory: Obj) -> str:
    return f"{release}-directory-{_name(directory)}-authtok"


def value_secrets(release: str, namespace: str, values: Obj) -> list[ValueSecret]:
    """The SSSD snippet for each `user.password`: `ldap_default_authtok` in a Secret, the same
    shape SUNK's "Slurm Workload Manager" page asks of an existingSecret."""
    found = []
    for index, directory in enumerate(_all_directories(values)):
        password = (directory.get("user") or {}).get("password")
        if not password or directory.get("enabled", _default("enabled")) is False:
            continue
        key = f"{_key(index)}.user.password"
        value = one_line("the authtok snippet", key, password, secret=True)
        snippet = write_lines(
            "the authtok snippet",
            [f"[domain/{_name(directory)}]", f"ldap_default_authtok = {value}"],
        )
        found.append(ValueSecret(password_secret_name(release, directory), namespace, release,
                                 "authtok.conf", key, snippet))  # fmt: skip
    return found


def _key(index: int) -> str:
    return f"directoryService.directories[{index}]"


def _all_directories(values: Obj) -> list[Obj]:
    return list((values.get("directoryService") or {}).get("directories") or [])


def _authtok_secret(release: str, directory: Obj) -> str | None:
    """The Secret holding this directory's bind password snippet, if any."""
    user = directory.get("user") or {}
    if user.get("existingSecret"):
        return str(user["existingSecret"])
    return password_secret_name(release, directory) if user.get("password") else None


# ---- the files ----------------------------------------------------------------------------


def sssd_conf(values: Obj) -> str:
    """sssd.conf: one [domain/<name>] per enabled directory, as sssd-ldap(5) spells it."""
    directories = _enabled(values)
    names = [_name(d) for _, d in directories]
    lines = ["[sssd]", "config_file_version = 2", "services = nss, pam, ssh",
             f"domains = {', '.join(names)}", "", "[nss]", "filter_users = root",
             "filter_groups = root", "", "[pam]", "", "[ssh]", ""]  # fmt: skip
    for index, directory in directories:
        lines += [f"[domain/{_name(directory)}]", *_domain(index, directory), ""]
    return write_lines("sssd.conf", lines[:-1])  # the last blank line is the file's end


def _domain(index: int, directory: Obj) -> list[str]:
    user = directory.get("user") or {}
    settings: dict[str, str] = {
        "id_provider": "ldap",
        "auth_provider": "ldap",
        "ldap_uri": directory["ldapUri"],
        "ldap_schema": directory.get("schema") or _default("schema"),
        "ldap_search_base": user.get("searchBase", ""),
        "ldap_default_bind_dn": user.get("bindDn", ""),
        # SUNK's "Slurm Workload Manager" page: Google's custom attribute.
        "ldap_user_ssh_public_key": "sshPublicKey",
        "default_shell": directory.get("defaultShell") or _default("defaultShell"),
        "fallback_homedir": directory.get("fallbackHomeDir") or _default("fallbackHomeDir"),
        "override_homedir": directory.get("overrideHomeDir", ""),
        "debug_level": _debug_level(directory.get("debugLevel", _default("debugLevel"))),
        "cache_credentials": "false",
        "enumerate": "false",
    }
    if directory.get("ldapsCert"):  # a TLS Secret: Google's client certificate and key
        folder = f"{TLS_DIR}/{_name(directory)}"
        settings["ldap_tls_cert"] = f"{folder}/tls.crt"
        settings["ldap_tls_key"] = f"{folder}/tls.key"
        settings["ldap_tls_reqcert"] = "demand"
    return [_setting(index, key, value) for key, value in settings.items() if value != ""]


def _setting(index: int, key: str, value: str) -> str:
    """One `key = value` line; a value the user wrote goes through the writer's one-line
    check, which names its values key."""
    if key in _USER_KEYS:
        value = one_line("sssd.conf", f"{_key(index)}.{_USER_KEYS[key]}", value)
    return f"{key} = {value}"


def _debug_level(level: Any) -> str:
    """YAML reads SUNK's "Slurm Workload Manager" page's `0x0200` as 512: written back as the mask
    sssd's docs use."""
    if isinstance(level, int):
        return level.__format__("#06x") if level > 9 else str(level)
    return str(level).strip()


def sudoers(values: Obj) -> str:
    """One rule per sudo group, the global list first; LDAP users have no local password,
    so the rules are NOPASSWD (their login is their SSH key)."""
    groups = sudo_group_list((values.get("directoryService") or {}).get("sudoGroups"))
    for directory in enabled_directories(values):
        groups += sudo_group_list(directory.get("sudoGroups"))
    unique = list(dict.fromkeys(groups))
    lines = ["# Rendered by sunk-reconciler from directoryService.sudoGroups."]
    lines += [f"%{_sudoers_word(group)} ALL=(ALL:ALL) NOPASSWD: ALL" for group in unique]
    return write_lines("sudoers", lines)


def _sudoers_word(group: str) -> str:
    """sudoers(5): a space or one of its special characters in a name is backslash-escaped."""
    return re.sub(r"([\s,:=\\!()#\"])", r"\\\1", group)


def sshd_snippet() -> str:
    return write_lines("sshd_config", [f"AuthorizedKeysCommand {AUTHORIZED_KEYS_COMMAND} %u",
                                       "AuthorizedKeysCommandUser nobody"])  # fmt: skip


def nsswitch_conf() -> str:
    return write_lines("nsswitch.conf", ["passwd: files sss", "group: files sss",
                                         "shadow: files", "hosts: files dns", "services: files",
                                         "netgroup: files", "sudoers: files"])  # fmt: skip


def config_map_data(values: Obj) -> dict[str, str]:
    return {"sssd.conf": sssd_conf(values), "sudoers": sudoers(values),
            "sshd_config": sshd_snippet(), "nsswitch.conf": nsswitch_conf()}  # fmt: skip


# ---- the Pod parts ------------------------------------------------------------------------


def sssd_container(image: str, release: str, values: Obj) -> Obj:
    users = [d.get("user") or {} for d in enabled_directories(values)]
    canaries = [user["canary"] for user in users if user.get("canary")]
    probe = (" && ".join(f"getent passwd {_shell_word(c)}" for c in canaries)
             or f"test -S {SSS_DIR}/pipes/nss")  # fmt: skip
    return {
        "name": SSSD_CONTAINER,
        "image": image,
        "command": ["sh", "-c", SSSD_START],
        **probes.sssd(probe, f"{SSS_DIR}/pipes/nss"),
        "resources": sidecar_resources(values, "sssd"),
        # sssd runs as root, whatever user the Pod's main container runs as (slurmctld's is
        # SlurmUser).
        "securityContext": {"runAsUser": 0, "runAsGroup": 0},
        "volumeMounts": [
            {"name": CONF_VOLUME, "mountPath": CONF_DIR, "readOnly": True},
            _file_mount(NSSWITCH_PATH, "nsswitch.conf"),
            {"name": SSS_VOLUME, "mountPath": SSS_DIR},
            *_secret_mounts(release, values),
        ],
    }


def main_container_mounts(*, login: bool) -> list[Obj]:
    """What the Pod's main container (sshd, slurmd, slurmctld, slurmdbd) mounts."""
    mounts = [
        {"name": SSS_VOLUME, "mountPath": SSS_DIR},
        _file_mount(NSSWITCH_PATH, "nsswitch.conf"),
        _file_mount(SUDOERS_PATH, "sudoers"),
    ]
    if login:
        mounts.append(_file_mount(SSHD_SNIPPET_PATH, "sshd_config"))
    return mounts


def pod_volumes(release: str, values: Obj) -> list[Obj]:
    modes = {"sssd.conf": 0o600, "sudoers": 0o440, "sshd_config": 0o644, "nsswitch.conf": 0o644}
    volumes: list[Obj] = [
        {"name": CONF_VOLUME,
         "configMap": {"name": config_map_name(release),
                       "items": [{"key": k, "path": k, "mode": m} for k, m in modes.items()]}},
        {"name": SSS_VOLUME, "emptyDir": {}},
    ]  # fmt: skip
    volumes += [{"name": volume, "secret": {"secretName": secret, "defaultMode": 0o400}}
                for volume, secret, _ in _secrets(release, values)]  # fmt: skip
    return volumes


def _secret_mounts(release: str, values: Obj) -> list[Obj]:
    return [{"name": volume, "mountPath": path, "readOnly": True}
            for volume, _, path in _secrets(release, values)]  # fmt: skip


def _secrets(release: str, values: Obj) -> list[tuple[str, str, str]]:
    """(volume, Secret, where the sidecar mounts it) for each directory's password snippet
    and ldapsCert."""
    found = []
    for directory in enabled_directories(values):
        name = _name(directory)
        if secret := _authtok_secret(release, directory):
            found.append((f"directory-{name}-authtok", secret, f"{SECRETS_DIR}/{name}"))
        if secret := directory.get("ldapsCert"):
            found.append((f"directory-{name}-tls", str(secret), f"{TLS_DIR}/{name}"))
    return found


def _file_mount(path: str, key: str) -> Obj:
    return {"name": CONF_VOLUME, "mountPath": path, "subPath": key, "readOnly": True}


def _name(directory: Obj) -> str:
    return str(directory.get("name") or _default("name"))


def _shell_word(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


def with_directory(pod: Obj, release: str, values: Obj, *, login: bool = False) -> Obj:
    """`pod` (a Pod spec whose first container is the main one) with the directory's sidecar,
    mounts and volumes; unchanged when no directory is enabled."""
    if not directory_enabled(values):
        return pod
    main, *others = pod["containers"]
    main = {**main, "volumeMounts": [*(main.get("volumeMounts") or []),
                                     *main_container_mounts(login=login)]}  # fmt: skip
    return {
        **pod,
        "containers": [main, *others, sssd_container(main["image"], release, values)],
        "volumes": [*(pod.get("volumes") or []), *pod_volumes(release, values)],
    }


def _default(key: str) -> Any:
    """A directory entry's default, as its Key declares it."""
    return default_in(DIRECTORY_ENTRY, key)
