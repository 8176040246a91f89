"""Sidecars a user adds to login and compute Pods (SUNK's "About SUNK": "Infrastructure engineers
can add sidecar containers to Slurm login and compute nodes"), one rule for both."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.compile.desired import compile_desired_state
from reconciler.errors import CompileError
from tests.unit.conftest import config_from
from tests.unit.test_control_plane import container, objects, pod_of, state_of

EXPORTER = "{name: node-exporter, image: quay.io/prometheus/node-exporter:v1.8.2}"
LOGIN_SIDECAR = f"login:\n  containers:\n  - {EXPORTER}\n  initContainers:\n" \
                "  - {name: motd, image: busybox:1.36, command: [true]}\n"  # fmt: skip


def _login_pod(values: str) -> dict[str, Any]:
    return pod_of(objects(state_of(values))[("StatefulSet", "slurm-login")])


def test_the_pages_login_sidecar_runs_beside_sshd_and_munge() -> None:
    state = state_of(LOGIN_SIDECAR)
    login = objects(state)[("StatefulSet", "slurm-login")]
    pod = pod_of(login)
    assert [c["name"] for c in pod["containers"]] == ["sshd", "munge", "node-exporter"]
    assert [c["name"] for c in pod["initContainers"]] == ["munge-key", "motd"]
    assert container(login, "node-exporter")["image"] == "quay.io/prometheus/node-exporter:v1.8.2"
    assert not [w for w in state.warnings if "login." in str(w)]


def test_login_sidecars_are_used_as_written_not_given_our_pull_policy() -> None:
    values = "login:\n  image: {pullPolicy: Always}\n" + LOGIN_SIDECAR.removeprefix("login:\n")
    pod = _login_pod(values)
    exporter = next(c for c in pod["containers"] if c["name"] == "node-exporter")
    assert exporter == {"name": "node-exporter",
                        "image": "quay.io/prometheus/node-exporter:v1.8.2"}  # fmt: skip
    assert next(c for c in pod["containers"] if c["name"] == "sshd")["imagePullPolicy"] == "Always"


@pytest.mark.parametrize("name", ["sshd", "munge", "munge-key"])
def test_a_login_sidecar_named_as_one_of_ours_is_a_plan_error(name: str) -> None:
    with pytest.raises(CompileError) as caught:
        state_of(f"login:\n  containers:\n  - {{name: {name}, image: busybox}}\n")
    assert f"login.containers[0]: container {name!r} has the name of a container the " \
           "reconciler renders" in str(caught.value)  # fmt: skip
    assert "rename it" in str(caught.value)


def test_a_compute_sidecar_named_munge_is_a_plan_error_not_a_pod_kubernetes_refuses() -> None:
    # Before: the StatefulSet carried two containers named munge, refused only at apply.
    cpu = "{enabled: true, replicas: 1, resources: {limits: {cpu: 2, memory: 4Gi}}, containers: [" \
          "{name: munge, image: busybox}]}"  # fmt: skip
    values = f"compute:\n  nodes:\n    cpu: {cpu}\n"
    with pytest.raises(CompileError, match=r"node definition 'cpu'.containers\[0\]: container "
                       "'munge' has the name of a container"):  # fmt: skip
        compile_desired_state(config_from(values))


def test_two_sidecars_of_one_name_are_a_plan_error() -> None:
    values = f"login:\n  containers:\n  - {EXPORTER}\n  initContainers:\n  - {EXPORTER}\n"
    with pytest.raises(CompileError, match=r"login.initContainers\[0\]: container "
                       "'node-exporter' is named twice"):  # fmt: skip
        state_of(values)


def test_a_sidecar_without_a_name_is_a_plan_error() -> None:
    with pytest.raises(CompileError, match=r"login.containers\[0\] has no `name`"):
        state_of("login:\n  containers:\n  - {image: busybox}\n")
