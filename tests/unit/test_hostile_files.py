"""Issue 31, item 7: no value from git adds a line, a section or a key to a file we render,
beyond slurm.conf (test_slurm_conf_injection.py): sssd.conf, the authtok snippet, plugstack.conf,
enroot.conf, sudoers, the s6 and prolog scripts, topology.conf, gres.conf.

Each attack below rendered before the fix (`ldapUri: "ldaps://x\\n[domain/evil]\\n..."` made a
second SSSD domain; `defaultShell` and `user.password` set `ldap_tls_reqcert = never`;
`pluginPath` loaded a second SPANK plugin). Now each is refused where it is written, naming the
file, line and key, never the value; the writer every line-oriented file goes through refuses
what still reaches it (compile/lines.py).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.errors import ReconcilerError
from tests.unit.conftest import config_from

NODES = "compute:\n  nodes:\n    cpu: {definitions: [cpu-epyc], replicas: 1}\n"
_NODES_ONLY = NODES.split("\n", 1)[1]  # to follow other compute: keys


def _map(state: DesiredState, name: str) -> dict[str, str]:
    found = [o for o in state.kube_objects if o["kind"] == "ConfigMap"]
    data: dict[str, str] = next(o for o in found if o["metadata"]["name"] == name)["data"]
    return data


def _directory(entry: str) -> str:
    """values.yaml with one directory; `entry` is its YAML flow mapping's inside."""
    return NODES + "directoryService:\n  directories:\n  - {name: default, " + entry + "}\n"


def _refusal(values: str) -> str:
    with pytest.raises(ReconcilerError) as err:
        compile_desired_state(config_from(values))
    return str(err.value)


# ---- the reported attacks, reproduced --------------------------------------------------------

SSSD_ATTACKS = {
    "ldapUri adds a domain": (
        'ldapUri: "ldaps://ldap.example:636\\n[domain/evil]\\nid_provider = files"',
        "directoryService.directories[0].ldapUri",
    ),
    "defaultShell turns TLS checks off": (
        'ldapUri: "ldaps://ldap.example", defaultShell: "/bin/bash\\nldap_tls_reqcert = never"',
        "directoryService.directories[0].defaultShell",
    ),
    "password adds a key to the authtok snippet": (
        'ldapUri: "ldaps://ldap.example", user: {password: "s3cret\\nldap_tls_reqcert = never"}',
        "directoryService.directories[0].user.password",
    ),
}


@pytest.mark.parametrize("entry, key", SSSD_ATTACKS.values(), ids=SSSD_ATTACKS.keys())
def test_a_directory_value_with_a_line_break_is_refused_naming_the_key(
    entry: str, key: str
) -> None:
    text = _refusal(_directory(entry))
    assert text.startswith(f"values.yaml:6 ({key}): "), text
    assert "\n  hint: " in text and text.count("\n") == 1


def test_the_password_is_never_in_the_refusal() -> None:
    entry = 'ldapUri: "ldaps://x", user: {password: "hunter2\\rdebug_level = 9"}'
    text = _refusal(_directory(entry))
    assert "hunter2" not in text and "debug_level" not in text
    assert "directoryService.directories[0].user.password" in text


PYXIS_ATTACKS = {
    "a line break loads a second plugin": "/usr/lib/slurm/spank_pyxis.so\\nrequired /tmp/x.so",
    "a space adds an argument": "/usr/local/lib/slurm/spank_pyxis.so container_scope=job",
    "a tab adds an argument": "/usr/local/lib/slurm/spank_pyxis.so\\tsbatch_support=0",
    "a '#' comments out pyxis's arguments": "/usr/local/lib/slurm/spank_pyxis.so#",
}


@pytest.mark.parametrize("path", PYXIS_ATTACKS.values(), ids=PYXIS_ATTACKS.keys())
def test_a_plugin_path_that_is_more_than_one_word_is_refused(path: str) -> None:
    text = _refusal(f'compute:\n  pyxis: {{enabled: true, pluginPath: "{path}"}}\n' + _NODES_ONLY)
    assert text.startswith("values.yaml:2 (compute.pyxis.pluginPath): "), text


def test_a_plugin_path_longer_than_the_line_slurm_reads_is_refused() -> None:
    """spank reads plugstack.conf with fgets into 4,096 bytes: the rest of a longer line is read
    as a line of its own."""
    path = "/" + "a" * 4000 + "/x.so"
    values = f"compute:\n  pyxis: {{enabled: true, pluginPath: {path}}}\n" + _NODES_ONLY
    assert _refusal(values).startswith("values.yaml:2 (compute.pyxis.pluginPath): ")


# ---- every single-line value of the files we render ------------------------------------------

CONTROLS = {"line feed": "\\n", "carriage return": "\\r", "NUL": "\\0", "tab": "\\t",
            "escape": "\\e", "NEL": "\\N", "line separator": "\\L", "paragraph separator": "\\P",
            "C1 CSI": "\\x9b", "vertical tab": "\\v", "form feed": "\\f"}  # fmt: skip
DIRECTORY_KEYS = {
    "ldapUri": ("ldapUri: \"ldaps://x{c}y\"", "ldapUri"),
    "defaultShell": ("ldapUri: ldaps://x, defaultShell: \"/bin/{c}sh\"", "defaultShell"),
    "fallbackHomeDir": ("ldapUri: ldaps://x, fallbackHomeDir: \"/home/{c}%u\"", "fallbackHomeDir"),
    "overrideHomeDir": ("ldapUri: ldaps://x, overrideHomeDir: \"/h/{c}%u\"", "overrideHomeDir"),
    "user.bindDn": ("ldapUri: ldaps://x, user: {{bindDn: \"cn=a{c},dc=b\"}}", "user.bindDn"),
    "user.searchBase": ("ldapUri: ldaps://x, user: {{searchBase: \"dc={c}b\"}}", "user.searchBase"),
    "user.password": ("ldapUri: ldaps://x, user: {{password: \"p{c}w\"}}", "user.password"),
    "user.canary": ("ldapUri: ldaps://x, user: {{canary: \"svc{c}\"}}", "user.canary"),
    "user.existingSecret": (
        "ldapUri: ldaps://x, user: {{existingSecret: \"s{c}\"}}", "user.existingSecret"
    ),
    "ldapsCert": ("ldapUri: ldaps://x, ldapsCert: \"cert{c}\"", "ldapsCert"),
}


@pytest.mark.parametrize("control", CONTROLS.values(), ids=CONTROLS.keys())
@pytest.mark.parametrize("entry, key", DIRECTORY_KEYS.values(), ids=DIRECTORY_KEYS.keys())
def test_every_directory_string_refuses_every_control_character(
    entry: str, key: str, control: str
) -> None:
    text = _refusal(_directory(entry.format(c=control)))
    assert text.startswith(f"values.yaml:6 (directoryService.directories[0].{key}): "), text


# ---- scripts: multi-line by nature ------------------------------------------------------------


def _s6(script: str) -> str:
    return f"compute:\n  s6:\n    boot: {{type: oneshot, script: {json.dumps(script)}}}\n" + (
        _NODES_ONLY
    )


@pytest.mark.parametrize("bad", ["\r", "\x00", "\x1b", "\x08", "\u2028", "\x85"])
def test_an_s6_script_refuses_what_has_no_business_in_a_script(bad: str) -> None:
    text = _refusal(_s6(f"#!/bin/sh\necho hi{bad}\n"))
    assert text.startswith("values.yaml:3 (compute.s6.boot.script): "), text
    assert "line 2" in text


def test_a_windows_script_is_refused_with_a_hint_to_convert_it() -> None:
    text = _refusal(_s6("#!/bin/sh\r\necho hi\r\n"))
    assert "line 1" in text and "LF" in text


def test_an_s6_script_keeps_its_line_breaks_and_tabs() -> None:
    script = "#!/bin/sh\nif true; then\n\techo 'a\tb'\nfi\n"
    state = compile_desired_state(config_from(_s6(script)))
    assert _map(state, "slurm-s6")["boot.script"] == script


PROLOGS = {
    "inline prolog": ('slurmConfig: {slurmd: {prolog: "#!/bin/sh\\r\\ntrue"}}',
                      "values.yaml:1 (slurmConfig.slurmd.prolog)"),
    "epilog file": ('slurmConfig: {slurmd: {epilog: {"00-a.sh": "#!/bin/sh\\n\\0"}}}',
                    "values.yaml:1 (slurmConfig.slurmd.epilog.00-a.sh)"),
    "epilog file name": ('slurmConfig: {slurmd: {epilog: {"a\\n.sh": "#!/bin/sh\\n"}}}',
                         "values.yaml:1 (slurmConfig.slurmd.epilog)"),
}  # fmt: skip


@pytest.mark.parametrize("values, where", PROLOGS.values(), ids=PROLOGS.keys())
def test_prolog_and_epilog_scripts_follow_the_script_rule(values: str, where: str) -> None:
    assert _refusal(values + "\n" + NODES).startswith(where + ": ")


# ---- allowed values render byte for byte as before --------------------------------------------

ALLOWED = NODES + """\
  pyxis: {enabled: true, required: false, pluginPath: /usr/lib/slurm/spank_pyxis.so}
  s6:
    packages: {type: oneshot, script: "#!/usr/bin/env bash\\n\\tapt -y install nginx\\n"}
    nginx: {type: longrun, script: "#!/usr/bin/env bash\\nnginx -g 'daemon off;'\\n"}
  topology: {plugin: tree, switchLabels: [example.com/leaf]}
slurmConfig:
  slurmd:
    prolog: "#!/bin/sh\\necho prolog\\n"
    epilog: {00-a.sh: "#!/bin/sh\\n", 10-b.sh: "#!/bin/bash\\nexit 0\\n"}
directoryService:
  sudoGroups: [admins, "domain admins", ops@corp.example]
  directories:
  - name: default
    ldapUri: ldaps://ldap.google.com:636,ldaps://backup.example
    defaultShell: /bin/zsh
    fallbackHomeDir: /home/%u
    overrideHomeDir: /mnt/home/%d/%u
    debugLevel: 0x0200
    ldapsCert: ldap-certificate
    schema: rfc2307bis
    user:
      bindDn: "cn=reader,ou=Service Accounts,dc=example"
      searchBase: dc=example?subtree?(objectClass=posixAccount)
      password: "p@ss word;#[x] = y"
      canary: "o'brien"
  - name: corp
    ldapUri: ldap://ad.corp.example
    user: {existingSecret: corp-ldap}
"""
# sha256 of every rendered ConfigMap's data and the authtok snippet, taken on main before the
# fix (5d473e8): a value that was safe renders exactly as it did.
ALLOWED_DIGEST = "d077c3269cced44a604f3bf978c1bbb17b888f8c0169caf337c76e49977c9164"


def _rendered(state: DesiredState) -> dict[str, Any]:
    maps = {o["metadata"]["name"]: o["data"] for o in state.kube_objects
            if o["kind"] == "ConfigMap"}  # fmt: skip
    return {"maps": maps, "secrets": {s.name: s.data for s in state.value_secrets}}


def test_allowed_values_render_byte_identical() -> None:
    rendered = json.dumps(_rendered(compile_desired_state(config_from(ALLOWED))), sort_keys=True)
    assert hashlib.sha256(rendered.encode()).hexdigest() == ALLOWED_DIGEST
