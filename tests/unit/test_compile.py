"""The compiled desired state: Slurm config text and Kubernetes objects a user will see."""

from __future__ import annotations

from pathlib import Path

from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.profile import Profile
from reconciler.compile.yamlout import dump_stream
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import load_config
from tests.unit.conftest import config_from

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"


def fixture_state(profile: Profile | None = None) -> DesiredState:
    return compile_desired_state(load_config(read_repo(FIXTURE), read_library()), profile)


def _objects(state: DesiredState, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in state.kube_objects if o["kind"] == kind}


def test_fixture_repo_nodes_and_partitions() -> None:
    state = fixture_state()
    assert [n.name for n in state.slurm_nodes] == [
        "slurm-cpu-0",
        "slurm-gpu-small-0",
        "slurm-gpu-small-1",
    ]
    conf = state.slurm_conf.splitlines()
    assert "NodeName=slurm-cpu-0 CPUs=4 RealMemory=8192 Feature=cpu,epyc,las1" in conf
    assert (
        "NodeName=slurm-gpu-small-[0-1] CPUs=4 RealMemory=8192 Gres=gpu:quadro_rtx_4000:7 "
        "Feature=gpu-small,gpu,cu117,las1,inference"
    ) in conf
    assert (
        "NodeName=slurm-gpu-small-[2-3] CPUs=4 RealMemory=8192 Gres=gpu:quadro_rtx_4000:7 "
        "Feature=gpu-small,gpu,cu117,las1,inference State=FUTURE"
    ) in conf
    assert [n.name for n in state.spare_nodes] == ["slurm-gpu-small-2", "slurm-gpu-small-3"]
    assert "NodeSet=gpu-small Feature=gpu-small" in conf
    assert "PartitionName=gpu Nodes=gpu-small MaxTime=INFINITE State=UP PriorityTier=10" in conf
    assert "KillWait=30" in conf and "SelectTypeParameters=CR_Core_Memory" in conf
    assert "Prolog=/etc/slurm/prolog.d/*" in conf
    # Our image's Slurm has gpu/nvidia, not NVML (slurmConfig.gresAutoDetect: nvml for SUNK's).
    assert state.gres_conf.splitlines()[1:] == ["AutoDetect=nvidia"]


def test_disabled_definition_makes_no_objects() -> None:
    state = fixture_state()
    assert "slurm-h100-training" not in _objects(state, "StatefulSet")
    assert not any(n.nodeset == "h100-training" for n in state.slurm_nodes)
    assert "h100-training" in [n.name for n in state.nodesets]


def test_statefulset_shape() -> None:
    sts = _objects(fixture_state(), "StatefulSet")["slurm-gpu-small"]
    assert sts["metadata"]["namespace"] == "slurm"
    assert sts["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "sunk-reconciler"
    spec = sts["spec"]
    assert spec["replicas"] == 2 and spec["updateStrategy"] == {"type": "OnDelete"}
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == "ghcr.io/sunk-reconciler/slurm:24.11.5"  # our image
    assert container["args"] == ["slurmd", "-D", "-N", "$(POD_NAME)"]
    assert [e["name"] for e in container["env"]] == [
        "POD_NAME",
        "NODE_NAME",
        "POD_IP",
        "NCCL_DEBUG",
    ]
    assert {"name": "data-nvme", "mountPath": "/mnt/data"} in container["volumeMounts"]
    assert {"name": "data-nvme", "persistentVolumeClaim": {"claimName": "data-nvme"}} in pod[
        "volumes"
    ]
    selector = spec["selector"]["matchLabels"]
    assert selector.items() <= spec["template"]["metadata"]["labels"].items()


def test_config_maps() -> None:
    maps = _objects(fixture_state(), "ConfigMap")
    assert set(maps) == {"slurm-slurm-conf", "slurm-prolog", "slurm-s6", "slurm-slurmdbd-conf"}
    assert set(maps["slurm-slurm-conf"]["data"]) == {"slurm.conf", "gres.conf"}
    assert maps["slurm-s6"]["data"]["motd.type"] == "oneshot\n"  # test_s6_services.py: the rest


def test_extra_config_replaces_a_rendered_setting_in_place() -> None:
    state = compile_desired_state(
        config_from(
            """
            slurmConfig:
              killWait: 30
              extraConfig: |
                KillWait=45
                SchedulerParameters=bf_interval=5
                NodeName=outside CPUs=1 State=FUTURE
            """
        )
    )
    conf = state.slurm_conf.splitlines()
    assert "KillWait=45" in conf and "KillWait=30" not in conf
    assert conf.index("KillWait=45") < conf.index("NodeName=outside CPUs=1 State=FUTURE")
    assert "SchedulerParameters=bf_interval=5" in conf


def test_local_profile_gives_every_node_its_own_port_and_fake_gpus() -> None:
    profile = Profile.local(
        site={"AuthInfo": "socket=/run/x/munge.sock"},
        slurmctld_port=20000,
        slurmd_port=20001,
        node_port_base=20010,
        gres_device_dir="/run/x/dev",
        conf_dir="/run/x/etc",
        node_ports={"slurm-gpu-small-1": 20555},
    )
    state = fixture_state(profile)
    conf = state.slurm_conf.splitlines()
    assert (
        "SlurmctldHost=localhost(127.0.0.1)" in conf and "AuthInfo=socket=/run/x/munge.sock" in conf
    )
    assert "SlurmdParameters=config_overrides" in conf
    assert "Prolog=/run/x/etc/prolog.d/*" in conf
    nodes = [line for line in conf if line.startswith("NodeName=")]
    assert nodes[0].startswith(
        "NodeName=slurm-cpu-0 NodeHostname=localhost NodeAddr=127.0.0.1 Port=20010 "
    )
    assert " Port=20011 " in nodes[1] and " Port=20555 " in nodes[2]
    assert nodes[3].startswith("NodeName=slurm-gpu-small-2 ") and nodes[3].endswith(" State=FUTURE")
    assert (
        "NodeName=slurm-gpu-small-[0-3] Name=gpu Type=quadro_rtx_4000 File=/run/x/dev/gpu[0-6]"
        in (state.gres_conf.splitlines())
    )
    # Same compiler, same Kubernetes objects: only the Slurm site facts differ.
    cluster = fixture_state()
    assert [o["kind"] for o in state.kube_objects] == [o["kind"] for o in cluster.kube_objects]


def test_values_d_merges_in_lexical_order() -> None:
    config = config_from(
        "compute:\n  nodes:\n    a: {definitions: [rtx4000], replicas: 1}\n",
        {
            "values.d/20-b.yaml": "compute:\n  nodes:\n    a: {replicas: 3}\n",
            "values.d/10-a.yaml": "compute:\n  nodes:\n    a: {replicas: 2, features: [x]}\n",
        },
    )
    node = config.values["compute"]["nodes"]["a"]
    assert node["replicas"] == 3 and node["features"] == ["x"]


def test_repo_layer_overrides_the_shipped_one_and_compute_nodes_override_both() -> None:
    files = {
        "compute-defs/site.yaml": "las1:\n  features: [vegas]\nsite:\n  features: [from-file]\n"
    }
    config = config_from(
        """
        compute:
          nodes:
            site: {features: [from-values]}
            n: {definitions: [rtx4000, las1, site]}
        """,
        files,
    )
    state = compile_desired_state(config)
    features = state.slurm_nodes[0].features
    assert "vegas" in features and "las1" not in features
    assert "from-values" in features and "from-file" not in features


def test_render_is_byte_identical_whatever_the_file_order() -> None:
    files = read_repo(FIXTURE)
    reversed_files = dict(reversed(list(files.items())))
    first = dump_stream(compile_desired_state(load_config(files, read_library())).kube_objects)
    second = dump_stream(
        compile_desired_state(load_config(reversed_files, read_library())).kube_objects
    )
    assert first == second and first.startswith("---\napiVersion: v1\nkind: ConfigMap\n")


def test_zero_replicas_is_a_valid_empty_node_set() -> None:
    state = compile_desired_state(
        config_from("compute:\n  nodes:\n    idle: {definitions: [rtx4000], replicas: 0}\n")
    )
    assert state.slurm_nodes == ()
    assert "# idle: 0 replicas" in state.slurm_conf
    assert _objects(state, "StatefulSet")["slurm-idle"]["spec"]["replicas"] == 0


def test_max_replicas_below_replicas_is_an_error() -> None:
    import pytest

    from reconciler.errors import CompileError

    values = "compute:\n  nodes:\n    a: {definitions: [rtx4000], replicas: 3, maxReplicas: 2}\n"
    with pytest.raises(CompileError, match="replicas 3 exceeds maxReplicas 2"):
        compile_desired_state(config_from(values))


def test_gres_autodetect_follows_values_and_refuses_what_slurm_has_not() -> None:
    import pytest

    from reconciler.errors import CompileError

    gpu = "compute:\n  nodes:\n    g: {definitions: [rtx4000], replicas: 1}\n"
    assert compile_desired_state(config_from(gpu)).gres_conf.splitlines()[1:] == [
        "AutoDetect=nvidia"
    ]
    nvml = gpu + "slurmConfig:\n  gresAutoDetect: nvml\n"
    assert "AutoDetect=nvml" in compile_desired_state(config_from(nvml)).gres_conf
    typo = gpu + "slurmConfig:\n  gresAutoDetect: nvidai\n"
    with pytest.raises(CompileError, match=r"slurmConfig\.gresAutoDetect is 'nvidai'.*nvml"):
        compile_desired_state(config_from(typo))


def test_gres_autodetect_follows_the_target_release() -> None:
    """gres.conf's AutoDetect=nvidia is Slurm 24.11's gpu/nvidia plugin: a render for an older
    Slurm (22.05, which we support) defaults to nvml and refuses an explicit nvidia."""
    import pytest

    from reconciler.errors import CompileError

    gpu = "compute:\n  nodes:\n    g: {definitions: [rtx4000], replicas: 1}\n"
    older = gpu + "slurmConfig:\n  release: '22.05.8'\n"
    assert compile_desired_state(config_from(older)).gres_conf.splitlines()[1:] == [
        "AutoDetect=nvml"
    ]
    newer = gpu + "slurmConfig:\n  release: '24.11.5'\n"
    assert "AutoDetect=nvidia" in compile_desired_state(config_from(newer)).gres_conf
    explicit = older + "  gresAutoDetect: nvidia\n"
    with pytest.raises(CompileError, match=r"gresAutoDetect is 'nvidia'.*Slurm 24\.11.*22\.05"):
        compile_desired_state(config_from(explicit))
    in_text = older + "  gresConfig: 'AutoDetect=nvidia'\n"
    with pytest.raises(CompileError, match=r"slurmConfig\.gresConfig sets AutoDetect=nvidia"):
        compile_desired_state(config_from(in_text))


def test_gres_config_lists_devices_where_autodetection_finds_none() -> None:
    """`slurmConfig.gresConfig` (ours) is gres.conf text: `AutoDetect=off` replaces ours in
    place, a device line is added; without it slurmd drops a file-less GPU ("Ignoring
    file-less GPU") and the node registers INVAL."""
    gpu = "compute:\n  nodes:\n    g: {definitions: [rtx4000], replicas: 1}\n"
    listed = gpu + (
        "slurmConfig:\n  gresConfig: |\n    AutoDetect=off\n"
        "    NodeName=slurm-g-0 Name=gpu Type=quadro_rtx_4000 File=/dev/nvidia[0-6]\n"
    )
    state = compile_desired_state(config_from(listed))
    assert state.gres_conf.splitlines()[1:] == [
        "AutoDetect=off",
        "NodeName=slurm-g-0 Name=gpu Type=quadro_rtx_4000 File=/dev/nvidia[0-6]",
    ]
    assert not [w for w in state.warnings if "gresConfig" in w.message]


def test_gres_config_without_gpu_definitions_is_reported() -> None:
    cpu = "compute:\n  nodes:\n    c: {definitions: [cpu-epyc], replicas: 1}\n"
    values = cpu + "slurmConfig:\n  gresConfig: 'AutoDetect=off'\n"
    state = compile_desired_state(config_from(values))
    assert any("slurmConfig.gresConfig" in w.message and "has GPUs (gresGpu)" in w.message
               for w in state.warnings), state.warnings  # fmt: skip
