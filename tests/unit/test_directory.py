"""directoryService (SUNK's "Slurm Workload Manager" page): what a values file's directories render
into, which Pods carry the sssd sidecar, and what is refused or reported. The rendered files are
checked by the real validators (sssctl, visudo) in tests/integration/test_directory_local.py."""

from __future__ import annotations

import base64
import json

import pytest

from reconciler.apply.kube_objects import with_value_secret_data
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.directory import SSSD_CONTAINER
from reconciler.compile.value_secrets import data_digest
from reconciler.errors import ConfigTypeError
from reconciler.plan.diff import plan_changes
from reconciler.plan.jsonout import plan_from_dict, plan_to_dict, render_json
from reconciler.plan.live import LiveState
from reconciler.plan.model import Action, Change, ObjectRef
from reconciler.plan.text import render_text
from reconciler.wellknown import ANNOTATION_FROM_VALUES
from tests.unit.conftest import config_from
from tests.unit.test_control_plane import NODES, container, objects, pod_of

# The "Google Secure LDAP" example of SUNK's "Slurm Workload Manager" page, as written there
# (debugLevel unquoted: YAML reads 0x0200 as the integer 512).
GOOGLE = """
directoryService:
  sudoGroups:
    - group1
  directories:
  - name: default
    enabled: true
    debugLevel: 0x0200
    ldapUri: ldaps://ldap.google.com:636
    defaultShell: "/bin/bash"
    fallbackHomeDir: "/home/%u"
    ldapsCert: ldap-certificate
    schema: rfc2307bis
"""

TWO = """
directoryService:
  sudoGroups: [admins, "domain admins"]
  directories:
  - name: default
    ldapUri: ldap://ldap.example:389
    sudoGroups: [admins, ops]
    overrideHomeDir: /mnt/home/%u
    user:
      bindDn: cn=reader,dc=example
      searchBase: dc=example
      existingSecret: slurm-ldap-password
      canary: svc-canary
  - name: corp
    ldapUri: ldaps://ad.corp.example
    user: {canary: "o'brien"}
  - name: old
    enabled: false
    ldapUri: ldap://old.example
"""


def state_of(values: str) -> DesiredState:
    return compile_desired_state(config_from(values + NODES.format(mounts="mounts: []")))


def directory_data(state: DesiredState) -> dict[str, str]:
    return objects(state)[("ConfigMap", "slurm-directory")]["data"]


def test_the_slurm_pages_google_example_renders_its_domain() -> None:
    conf = directory_data(state_of(GOOGLE))["sssd.conf"]
    domain = conf.split("[domain/default]\n", 1)[1].splitlines()
    assert "ldap_uri = ldaps://ldap.google.com:636" in domain
    assert "ldap_schema = rfc2307bis" in domain
    assert "debug_level = 0x0200" in domain  # not 512
    assert "fallback_homedir = /home/%u" in domain
    assert "ldap_user_ssh_public_key = sshPublicKey" in domain
    # The TLS Secret (kubectl create secret tls): Google's client certificate and key.
    assert "ldap_tls_cert = /etc/sunk/directory/tls/default/tls.crt" in domain
    assert "ldap_tls_key = /etc/sunk/directory/tls/default/tls.key" in domain
    assert not any(line.startswith("override_homedir") for line in domain)


def test_every_enabled_directory_is_a_domain_and_a_disabled_one_is_not() -> None:
    conf = directory_data(state_of(TWO))["sssd.conf"]
    assert "domains = default, corp" in conf.splitlines()
    assert "[domain/old]" not in conf and "old.example" not in conf
    assert "override_homedir = /mnt/home/%u" in conf.splitlines()
    assert "ldap_default_bind_dn = cn=reader,dc=example" in conf.splitlines()


def test_sudo_groups_global_then_per_directory_once_each_escaped() -> None:
    sudoers = directory_data(state_of(TWO))["sudoers"].splitlines()[1:]
    assert sudoers == [
        "%admins ALL=(ALL:ALL) NOPASSWD: ALL",
        "%domain\\ admins ALL=(ALL:ALL) NOPASSWD: ALL",
        "%ops ALL=(ALL:ALL) NOPASSWD: ALL",
    ]


def test_sidecar_in_every_pod_that_resolves_users_and_sshd_keys_only_on_login() -> None:
    found = objects(state_of(TWO))
    carriers = {name for (kind, name), o in found.items() if kind in ("Deployment", "StatefulSet")
                and any(c["name"] == SSSD_CONTAINER for c in pod_of(o)["containers"])}  # fmt: skip
    assert carriers == {"slurm-login", "slurm-controller", "slurm-cpu"}  # no accounting here
    login = found[("StatefulSet", "slurm-login")]
    paths = {m["mountPath"] for m in container(login, "sshd")["volumeMounts"]}
    assert {"/var/lib/sss", "/etc/nsswitch.conf", "/etc/sudoers.d/sunk-directory",
            "/etc/ssh/sshd_config.d/sunk-directory.conf"} <= paths  # fmt: skip
    slurmd = {m["mountPath"] for m in container(found[("StatefulSet", "slurm-cpu")],
                                                  "slurmd")["volumeMounts"]}  # fmt: skip
    assert "/var/lib/sss" in slurmd and "/etc/ssh/sshd_config.d/sunk-directory.conf" not in slurmd
    assert all(c["name"] != SSSD_CONTAINER
               for c in pod_of(found[("Deployment", "slurm-rest")])["containers"])  # fmt: skip


def test_sidecar_reads_the_password_snippet_secret_and_probes_every_canary() -> None:
    login = objects(state_of(TWO))[("StatefulSet", "slurm-login")]
    sidecar = container(login, SSSD_CONTAINER)
    volumes = {v["name"]: v for v in pod_of(login)["volumes"]}
    assert volumes["directory-default-authtok"]["secret"]["secretName"] == "slurm-ldap-password"
    assert "/etc/sunk/directory/secrets/default" in {m["mountPath"]
                                                     for m in sidecar["volumeMounts"]}  # fmt: skip
    probe = sidecar["readinessProbe"]["exec"]["command"][-1]
    assert probe == "getent passwd 'svc-canary' && getent passwd 'o'\\''brien'"
    assert sidecar["securityContext"]["runAsUser"] == 0
    modes = {i["key"]: i["mode"] for i in volumes["directory"]["configMap"]["items"]}
    assert modes["sssd.conf"] == 0o600 and modes["sudoers"] == 0o440


def test_no_directory_renders_nothing_of_it() -> None:
    found = objects(state_of(""))
    assert ("ConfigMap", "slurm-directory") not in found
    assert all(c["name"] != SSSD_CONTAINER for (kind, _), o in found.items()
               if kind in ("Deployment", "StatefulSet")
               for c in pod_of(o)["containers"])  # fmt: skip


PASSWORD = "Pa55-w0rd-xyz"
WITH_PASSWORD = TWO.replace("existingSecret: slurm-ldap-password", f"password: {PASSWORD}")


def test_a_password_in_values_becomes_a_secret_shown_without_its_data() -> None:
    state = state_of(WITH_PASSWORD)
    (secret,) = state.value_secrets
    assert secret.name == "slurm-directory-default-authtok"
    assert secret.with_data()["data"]["authtok.conf"] == base64.b64encode(
        f"[domain/default]\nldap_default_authtok = {PASSWORD}\n".encode()).decode()  # fmt: skip
    shown = secret.manifest()
    assert "data" not in shown and PASSWORD not in repr(shown) + repr(secret)
    assert shown["metadata"]["annotations"][ANNOTATION_FROM_VALUES] == (
        "authtok.conf: directoryService.directories[0].user.password"
    )
    login = objects(state)[("StatefulSet", "slurm-login")]
    volumes = {v["name"]: v for v in pod_of(login)["volumes"]}
    assert volumes["directory-default-authtok"]["secret"]["secretName"] == secret.name
    assert PASSWORD not in repr(state.kube_objects) + "".join(str(w) for w in state.warnings)


def test_plan_creates_then_updates_the_password_secret_and_never_shows_the_password() -> None:
    state = state_of(WITH_PASSWORD)
    (secret,) = state.value_secrets
    ref = ObjectRef("kubernetes", "Secret", "slurm", secret.name)

    def secret_changes(live: LiveState) -> list[Change]:
        plan = plan_changes(state, live)
        for text in (render_text(plan, color=False), render_json(plan), repr(plan)):
            assert PASSWORD not in text
        return [c for c in plan.changes if c.ref == ref]

    (created,) = secret_changes(LiveState({}))
    assert created.action is Action.CREATE and created.payload == secret.with_data()
    same = LiveState({}, secrets=frozenset({secret.name}),
                     secret_digests={secret.name: secret.digest()})  # fmt: skip
    assert secret_changes(same) == []
    other = data_digest({"authtok.conf": b"[domain/default]\nldap_default_authtok = old\n"})
    changed = LiveState({}, secrets=frozenset({secret.name}),
                        secret_digests={secret.name: other})  # fmt: skip
    (updated,) = secret_changes(changed)
    assert updated.action is Action.UPDATE and "data from" in updated.notes[0]


def test_password_and_existing_secret_together_are_refused() -> None:
    values = TWO.replace("existingSecret: slurm-ldap-password",
                         "existingSecret: slurm-ldap-password\n      password: x")  # fmt: skip
    with pytest.raises(ConfigTypeError) as raised:
        state_of(values)
    assert "directoryService.directories[0].user.password" in str(raised.value)
    assert "both set" in str(raised.value)


def test_an_unknown_directory_key_is_reported_with_a_suggestion() -> None:
    config = config_from(TWO.replace("overrideHomeDir:", "overideHomeDir:")
                         + NODES.format(mounts="mounts: []"))  # fmt: skip
    texts = [str(w) for w in config.warnings]
    assert any("'overideHomeDir'" in t and "did you mean 'overrideHomeDir'" in t for t in texts)


@pytest.mark.parametrize(
    ("change", "where", "says"),
    [
        (("ldapUri: ldap://ldap.example:389", "ldapUri: ldap.example"),
         "directoryService.directories[0].ldapUri", "ldap:// or ldaps://"),
        (("name: corp", "name: default"), "directoryService.directories[1].name", "twice"),
        (("name: corp", "name: Corp_AD"), "directoryService.directories[1].name", "lowercase"),
        (("sudoGroups: [admins, ops]", "sudoGroups: [admins, 'ops,all']"),
         "directoryService.directories[0].sudoGroups[1]", "group name"),
        (("ldapUri: ldaps://ad.corp.example", "ldapUri: ldaps://ad\n    schema: ad"),
         "directoryService.directories[1].schema", "rfc2307bis"),
        (("overrideHomeDir: /mnt/home/%u", "overrideHomeDir: 7"),
         "directoryService.directories[0].overrideHomeDir", "must be a string"),
    ],
)  # fmt: skip
def test_wrong_values_name_the_key(change: tuple[str, str], where: str, says: str) -> None:
    values = TWO.replace(*change)
    assert values != TWO
    with pytest.raises(ConfigTypeError) as raised:
        state_of(values)
    text = str(raised.value)
    assert where in text and says in text, text


def test_a_saved_plan_holds_no_password_and_apply_takes_it_from_values() -> None:
    state = state_of(WITH_PASSWORD)
    plan = plan_changes(state, LiveState({}))
    saved = json.dumps(plan_to_dict(plan))
    assert PASSWORD not in saved
    loaded = plan_from_dict(json.loads(saved))
    (secret,) = [c for c in loaded.changes if c.ref.name == "slurm-directory-default-authtok"]
    assert secret.payload is None
    again = with_value_secret_data(loaded, state)
    (filled,) = [c for c in again.changes if c.ref == secret.ref]
    assert filled.payload == state.value_secrets[0].with_data()
    gone = with_value_secret_data(loaded, state_of(TWO))  # the repo has no password any more
    assert [c.payload for c in gone.changes if c.ref == secret.ref] == [None]
