"""No value from git adds a line, a section or a key to a file we render,
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
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import cli
from reconciler.compile import directory, pyxis
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.lines import write_lines, write_script
from reconciler.compile.s6_services import S6Service, s6_config_map_data
from reconciler.errors import LineInjectionError, ReconcilerError
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


def test_render_prints_one_refusal_line_and_a_hint_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = 'ldapUri: "ldaps://x\\n[domain/evil]", user: {password: "pw\\nx = y"}'
    (tmp_path / "values.yaml").write_text(_directory(entry))
    assert cli.main(["render", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: values.yaml:6 (directoryService.directories[0].ldapUri): ")
    assert len(err.strip().splitlines()) == 2 and "hint:" in err and "Traceback" not in err


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
    "ldapUri": ('ldapUri: "ldaps://x{c}y"', "ldapUri"),
    "defaultShell": ('ldapUri: ldaps://x, defaultShell: "/bin/{c}sh"', "defaultShell"),
    "fallbackHomeDir": ('ldapUri: ldaps://x, fallbackHomeDir: "/home/{c}%u"', "fallbackHomeDir"),
    "overrideHomeDir": ('ldapUri: ldaps://x, overrideHomeDir: "/h/{c}%u"', "overrideHomeDir"),
    "user.bindDn": ('ldapUri: ldaps://x, user: {{bindDn: "cn=a{c},dc=b"}}', "user.bindDn"),
    "user.searchBase": ('ldapUri: ldaps://x, user: {{searchBase: "dc={c}b"}}', "user.searchBase"),
    "user.password": ('ldapUri: ldaps://x, user: {{password: "p{c}w"}}', "user.password"),
    "user.canary": ('ldapUri: ldaps://x, user: {{canary: "svc{c}"}}', "user.canary"),
    "user.existingSecret": (
        'ldapUri: ldaps://x, user: {{existingSecret: "s{c}"}}',
        "user.existingSecret",
    ),
    "ldapsCert": ('ldapUri: ldaps://x, ldapsCert: "cert{c}"', "ldapsCert"),
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

ALLOWED = (
    NODES
    + """\
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
)
# sha256 of every rendered ConfigMap's data and the authtok snippet, taken on main before the
# fix (5d473e8): a value that was safe renders exactly as it did. Retaken when slurm.conf's
# SlurmctldPidFile moved to /run/slurmctld/ (for our image; the only change: replacing that path
# with the old one gives the old digest, d077c326...).
ALLOWED_DIGEST = "730c429bb7c0efc8decceef02bbbf376979abcd620c1a0e539d3a3d98d0af5e2"


def _rendered(state: DesiredState) -> dict[str, Any]:
    maps = {o["metadata"]["name"]: o["data"] for o in state.kube_objects
            if o["kind"] == "ConfigMap"}  # fmt: skip
    return {"maps": maps, "secrets": {s.name: s.data for s in state.value_secrets}}


def test_allowed_values_render_byte_identical() -> None:
    rendered = json.dumps(_rendered(compile_desired_state(config_from(ALLOWED))), sort_keys=True)
    assert hashlib.sha256(rendered.encode()).hexdigest() == ALLOWED_DIGEST


# ---- the writer: the last guard, whatever a value's source ------------------------------------


def test_sssd_conf_refuses_a_line_break_that_no_config_check_saw() -> None:
    """Values straight into the renderer (as a future source might hand them): the writer
    names the file and the key."""
    values = {"directoryService": {"directories": [
        {"name": "default", "ldapUri": "ldaps://x"},
        {"name": "b", "ldapUri": "ldaps://y", "defaultShell": "/bin/sh\n[domain/evil]"},
    ]}}  # fmt: skip
    with pytest.raises(
        LineInjectionError,
        match=r"^sssd.conf: directoryService.directories"
        r"\[1\].defaultShell holds a line feed \(U\+000A\)",
    ):
        directory.sssd_conf(values)


def test_the_authtok_writer_never_shows_the_password() -> None:
    values = {"directoryService": {"directories": [
        {"name": "default", "ldapUri": "ldaps://x", "user": {"password": "hunter2\u2028x = y"}},
    ]}}  # fmt: skip
    with pytest.raises(LineInjectionError) as err:
        directory.value_secrets("slurm", "default", values)
    assert "hunter2" not in str(err.value)
    assert "directoryService.directories[0].user.password" in str(err.value)


def test_plugstack_refuses_a_line_spank_would_read_as_two() -> None:
    values = {"compute": {"pyxis": {"enabled": True, "pluginPath": "/" + "a" * 4050}}}
    with pytest.raises(LineInjectionError, match=r"plugstack.conf line 2 is longer than the 4094"):
        pyxis.render_plugstack_conf(values)
    values["compute"]["pyxis"]["pluginPath"] = "/x.so\rrequired /y.so"
    with pytest.raises(LineInjectionError, match=r"compute.pyxis.pluginPath holds a carriage"):
        pyxis.render_plugstack_conf(values)


def test_an_s6_script_that_no_config_check_saw_is_refused() -> None:
    with pytest.raises(LineInjectionError, match=r"^compute.s6.boot.script line 1 holds a NUL"):
        s6_config_map_data([S6Service("boot", "oneshot", "#!/bin/sh\x00\n")])


@pytest.mark.parametrize("line", ["a\nb", "a\rb", "a\x00", "\x1b[2K", "a\u2029", "a\x85b"])
def test_write_lines_refuses_a_line_holding_a_control_character(line: str) -> None:
    with pytest.raises(LineInjectionError, match=r"^x.conf line 2 holds "):
        write_lines("x.conf", ["ok\tfine", line])


def test_write_lines_and_write_script_keep_what_they_are_given() -> None:
    assert write_lines("x.conf", ["a = b", "", "\tc"]) == "a = b\n\n\tc\n"
    assert write_script("k", "#!/bin/sh\n\techo hi") == "#!/bin/sh\n\techo hi"


# ---- property: no value with a control character reaches a rendered file ----------------------

# Letters, the characters the formats give a meaning (sections, keys, comments, separators),
# and every kind of line break and control character.
_ALPHABET = st.sampled_from(list("aZ/:_=,#;[] \t\n\r\x00\x0b\x0c\x1b\x1c\x85\x9b\u2028\u2029\"'\\"))
_SSSD_KEYS = ("ldapUri", "defaultShell", "fallbackHomeDir", "user.password", "user.bindDn")


def _ini_shape(text: str) -> list[str]:
    """Sections and keys, line by line, as sssd's ini reader sees them (comments start a line)."""
    return [line.split("=", 1)[0].strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith(("#", ";"))]  # fmt: skip


def _with(key: str, value: str) -> DesiredState:
    """One directory whose `key` is `value` (an ldapUri after `ldaps://`), with a password."""
    if key == "ldapUri":
        return compile_desired_state(config_from(_directory(
            f"ldapUri: {json.dumps('ldaps://' + value)}, user: {{password: pw}}")))  # fmt: skip
    user = {"password": "pw", **({key[5:]: value} if key.startswith("user.") else {})}
    entry = {"ldapUri": "ldaps://x", "user": user, **({} if "." in key else {key: value})}
    return compile_desired_state(config_from(_directory(json.dumps(entry)[1:-1])))


def _control_free(text: str) -> bool:
    return all(c in "\n\t" or not (c < " " or "\x7f" <= c <= "\x9f" or c in "\u2028\u2029")
               for c in text)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_SSSD_KEYS), st.text(_ALPHABET, min_size=1, max_size=16))
def test_no_directory_value_adds_a_line_a_section_or_a_key(key: str, value: str) -> None:
    """Whatever the text, it is refused, or sssd.conf and the authtok snippet have the shape
    (sections and keys, in order) a plain value of that key gives them."""
    try:
        state = _with(key, value)
    except ReconcilerError:
        return
    plain = _with(key, "v")
    sssd, snippet = _map(state, "slurm-directory")["sssd.conf"], state.value_secrets[0].data
    assert _control_free(sssd) and _control_free(snippet)
    assert _ini_shape(sssd) == _ini_shape(_map(plain, "slurm-directory")["sssd.conf"])
    assert _ini_shape(snippet) == _ini_shape(plain.value_secrets[0].data)


@settings(max_examples=200, deadline=None)
@given(st.text(_ALPHABET, min_size=1, max_size=16))
def test_no_plugin_path_adds_a_plugin_or_an_argument(path: str) -> None:
    values = f"compute:\n  pyxis: {{enabled: true, pluginPath: {json.dumps(path)}}}\n"
    try:
        state = compile_desired_state(config_from(values + _NODES_ONLY))
    except ReconcilerError:
        return
    lines = _map(state, "slurm-slurm-conf")["plugstack.conf"].split("#", 2)[1].splitlines()
    words = lines[1].split()
    assert len(lines) == 2 and words[1] == path and len(words) == 6
