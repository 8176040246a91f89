"""The directory of `reconciler local up --directory`: Debian's slapd on a loopback port, with
a private config and database under the stack's runtime directory, seeded with a few users,
groups and SSH keys, and the values and Secret that point the stack's Pods at it.

The users: alice (groups researchers and slurm-admins, the sudo group) and bob (researchers). Each
has an ed25519 key pair in `<runtime>/directory/keys/`; the public half is the user's `sshPublicKey`
in LDAP, as SUNK's "Slurm Workload Manager" page's Google Secure LDAP setup has it. sssd binds as
cn=sssd with a generated password: the SSSD snippet that carries it is a file for `kubectl create
secret`, never a value.

slapd speaks LDAPS only, with a certificate from a CA made for this stack, so the Pods reach it as
SUNK's "Slurm Workload Manager" page's Google example does: `ldaps://` plus `ldapsCert`, a TLS
Secret (a client certificate and key, and the CA as `ca.crt`).
"""

from __future__ import annotations

import json
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import LocalStackError
from reconciler.local.ports import free_port, is_accepting
from reconciler.local.processes import Supervisor

SLAPD = "/usr/sbin/slapd"
SLAPADD = "/usr/sbin/slapadd"
SCHEMAS = Path("/etc/ldap/schema")
BASE_DN = "dc=sunk,dc=test"
BIND_DN = f"cn=sssd,{BASE_DN}"
SECRET_NAME = "slurm-ldap-password"  # the Secret directoryService...user.existingSecret names
SECRET_KEY = "ldap-password.conf"  # SUNK's "Slurm Workload Manager" page: the key ends in .conf
TLS_SECRET_NAME = "slurm-ldap-tls"  # the Secret directoryService...ldapsCert names
SUDO_GROUP = "slurm-admins"
DAEMON = "slapd"
READY_SECONDS = 30.0

# (name, uid, [groups]); the first group is the primary one.
USERS = (("alice", 10001, ["researchers", SUDO_GROUP]), ("bob", 10002, ["researchers"]))
GROUPS = {"researchers": 10001, SUDO_GROUP: 10010}

# The OpenSSH LPK attribute (sshPublicKey), which Debian's slapd does not ship: Google's
# custom attribute of the same name is what SUNK's "Slurm Workload Manager" page reads.
LPK_SCHEMA = """attributetype ( 1.3.6.1.4.1.24552.500.1.1.1.13 NAME 'sshPublicKey'
  DESC 'OpenSSH public key' EQUALITY octetStringMatch
  SYNTAX 1.3.6.1.4.1.1466.115.121.1.40 )
objectclass ( 1.3.6.1.4.1.24552.500.1.1.2.0 NAME 'ldapPublicKey' SUP top AUXILIARY
  DESC 'OpenSSH LPK objectclass' MUST uid MAY sshPublicKey )
"""


@dataclass(frozen=True)
class DirectoryRecord:
    port: int

    @property
    def uri(self) -> str:
        return f"ldaps://127.0.0.1:{self.port}"


class LocalDirectory:
    def __init__(self, root: Path, supervisor: Supervisor) -> None:
        self.root = root
        self.supervisor = supervisor

    @property
    def keys(self) -> Path:
        return self.root / "keys"

    @property
    def secret_file(self) -> Path:
        return self.root / SECRET_KEY

    @property
    def tls(self) -> Path:
        return self.root / "tls"

    def tls_secret_data(self) -> dict[str, bytes]:
        """The ldapsCert Secret's keys (kubernetes.io/tls, plus ca.crt)."""
        return {"tls.crt": (self.tls / "client.crt").read_bytes(),
                "tls.key": (self.tls / "client.key").read_bytes(),
                "ca.crt": (self.tls / "ca.crt").read_bytes()}  # fmt: skip

    @property
    def values_file(self) -> Path:
        return self.root / "directory-values.yaml"

    def record(self) -> DirectoryRecord | None:
        path = self.root / "directory.json"
        return DirectoryRecord(**json.loads(path.read_text())) if path.exists() else None

    def start(self) -> DirectoryRecord:
        """slapd on a free loopback port, its database seeded on the first start."""
        previous = self.record()
        record = DirectoryRecord(previous.port if previous else free_port())
        self.root.mkdir(parents=True, exist_ok=True)
        make_tls(self.tls)
        conf = self._write_config()
        if not (self.root / "data" / "data.mdb").exists():
            self._seed(conf)
        self.supervisor.start(DAEMON, [SLAPD, "-d", "0", "-f", str(conf), "-h",
                                       f"{record.uri}/"])  # fmt: skip
        self.supervisor.wait_ready(DAEMON, lambda: is_accepting(record.port),
                                   timeout=READY_SECONDS)  # fmt: skip
        (self.root / "directory.json").write_text(json.dumps({"port": record.port}))
        self.values_file.write_text(directory_values(record))
        return record

    def _write_config(self) -> Path:
        (self.root / "lpk.schema").write_text(LPK_SCHEMA)
        (self.root / "data").mkdir(exist_ok=True)
        password = self._bind_password()
        conf = self.root / "slapd.conf"
        conf.write_text(slapd_conf(self.root, admin_password=secrets.token_urlsafe(24)))
        conf.chmod(0o600)
        self.secret_file.write_text(f"[domain/default]\nldap_default_authtok = {password}\n")
        self.secret_file.chmod(0o600)
        return conf

    def _bind_password(self) -> str:
        path = self.root / "bind-password"
        if not path.exists():
            path.write_text(secrets.token_urlsafe(24))
            path.chmod(0o600)
        return path.read_text()

    def _seed(self, conf: Path) -> None:
        self.keys.mkdir(exist_ok=True)
        for name, _, _ in USERS:
            key = self.keys / name
            if not key.exists():
                _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@ldap",
                      "-f", str(key)])  # fmt: skip
        ldif = seed_ldif(
            self._bind_password(),
            {n: (self.keys / f"{n}.pub").read_text().strip() for n, _, _ in USERS},
        )
        (self.root / "seed.ldif").write_text(ldif)
        _run([SLAPADD, "-f", str(conf), "-l", str(self.root / "seed.ldif")])


def slapd_conf(root: Path, *, admin_password: str) -> str:
    """slapd.conf(5): the schemas posixAccount and sshPublicKey need; only cn=sssd reads."""
    schemas = [SCHEMAS / f"{s}.schema" for s in ("core", "cosine", "nis", "inetorgperson")]
    lines = [*(f"include {s}" for s in [*schemas, root / "lpk.schema"]),
             "modulepath /usr/lib/ldap", "moduleload back_mdb",
             f"pidfile {root / 'slapd.pid'}", f"argsfile {root / 'slapd.args'}",
             "database mdb", f'suffix "{BASE_DN}"', f'rootdn "cn=admin,{BASE_DN}"',
             f"rootpw {admin_password}", f"directory {root / 'data'}",
             f"TLSCACertificateFile {root / 'tls' / 'ca.crt'}",
             f"TLSCertificateFile {root / 'tls' / 'server.crt'}",
             f"TLSCertificateKeyFile {root / 'tls' / 'server.key'}",
             "access to attrs=userPassword by anonymous auth by * none",
             f'access to * by dn.exact="{BIND_DN}" read by * none']  # fmt: skip
    return "\n".join(lines) + "\n"


def seed_ldif(bind_password: str, public_keys: dict[str, str]) -> str:
    entries = [
        {"dn": BASE_DN, "objectClass": ["dcObject", "organization"], "o": ["sunk"],
         "dc": ["sunk"]},
        {"dn": BIND_DN, "objectClass": ["simpleSecurityObject", "organizationalRole"],
         "cn": ["sssd"], "userPassword": [bind_password]},
        {"dn": f"ou=people,{BASE_DN}", "objectClass": ["organizationalUnit"], "ou": ["people"]},
        {"dn": f"ou=groups,{BASE_DN}", "objectClass": ["organizationalUnit"], "ou": ["groups"]},
    ]  # fmt: skip
    for name, uid, groups in USERS:
        entries.append({
            "dn": f"uid={name},ou=people,{BASE_DN}",
            "objectClass": ["inetOrgPerson", "posixAccount", "ldapPublicKey"],
            "uid": [name], "cn": [name.title()], "sn": [name.title()],
            "uidNumber": [str(uid)], "gidNumber": [str(GROUPS[groups[0]])],
            "homeDirectory": [f"/home/{name}"], "loginShell": ["/bin/bash"],
            "sshPublicKey": [public_keys[name]],
        })  # fmt: skip
    for group, gid in GROUPS.items():
        members = [name for name, _, groups in USERS if group in groups]
        entries.append({"dn": f"cn={group},ou=groups,{BASE_DN}", "objectClass": ["posixGroup"],
                        "cn": [group], "gidNumber": [str(gid)], "memberUid": members})  # fmt: skip
    blocks = []
    for entry in entries:
        lines = [f"dn: {entry.pop('dn')}"]
        lines += [f"{attr}: {v}" for attr, values in entry.items() for v in values]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def directory_values(record: DirectoryRecord) -> str:
    """The values a user adds to the repo (values.d/) to use this directory."""
    return f"""# From `reconciler local up --directory`: the stack's LDAP server.
# The keys are those of SUNK's "Slurm Workload Manager" page.
directoryService:
  sudoGroups: [{SUDO_GROUP}]
  directories:
    - name: default
      enabled: true
      ldapUri: {record.uri}
      schema: rfc2307
      ldapsCert: {TLS_SECRET_NAME}
      user:
        bindDn: {BIND_DN}
        searchBase: {BASE_DN}
        canary: alice
        existingSecret: {SECRET_NAME}
"""


def make_tls(folder: Path) -> None:
    """A CA for this stack, slapd's certificate for 127.0.0.1 and a client certificate (what
    Google Secure LDAP hands out), made once."""
    if (folder / "client.crt").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    _run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
          "-nodes", "-days", "3650", "-subj", "/CN=sunk-reconciler local CA",
          "-keyout", str(folder / "ca.key"), "-out", str(folder / "ca.crt")])  # fmt: skip
    for name, extension in (("server", "subjectAltName=IP:127.0.0.1"),
                            ("client", "extendedKeyUsage=clientAuth")):  # fmt: skip
        _run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
              "-nodes", "-subj", f"/CN=sunk-reconciler local {name}",
              "-keyout", str(folder / f"{name}.key"),
              "-out", str(folder / f"{name}.csr")])  # fmt: skip
        _run(["openssl", "x509", "-req", "-in", str(folder / f"{name}.csr"), "-days", "3650",
              "-CA", str(folder / "ca.crt"), "-CAkey", str(folder / "ca.key"),
              "-CAcreateserial", "-extfile", "/dev/stdin", "-out", str(folder / f"{name}.crt")],
             stdin=extension)  # fmt: skip


def _run(argv: list[str], stdin: str | None = None) -> None:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise LocalStackError(f"{argv[0]} failed (exit {done.returncode}): {done.stderr.strip()}")
