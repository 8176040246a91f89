"""Secrets the reconciler generates once: the munge key, the JWT key, the MySQL password.

They are compiled as specs without data. Apply creates a missing one with fresh random data;
it never updates, regenerates or prunes one (a new munge key would cut every daemon off from
every other). Their data never appears in a render, a plan or a log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler import wellknown as wk

MUNGE_KEY_FILE = "munge.key"
JWT_KEY_FILE = "jwt_hs256.key"
MYSQL_PASSWORD_KEY = "password"


@dataclass(frozen=True)
class GeneratedSecret:
    name: str
    namespace: str
    release: str
    key: str  # the one data key
    size: int  # random bytes (binary keys) or characters (text)
    text: bool = False  # a password: printable characters, not raw bytes

    @property
    def rolls_on_loss(self) -> bool:
        """Made anew while Pods run: whether the Deployments that mount it are rolled. The
        JWT key, yes: slurmctld must take the key tokens are signed with from now on. The
        munge key and the database password, no: every Slurm Pod must change key at once
        (jobs end), and the database keeps its password; the admin is told what to do."""
        return self.key == JWT_KEY_FILE

    def loss_hint(self) -> str:
        if self.key == MUNGE_KEY_FILE:
            return ("running daemons keep the old munge key until their Pods restart: restart "
                    "every Slurm Pod together when jobs allow (a Pod with the new key cannot "
                    "talk to one with the old)")  # fmt: skip
        if self.key == MYSQL_PASSWORD_KEY:
            return ("the database keeps the old password: set the new one for its user "
                    "(ALTER USER), then restart the accounting Pod")  # fmt: skip
        return "the Pods that mount it were restarted to read it"

    def manifest(self) -> dict[str, Any]:
        """The Secret as render shows it: metadata only, the data described, never shown."""
        kind = "characters" if self.text else "random bytes"
        described = {wk.ANNOTATION_GENERATED: f"{self.key}: {self.size} {kind}"}
        return secret_manifest(self.name, self.namespace, self.release, described)


def secret_manifest(
    name: str, namespace: str, release: str, annotations: dict[str, str]
) -> dict[str, Any]:
    """One of our Secrets without its data: what render and plan show."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                wk.LABEL_MANAGED_BY: wk.MANAGED_BY_VALUE,
                wk.LABEL_PART_OF: "slurm",
                wk.LABEL_COMPONENT: "secret",
                wk.LABEL_RELEASE: release,
            },
            "annotations": annotations,
        },
        "type": "Opaque",
    }


def secret_from_manifest(manifest: dict[str, Any]) -> GeneratedSecret:
    """The spec back from what `manifest` rendered (a plan carries manifests)."""
    meta = manifest["metadata"]
    key, _, described = meta["annotations"][wk.ANNOTATION_GENERATED].partition(": ")
    size, _, kind = described.partition(" ")
    return GeneratedSecret(meta["name"], meta["namespace"], meta["labels"][wk.LABEL_RELEASE],
                           key, int(size), text=kind == "characters")  # fmt: skip


def munge_secret_name(release: str) -> str:
    return f"{release}-munge-key"


def jwt_secret_name(release: str) -> str:
    return f"{release}-jwt-key"


def mysql_secret_name(release: str) -> str:
    return f"{release}-mysql-password"


def generated_secrets(release: str, namespace: str, *, mysql: bool) -> tuple[GeneratedSecret, ...]:
    secrets = [
        GeneratedSecret(munge_secret_name(release), namespace, release, MUNGE_KEY_FILE, 1024),
        GeneratedSecret(jwt_secret_name(release), namespace, release, JWT_KEY_FILE, 64),
    ]
    if mysql:
        secrets.append(GeneratedSecret(mysql_secret_name(release), namespace, release,
                                       MYSQL_PASSWORD_KEY, 32, text=True))  # fmt: skip
    return tuple(secrets)
