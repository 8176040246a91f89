"""The local node agent's kubelet parts as pure functions: `kubectl logs --tail`, a Pod's
environment as kubelet resolves it, and the login Pod's sshd configuration."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from reconciler.local.agent.login_sshd import sshd_config
from reconciler.local.agent.logs_server import tail_lines
from reconciler.local.agent.pod_env import container_env
from reconciler.local.agent.volumes import VolumeError


@pytest.mark.parametrize(
    ("data", "count", "tail"),
    [
        (b"a\nb\nc\n", 2, b"b\nc\n"),
        (b"a\nb\nc", 1, b"c"),  # the last line may be unfinished
        (b"a\nb\n", 5, b"a\nb\n"),
        (b"a\nb\n", 0, b""),
        (b"", 3, b""),
    ],
)
def test_tail_lines_as_kubectl_logs_tail(data: bytes, count: int, tail: bytes) -> None:
    assert tail_lines(data, count) == tail


def pod_with_env(env: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "slurm-mysql-0", "namespace": "slurm"},
        "spec": {"nodeName": "local-node-0", "containers": [{"name": "mysql", "env": env}]},
    }


def secret(data: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Secret", "data": {k: base64.b64encode(v.encode()).decode()
                                       for k, v in data.items()}}  # fmt: skip


def test_container_env_resolves_values_fields_and_secret_keys() -> None:
    pod = pod_with_env([
        {"name": "PLAIN", "value": "1"},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
    ])  # fmt: skip
    objects = {("Secret", "db"): secret({"password": "s3cret"})}
    env = container_env(pod, "mysql", lambda kind, _ns, name: objects.get((kind, name)))
    assert env == {"PLAIN": "1", "POD": "slurm-mysql-0", "NODE": "local-node-0",
                   "PASSWORD": "s3cret"}  # fmt: skip


def test_a_missing_secret_key_stops_the_container_unless_optional() -> None:
    ref = {"name": "db", "key": "password"}
    pod = pod_with_env([{"name": "P", "valueFrom": {"secretKeyRef": ref}}])
    with pytest.raises(VolumeError, match="Secret 'db' has no key 'password'"):
        container_env(pod, "mysql", lambda *_: None)
    optional = pod_with_env(
        [{"name": "P", "valueFrom": {"secretKeyRef": {**ref, "optional": True}}}]
    )
    assert container_env(optional, "mysql", lambda *_: None) == {"P": ""}


def test_the_login_sshd_takes_keys_only_on_loopback_with_the_stacks_slurm() -> None:
    text = sshd_config(
        Path("/run/x"), 2222, Path("/run/x/authorized_keys"),
        {"SLURM_CONF": "/s/slurm.conf", "PATH": "/opt/slurm/bin:/usr/bin", "HOME": "/root"},
    )  # fmt: skip
    lines = text.splitlines()
    assert {"Port 2222", "ListenAddress 127.0.0.1", "PasswordAuthentication no",
            "AuthorizedKeysFile /run/x/authorized_keys"} <= set(lines)  # fmt: skip
    assert "SetEnv SLURM_CONF=/s/slurm.conf PATH=/opt/slurm/bin:/usr/bin" in lines
    assert "AuthorizedKeysFile none" in sshd_config(Path("/run/x"), 22, None, {}).splitlines()
