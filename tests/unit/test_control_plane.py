"""The control plane rendered from the values of SUNK's "Slurm Workload Manager" page: names, labels
and the values each object takes; accounting in and out of the cluster; keys accepted but not acted
on."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reconciler.apply.secrets import generate
from reconciler.compile.control_plane import RECONFIGURE_SCRIPT
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.manifests import CONF_MOUNT
from reconciler.compile.secrets import secret_from_manifest
from reconciler.errors import ConfigTypeError
from tests.unit.conftest import config_from

NODES = """
compute:
  {mounts}
  nodes:
    cpu:
      {{enabled: true, replicas: 1, resources: {{limits: {{cpu: 2, memory: 4Gi}}}}}}
"""


def state_of(values: str, mounts: str = "mounts: []") -> DesiredState:
    return compile_desired_state(config_from(values + NODES.format(mounts=mounts)))


def objects(state: DesiredState) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in state.kube_objects}


def pod_of(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


def container(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod_of(obj)["containers"] if c["name"] == name)


def matches(selector: str, labels: dict[str, str]) -> bool:
    key, _, value = selector.partition("=")
    return labels.get(key) == value


def test_the_slurm_pages_commands_find_the_controller_as_written() -> None:
    found = objects(state_of(""))
    # kubectl get deployments -l app.kubernetes.io/component=controller
    component = "app.kubernetes.io/component=controller"
    deployments = [
        name for (kind, name), o in found.items()
        if kind == "Deployment" and matches(component, o["metadata"]["labels"])
    ]  # fmt: skip
    assert deployments == ["slurm-controller"]
    # kubectl logs -l app.kubernetes.io/name=slurmctld -c slurmctld
    controller = found[("Deployment", "slurm-controller")]
    labels = controller["spec"]["template"]["metadata"]["labels"]
    assert matches("app.kubernetes.io/name=slurmctld", labels)
    assert {c["name"] for c in pod_of(controller)["containers"]} == {
        "slurmctld",
        "reconfigure",
        "munge",
    }
    # Recreate: two slurmctld never share the state directory during a rollout.
    assert controller["spec"]["strategy"] == {"type": "Recreate"}
    assert pod_of(controller)["hostname"] == "slurm-controller"  # slurm.conf's SlurmctldHost
    assert "SlurmctldHost=slurm-controller\n" in state_of("").slurm_conf


def test_controller_values_of_the_slurm_page_are_used() -> None:
    found = objects(state_of("""
controller:
  replicas: 0
  image: {repository: example/slurm, tag: "24.11"}
  securityContext: {runAsUser: 1000, runAsGroup: 1001}
  resources: {limits: {cpu: 2, memory: 2Gi}}
  terminationGracePeriodSeconds: 45
  priorityClassName: high
  stateVolume: {size: 5Gi, storageClassName: fast}
nodeSelector: {region: LAS1}
"""))  # fmt: skip
    controller = found[("Deployment", "slurm-controller")]
    pod = pod_of(controller)
    assert controller["spec"]["replicas"] == 0
    assert container(controller, "slurmctld")["image"] == "example/slurm:24.11"
    assert container(controller, "munge")["image"] == "example/slurm:24.11"
    assert pod["securityContext"] == {"runAsUser": 1000, "runAsGroup": 1001, "fsGroup": 64030}
    assert container(controller, "slurmctld")["resources"] == {
        "limits": {"cpu": 2, "memory": "2Gi"}
    }
    assert (pod["terminationGracePeriodSeconds"], pod["priorityClassName"]) == (45, "high")
    assert pod["nodeSelector"] == {"topology.kubernetes.io/region": "LAS1"}
    claim = found[("PersistentVolumeClaim", "slurm-controller-state")]
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert claim["spec"]["storageClassName"] == "fast"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["state"]["persistentVolumeClaim"]["claimName"] == "slurm-controller-state"
    # The region places the control plane only (SUNK's "Slurm Workload Manager" page), never the
    # compute nodes.
    assert "nodeSelector" not in pod_of(found[("StatefulSet", "slurm-cpu")])


def test_page_defaults_for_the_controller() -> None:
    controller = objects(state_of(""))[("Deployment", "slurm-controller")]
    pod = pod_of(controller)
    assert pod["securityContext"] == {"runAsUser": 64030, "runAsGroup": 64030, "fsGroup": 64030}
    assert pod["terminationGracePeriodSeconds"] == 10
    assert container(controller, "slurmctld")["resources"]["requests"] == {
        "cpu": "4", "memory": "16Gi"}  # fmt: skip
    assert "priorityClassName" not in pod  # SUNK's `spot` exists only on CoreWeave


def test_two_controllers_are_refused_with_the_reason() -> None:
    with pytest.raises(ConfigTypeError, match=r"controller.replicas must be one of 0, 1, got 2"):
        state_of("controller: {replicas: 2}\n")


def test_login_values_and_service() -> None:
    found = objects(state_of("""
login:
  replicas: 2
  image: {repository: example/login}
  terminationGracePeriodSeconds: 5
  authorizedKeysSecret: my-keys
  service:
    type: LoadBalancer
    externalTrafficPolicy: Cluster
    annotations: {lb.example/ip: public}
""", mounts="mounts: [{name: /mnt/home, pvc: home_dir}]"))  # fmt: skip
    login = found[("StatefulSet", "slurm-login")]
    assert login["spec"]["replicas"] == 2
    sshd = container(login, "sshd")
    # A repository without a tag takes the tag of the image it would otherwise run.
    assert sshd["image"] == "example/login:24.11.5"
    assert sshd["args"][-1].endswith("exec /usr/sbin/sshd -D -e")
    mounts = {m["mountPath"]: m for m in sshd["volumeMounts"]}
    assert mounts["/mnt/home"]["name"] == "home-dir"  # the same shared storage as compute
    assert mounts["/root/.ssh/authorized_keys"]["subPath"] == "authorized_keys"
    service = found[("Service", "slurm-login")]
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["externalTrafficPolicy"] == "Cluster"
    assert service["metadata"]["annotations"] == {"lb.example/ip": "public"}
    assert service["spec"]["ports"][0]["port"] == 22


def test_a_clusterip_login_service_carries_no_traffic_policy() -> None:
    service = objects(state_of("login: {service: {type: ClusterIP}}\n"))[("Service", "slurm-login")]
    assert "externalTrafficPolicy" not in service["spec"]


def test_a_bad_service_type_names_the_key() -> None:
    with pytest.raises(ConfigTypeError, match=r"login.service.type must be one of"):
        state_of("login: {service: {type: Public}}\n")


def test_login_and_rest_can_be_switched_off() -> None:
    found = objects(state_of("login: {enabled: false}\nrest: {enabled: false}\n"))
    assert not [key for key in found if key[1] in ("slurm-login", "slurm-rest")]


def test_accounting_off_means_no_slurmdbd_and_no_accounting_lines() -> None:
    state = state_of("")
    assert not [k for k in objects(state) if k[1] in ("slurm-accounting", "slurm-mysql")]
    assert "AccountingStorage" not in state.slurm_conf
    assert [s.name for s in state.secrets] == ["slurm-munge-key", "slurm-jwt-key"]


def test_accounting_in_the_cluster() -> None:
    state = state_of("accounting: {enabled: true}\n")
    found = objects(state)
    assert (
        "AccountingStorageHost=slurm-accounting\nAccountingStoragePort=6819\n" in state.slurm_conf
    )
    conf = found[("ConfigMap", "slurm-slurmdbd-conf")]["data"]["slurmdbd.conf"]
    assert "StorageHost=slurm-mysql\n" in conf and "DbdHost=slurm-accounting\n" in conf
    assert "StoragePass" not in conf  # read from the Secret when slurmdbd starts
    mysql = found[("StatefulSet", "slurm-mysql")]
    env = {e["name"]: e for e in container(mysql, "mysql")["env"]}
    assert env["MARIADB_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "slurm-mysql-password"
    assert container(mysql, "mysql")["image"] == "ghcr.io/sunk-reconciler/mariadb:10.11"
    # The claim of the database is the StatefulSet's, never labelled ours (never pruned).
    assert "labels" not in mysql["spec"]["volumeClaimTemplates"][0]["metadata"]
    assert "slurm-mysql-password" in [s.name for s in state.secrets]


def test_accounting_with_an_external_database() -> None:
    state = state_of("""
accounting:
  enabled: true
  database: {host: db.example, port: 3307, passwordSecret: db-pass}
""")
    found = objects(state)
    assert ("StatefulSet", "slurm-mysql") not in found
    conf = found[("ConfigMap", "slurm-slurmdbd-conf")]["data"]["slurmdbd.conf"]
    assert "StorageHost=db.example\nStoragePort=3307\n" in conf
    volumes = {v["name"]: v for v in pod_of(found[("Deployment", "slurm-accounting")])["volumes"]}
    assert volumes["db-password"]["secret"]["secretName"] == "db-pass"
    assert "slurm-mysql-password" not in [s.name for s in state.secrets]


def test_accounting_with_an_external_slurmdbd() -> None:
    state = state_of("accounting: {enabled: true, external: {host: dbd.example, port: 7031}}\n")
    assert not [k for k in objects(state) if k[1] in ("slurm-accounting", "slurm-mysql")]
    assert "AccountingStorageHost=dbd.example\nAccountingStoragePort=7031\n" in state.slurm_conf


def test_every_slurm_pod_carries_munge_with_the_generated_key() -> None:
    found = objects(state_of("accounting: {enabled: true}\n"))
    for key in [("StatefulSet", "slurm-cpu"), ("StatefulSet", "slurm-login"),
                ("Deployment", "slurm-controller"), ("Deployment", "slurm-rest"),
                ("Deployment", "slurm-accounting")]:  # fmt: skip
        volumes = {v["name"]: v for v in pod_of(found[key])["volumes"]}
        assert volumes["munge-key"]["secret"]["secretName"] == "slurm-munge-key", key
        assert "munge" in {c["name"] for c in pod_of(found[key])["containers"]}, key


def test_generated_secret_data_is_random_and_only_in_the_created_object() -> None:
    state = state_of("accounting: {enabled: true}\n")
    specs = {s.name: s for s in state.secrets}
    munge, password = specs["slurm-munge-key"], specs["slurm-mysql-password"]
    assert "data" not in munge.manifest()
    assert secret_from_manifest(munge.manifest()) == munge
    first, second = generate(munge), generate(munge)
    assert first["data"]["munge.key"] != second["data"]["munge.key"]
    assert len(first["data"]["munge.key"]) == 1368  # base64 of 1024 bytes
    text = generate(password)["data"]["password"]
    assert len(text) == 44  # base64 of 32 characters


def test_keys_accepted_but_not_acted_on_are_reported() -> None:
    state = state_of("""
directoryService: {directories: []}
network: {vpcs: []}
login: {service: {exposePublicIP: true}}
slurmConfig: {killWiat: 3}
""")
    texts = [w.message for w in state.warnings]
    assert not any(t.startswith("directoryService") for t in texts)  # acted on: see test_directory
    assert any(t.startswith("network is accepted but not acted on") for t in texts)
    assert any(t.startswith("login.service.exposePublicIP is accepted") for t in texts)
    assert "slurmConfig.killWiat is not a key this reconciler reads; it is ignored; " \
           "did you mean 'killWait'?" in texts  # fmt: skip


def test_the_controller_pod_reconfigures_once_each_time_its_mounted_config_changes(
    tmp_path: Path,
) -> None:
    """The reconfigure sidecar's script, run by a real shell with a stand-in scontrol that
    fails once (slurmctld restarting): no reconfigure for unchanged files, one per change,
    and a failed one is tried again."""
    conf, bin_dir, calls = tmp_path / "etc", tmp_path / "bin", tmp_path / "calls"
    conf.mkdir()
    bin_dir.mkdir()
    (conf / "slurm.conf").write_text("ClusterName=a\n")
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n'
                        f'[ -e {tmp_path}/failed-once ] || {{ touch {tmp_path}/failed-once; '
                        "exit 1; }\n")  # fmt: skip
    scontrol.chmod(0o755)
    script = RECONFIGURE_SCRIPT.replace(CONF_MOUNT, str(conf)).replace("sleep 5", "sleep 0.05")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    shell = subprocess.Popen(["sh", "-c", script], env=env)
    try:
        time.sleep(0.3)
        assert not calls.exists()  # nothing changed yet
        (conf / "slurm.conf").write_text("ClusterName=b\n")
        wait(lambda: calls.exists() and len(calls.read_text().splitlines()) == 2)
        time.sleep(0.3)
        assert calls.read_text().splitlines() == ["reconfigure", "reconfigure"]  # fail, retry
        (conf / "gres.conf").write_text("AutoDetect=off\n")
        wait(lambda: len(calls.read_text().splitlines()) == 3)
        # Every file the render writes beside slurm.conf, not only *.conf: 25.05's
        # topology.yaml and the Lua plugins too.
        (conf / "topology.yaml").write_text("- topology: default\n")
        wait(lambda: len(calls.read_text().splitlines()) == 4)
        (conf / "job_submit.lua").write_text("return slurm.SUCCESS\n")
        wait(lambda: len(calls.read_text().splitlines()) == 5)
    finally:
        shell.kill()
        shell.wait()


def wait(probe: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
