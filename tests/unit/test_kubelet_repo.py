"""What `local up --kubelet REPO` adds beside the repo on a machine without GPUs and with few
CPUs: the values layer a user wrote by hand before, the claims and Secrets it makes."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import yaml

from reconciler.compile.desired import DesiredState, compile_shape
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import load_config
from reconciler.local.kubelets import repo as shape

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"


def _compiled(extra: dict[str, str] | None = None) -> tuple[DesiredState, dict]:
    files = {**read_repo(FIXTURE), **(extra or {})}
    config = load_config(files, read_library())
    return compile_shape(config), config.values


def _with_layer(machine: shape.Machine) -> tuple[dict, DesiredState]:
    state, values = _compiled()
    layer = shape.machine_layer(state, values, machine)
    after, _ = _compiled({shape.MACHINE_LAYER: yaml.safe_dump(layer)} if layer else {})
    return layer, after


def _pod_spec(state: DesiredState, kind: str, name: str) -> dict:
    obj = next(o for o in state.kube_objects if o["kind"] == kind and o["metadata"]["name"] == name)
    return obj["spec"]["template"]["spec"]


def test_a_gpu_less_two_cpu_machine_gets_device_links_and_no_autodetect() -> None:
    _, after = _with_layer(shape.Machine(cpus=2, gpus=False))
    assert "AutoDetect=off" in after.gres_conf.splitlines()
    line = next(
        x for x in after.gres_conf.splitlines() if x.startswith("NodeName=slurm-gpu-small-0")
    )
    assert "Type=quadro_rtx_4000" in line and "File=/dev/fake-gpu/nvidia[0-6]" in line, line
    spec = _pod_spec(after, "StatefulSet", "slurm-gpu-small")
    assert any(c["name"] == "fake-gpus" for c in spec["initContainers"])
    slurmd = next(c for c in spec["containers"] if c["name"] == "slurmd")
    assert {"name": "fake-gpu", "mountPath": "/dev/fake-gpu"} in slurmd["volumeMounts"]
    assert "fake-gpus" not in str(_pod_spec(after, "StatefulSet", "slurm-cpu"))


def test_nodes_claiming_more_cpus_than_the_machine_has_get_config_overrides() -> None:
    _, after = _with_layer(shape.Machine(cpus=2, gpus=False))
    assert "SlurmdParameters=config_overrides" in after.slurm_conf
    assert "PreemptMode=REQUEUE" in after.slurm_conf  # the repo's own extraConfig is kept


def test_the_controller_and_login_ask_for_what_a_small_node_holds() -> None:
    _, after = _with_layer(shape.Machine(cpus=2, gpus=False))
    for kind, name in (("Deployment", "slurm-controller"), ("StatefulSet", "slurm-login")):
        requests = _pod_spec(after, kind, name)["containers"][0]["resources"]["requests"]
        assert shape._cpus(requests["cpu"]) <= 0.25, (name, requests)


def test_a_big_machine_with_gpus_needs_no_layer() -> None:
    layer, _ = _with_layer(shape.Machine(cpus=64, gpus=True))
    assert layer == {}


def test_the_claim_compute_mounts_names_is_made_and_the_login_keys_secret_is_named() -> None:
    state, _ = _compiled()
    assert shape.claims_to_make(state) == ["data-nvme"]  # not the controller's own claim
    assert shape.secrets_named(state) == ["slurm-login-keys"]  # apply makes munge, JWT, MySQL
    assert shape.images(state) == {"ghcr.io/sunk-reconciler/slurm:24.11.5",
                                   "ghcr.io/sunk-reconciler/mariadb:10.11"}  # fmt: skip
    assert shape.rest_url(state) == "http://slurm-rest.slurm.svc.cluster.local:6820"


def test_each_fake_gpu_is_a_device_of_its_own(tmp_path: Path) -> None:
    """task/cgroup's ConstrainDevices denies a job the GPUs it was not given by device number:
    links to /dev/null were all one device (and a GPU job lost /dev/null). The init
    container's script, in a real shell, makes NVIDIA-numbered devices, one minor each."""
    layer, _ = _with_layer(shape.Machine(cpus=2, gpus=False))
    [init] = layer["compute"]["nodes"]["gpu-small"]["initContainers"]
    script = init["command"][-1].replace("/fake-gpu/", f"{tmp_path}/")
    for _ in range(2):  # a container restarted in the same Pod finds the files there
        subprocess.run(["sh", "-c", script], check=True, capture_output=True)
    devices = sorted(tmp_path.iterdir())
    assert [d.name for d in devices] == [f"nvidia{i}" for i in range(7)]
    numbers = [(os.major(d.stat().st_rdev), os.minor(d.stat().st_rdev)) for d in devices]
    assert all(stat.S_ISCHR(d.lstat().st_mode) for d in devices)
    assert numbers == [(shape.FAKE_GPU_MAJOR, i) for i in range(7)]


def test_the_pull_secrets_values_name_are_made_as_registry_logins() -> None:
    state, _ = _compiled({"values.d/50-pull.yaml": "imagePullSecrets:\n  - name: regcred\n"})
    assert shape.pull_secrets_named(state) == ["regcred"]
    assert shape.secrets_named(state) == ["slurm-login-keys"]  # not reported as missing
    assert shape.pull_secrets_named(_compiled()[0]) == []
