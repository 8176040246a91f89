"""What the rendered Pods run: each test reads `reconciler render`'s YAML stream, as a
kubelet would get it, and fails on the manifest as it was before its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.compile.desired import compile_desired_state
from reconciler.compile.yamlout import dump_stream
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import load_config
from reconciler.errors import ConfigTypeError
from tests.unit.conftest import config_from

Obj = dict[str, Any]
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"
NODES = """
compute:
  nodes:
    cpu: {enabled: true, replicas: 2, resources: {limits: {cpu: 2, memory: 4Gi}}}
"""
ACCOUNTING = "accounting: {enabled: true}\n"
DIRECTORY = """
directoryService:
  directories:
    - {name: corp, ldapUri: "ldaps://ldap.example", user: {canary: alice}}
"""
SLURM_IMAGE = "ghcr.io/sunk-reconciler/slurm:24.11.5"


def render(values: str = "", layered: str = "") -> list[Obj]:
    """`reconciler render` of a repo holding these values (plus one node set), and `layered`
    in a values.d file over them."""
    files = {"values.d/10-more.yaml": layered} if layered else None
    state = compile_desired_state(config_from(values + NODES, files))
    return list(yaml.safe_load_all(dump_stream(list(state.kube_objects))))


def render_fixture() -> list[Obj]:
    state = compile_desired_state(load_config(read_repo(FIXTURE), read_library()))
    return list(yaml.safe_load_all(dump_stream(list(state.kube_objects))))


def workloads(objects: list[Obj]) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objects
            if o["kind"] in ("Deployment", "StatefulSet")}  # fmt: skip


def pod(workload: Obj) -> Obj:
    return workload["spec"]["template"]["spec"]


def containers(workload: Obj) -> dict[str, Obj]:
    return {c["name"]: c for c in pod(workload)["containers"]}


def init_containers(workload: Obj) -> dict[str, Obj]:
    return {c["name"]: c for c in pod(workload).get("initContainers") or []}


def every_container(objects: list[Obj]) -> list[tuple[str, Obj]]:
    return [(f"{name}/{c['name']}", c) for name, w in workloads(objects).items()
            for c in [*(pod(w).get("initContainers") or []), *pod(w)["containers"]]]  # fmt: skip


def mounts(container: Obj) -> dict[str, Obj]:
    return {m["mountPath"]: m for m in container.get("volumeMounts") or []}


def volumes(workload: Obj) -> dict[str, Obj]:
    return {v["name"]: v for v in pod(workload).get("volumes") or []}


# ---- 1. munged reads a key it accepts -------------------------------------------------------


def test_munged_reads_a_copied_key_munge_owns_never_the_secret_volume() -> None:
    """munged refuses a symlinked, group-readable or foreign key: every file of a Secret
    volume is a symlink. Each Pod copies the key into an emptyDir first, as root with CHOWN
    and FOWNER only, and munged runs as munge on the copy."""
    found = workloads(render(ACCOUNTING))
    assert set(found) == {"slurm-controller", "slurm-rest", "slurm-accounting", "slurm-login",
                          "slurm-cpu", "slurm-mysql"}  # fmt: skip
    for name, workload in found.items():
        if name == "slurm-mysql":
            assert "munge" not in containers(workload)
            continue
        munged = containers(workload)["munge"]
        assert "--key-file=/run/munge-key/munge.key" in munged["args"], name
        assert munged["securityContext"]["runAsUser"] == 64031, name
        assert "/etc/munge-key" not in mounts(munged), name
        copy = pod(workload)["initContainers"][0]
        assert copy["name"] == "munge-key" and copy["image"] == munged["image"], name
        script = copy["command"][-1]
        assert ("install -o 64031 -g 64031 -m 0400 /etc/munge-key/munge.key "
                "/run/munge-key/munge.key") in script  # fmt: skip
        assert "chmod 0700 /run/munge-key" in script and "chmod 0755 /run/munge" in script
        assert copy["securityContext"]["capabilities"] == {
            "drop": ["ALL"],
            "add": ["CHOWN", "FOWNER"],
        }
        assert mounts(copy)["/etc/munge-key"]["readOnly"] is True
        copy_volume = mounts(copy)["/run/munge-key"]["name"]
        assert "emptyDir" in volumes(workload)[copy_volume], name
        assert mounts(munged)["/run/munge-key"]["name"] == copy_volume, name


# ---- 2. slurmctld and srun reach slurmd ----------------------------------------------------


def test_pods_that_talk_to_slurmd_search_the_compute_service() -> None:
    """NodeName lines carry node names only: the controller, login and slurmd Pods resolve
    them as <pod>.slurm-compute.slurm.svc.cluster.local through a DNS search path."""
    objects = render()
    found = workloads(objects)
    domain = "slurm-compute.slurm.svc.cluster.local"
    for name in ("slurm-controller", "slurm-login", "slurm-cpu"):
        assert pod(found[name])["dnsConfig"]["searches"] == [domain], name
    assert found["slurm-cpu"]["spec"]["serviceName"] == "slurm-compute"
    service = next(o for o in objects if o["kind"] == "Service"
                   and o["metadata"]["name"] == "slurm-compute")  # fmt: skip
    # slurmd registers before its Pod is Ready; slurmctld must resolve it by then.
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True


def test_a_cluster_domain_and_a_node_definitions_own_searches_are_kept() -> None:
    state = compile_desired_state(config_from("clusterDomain: hpc.internal\n" + """
compute:
  nodes:
    cpu:
      enabled: true
      resources: {limits: {cpu: 2, memory: 4Gi}}
      dnsConfig: {searches: [corp.example], options: [{name: ndots, value: "2"}]}
"""))  # fmt: skip
    sts = next(o for o in state.kube_objects if o["metadata"]["name"] == "slurm-cpu")
    assert pod(sts)["dnsConfig"] == {
        "searches": ["corp.example", "slurm-compute.slurm.svc.hpc.internal"],
        "options": [{"name": "ndots", "value": "2"}],
    }


def test_a_bad_cluster_domain_names_its_line() -> None:
    with pytest.raises(ConfigTypeError, match=r"clusterDomain 'Cluster_Local' is not valid"):
        config_from("clusterDomain: Cluster_Local\n")


# ---- 3. cgroup plugins get cgroup.conf and a writable hierarchy ----------------------------


@pytest.mark.parametrize("values", [
    "slurmConfig: {slurmCtld: {procTrackType: proctrack/cgroup}}\n",
    "slurmConfig: {slurmCtld: {taskPlugin: 'task/affinity,task/cgroup'}}\n",
    "slurmConfig: {extraConfig: 'ProctrackType=proctrack/cgroup'}\n",
])  # fmt: skip
def test_cgroup_plugins_come_with_cgroup_conf_and_a_privileged_slurmd(values: str) -> None:
    objects = render(values)
    conf = next(o for o in objects if o["metadata"]["name"] == "slurm-slurm-conf")["data"]
    lines = conf["cgroup.conf"].splitlines()
    assert "CgroupPlugin=autodetect" in lines and "IgnoreSystemd=yes" in lines
    assert ("ConstrainCores=yes" in lines) == ("task/cgroup" in values)
    slurmd = containers(workloads(objects)["slurm-cpu"])["slurmd"]
    assert slurmd["securityContext"]["privileged"] is True
    assert mounts(slurmd)["/etc/slurm"]["name"] == "slurm-conf"  # cgroup.conf beside slurm.conf


def test_task_cgroup_confines_each_job_to_the_gpus_it_was_given() -> None:
    """Without ConstrainDevices a job sees every GPU of its node, whatever --gres it asked."""
    values = "slurmConfig: {slurmCtld: {taskPlugin: 'task/affinity,task/cgroup'}}\n"
    conf = next(o for o in render(values) if o["metadata"]["name"] == "slurm-slurm-conf")["data"]
    assert "ConstrainDevices=yes" in conf["cgroup.conf"].splitlines()
    # proctrack/cgroup alone confines nothing: it only tracks a job's processes.
    values = "slurmConfig: {slurmCtld: {procTrackType: proctrack/cgroup}}\n"
    conf = next(o for o in render(values) if o["metadata"]["name"] == "slurm-slurm-conf")["data"]
    assert "ConstrainDevices" not in conf["cgroup.conf"]


def test_without_cgroup_plugins_slurmd_is_not_privileged() -> None:
    objects = render()
    conf = next(o for o in objects if o["metadata"]["name"] == "slurm-slurm-conf")["data"]
    assert "cgroup.conf" not in conf
    slurmd = containers(workloads(objects)["slurm-cpu"])["slurmd"]
    assert "privileged" not in slurmd["securityContext"]


def test_values_may_still_unprivilege_slurmd() -> None:
    values = "slurmConfig: {slurmCtld: {procTrackType: proctrack/cgroup}}\n"
    layered = "compute: {securityContext: {privileged: false}}\n"
    slurmd = containers(workloads(render(values, layered))["slurm-cpu"])["slurmd"]
    assert slurmd["securityContext"]["privileged"] is False


# ---- 4. liveness on every long-running container -------------------------------------------


def test_every_long_running_container_has_a_liveness_probe() -> None:
    objects = render(ACCOUNTING + DIRECTORY)
    checked = {name.rsplit("/", 1)[1] for name, c in every_container(objects)
               if name.rsplit("/", 1)[1] not in ("munge-key", "reconfigure")}  # fmt: skip
    assert checked == {"slurmctld", "slurmd", "slurmrestd", "slurmdbd", "mysql", "sshd",
                       "munge", "sssd"}  # fmt: skip
    for name, container in every_container(objects):
        if name.endswith(("/munge-key", "/reconfigure")):
            continue  # an init step; a shell loop whose exit restarts it
        assert "livenessProbe" in container and "readinessProbe" in container, name


def test_slurmctld_is_restarted_when_it_stops_answering_not_when_it_is_slow() -> None:
    """SUNK's "About SUNK": a failing slurmctld is restarted. A hung one still accepts TCP: the
    liveness check is an RPC, given longer than MessageTimeout and two minutes before a restart."""
    slurmctld = containers(workloads(render())["slurm-controller"])["slurmctld"]
    live = slurmctld["livenessProbe"]
    assert live["exec"]["command"] == ["scontrol", "ping"]
    assert live["timeoutSeconds"] > 10  # Slurm's MessageTimeout
    assert live["periodSeconds"] * live["failureThreshold"] >= 120
    startup = slurmctld["startupProbe"]  # state recovery is not a failure
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300


def test_slurmd_is_probed_over_its_own_rpc() -> None:
    slurmd = containers(workloads(render())["slurm-cpu"])["slurmd"]
    assert slurmd["livenessProbe"]["exec"]["command"] == ["scontrol", "show", "slurmd"]


# ---- 5. no container without resources -----------------------------------------------------


def test_no_container_runs_without_requests_and_a_memory_limit() -> None:
    for name, container in every_container(render(ACCOUNTING + DIRECTORY)):
        if name.startswith("slurm-cpu/slurmd"):
            continue  # the node definition's resources size the Slurm node
        resources = container.get("resources") or {}
        assert resources.get("requests"), name
        assert resources.get("limits", {}).get("memory"), name


def test_resources_of_sidecars_and_control_plane_come_from_values() -> None:
    found = workloads(render(ACCOUNTING + DIRECTORY + """
sidecars:
  munge: {resources: {requests: {cpu: 50m, memory: 32Mi}}}
  sssd: {resources: {requests: {cpu: 20m, memory: 100Mi}}}
  reconfigure: {resources: {requests: {cpu: 5m, memory: 8Mi}}}
rest: {resources: {requests: {cpu: "1", memory: 1Gi}}}
mysql: {resources: {requests: {cpu: "2", memory: 4Gi}}}
"""))  # fmt: skip
    controller = found["slurm-controller"]
    assert containers(controller)["munge"]["resources"] == {
        "requests": {"cpu": "50m", "memory": "32Mi"}}  # fmt: skip
    assert init_containers(controller)["munge-key"]["resources"]["requests"]["cpu"] == "50m"
    assert containers(controller)["sssd"]["resources"]["requests"]["memory"] == "100Mi"
    assert containers(controller)["reconfigure"]["resources"]["requests"]["cpu"] == "5m"
    assert containers(found["slurm-rest"])["slurmrestd"]["resources"]["requests"]["cpu"] == "1"
    assert containers(found["slurm-mysql"])["mysql"]["resources"]["requests"]["memory"] == "4Gi"


def test_an_unknown_sidecar_is_reported() -> None:
    config = config_from("sidecars: {munged: {resources: {}}}\n")
    assert any("sidecars.munged" in w.message and "'munge'" in w.message
               for w in config.warnings)  # fmt: skip


# ---- 6. and 8. images: ours by default, one release for the control plane -------------------


def test_every_slurm_pod_runs_our_image_by_default() -> None:
    for name, container in every_container(render_fixture()):
        expected = ("ghcr.io/sunk-reconciler/mariadb:10.11" if name.startswith("slurm-mysql/")
                    else SLURM_IMAGE)  # fmt: skip
        assert container["image"] == expected, name


def test_control_plane_components_follow_the_controllers_image() -> None:
    found = workloads(render(ACCOUNTING + "controller: {image: {tag: 24.11.6}}\n"))
    for name in ("slurm-controller", "slurm-rest", "slurm-accounting", "slurm-login"):
        for container in containers(found[name]).values():
            assert container["image"] == "ghcr.io/sunk-reconciler/slurm:24.11.6", name
    assert containers(found["slurm-cpu"])["slurmd"]["image"] == SLURM_IMAGE


def test_a_components_own_image_still_wins() -> None:
    found = workloads(render(ACCOUNTING + """
controller: {image: {repository: example/ctld, tag: "1.0"}}
rest: {image: {repository: example/rest, tag: "2.0"}}
login: {image: {repository: custom-controller, tag: 1.0.0}}
""", "compute: {nodes: {cpu: {image: {repository: custom-slurmd, tag: 1.0.0}}}}\n"))  # fmt: skip
    image = {name: containers(w)[main]["image"] for name, w, main in [
        (n, found[n], m) for n, m in [("slurm-controller", "slurmctld"), ("slurm-rest",
        "slurmrestd"), ("slurm-accounting", "slurmdbd"), ("slurm-login", "sshd"),
        ("slurm-cpu", "slurmd")]]}  # fmt: skip
    assert image == {"slurm-controller": "example/ctld:1.0", "slurm-rest": "example/rest:2.0",
                     "slurm-accounting": "example/ctld:1.0",
                     "slurm-login": "custom-controller:1.0.0",
                     "slurm-cpu": "custom-slurmd:1.0.0"}  # fmt: skip


def test_a_registry_and_tag_move_every_image() -> None:
    registry = "image: {registry: 'registry.example.com:5000/hpc', tag: 24.11.7}\n"
    objects = render(ACCOUNTING + registry)
    for name, container in every_container(objects):
        repository = "mariadb:10.11" if name.startswith("slurm-mysql/") else "slurm:24.11.7"
        assert container["image"] == f"registry.example.com:5000/hpc/{repository}", name


@pytest.mark.parametrize(("values", "message"), [
    ("image: {registry: 'https://ghcr.io/x'}\n", r"image.registry 'https://ghcr.io/x' is not"),
    ("image: {tag: 'a b'}\n", r"image.tag 'a b' is not valid"),
    ("image: {tag: 24}\n", r"image.tag must be a string"),
])  # fmt: skip
def test_a_bad_image_key_names_its_line(values: str, message: str) -> None:
    with pytest.raises(ConfigTypeError, match=message) as error:
        config_from(values)
    assert error.value.where is not None and error.value.where.line == 1


def test_daemons_run_as_the_users_the_image_makes() -> None:
    found = workloads(render(ACCOUNTING))
    slurm = {"runAsUser": 64030, "runAsGroup": 64030, "fsGroup": 64030}
    assert pod(found["slurm-controller"])["securityContext"] == slurm
    assert pod(found["slurm-accounting"])["securityContext"] == slurm
    # slurmrestd refuses SlurmUser and root (checked on 24.11): nobody.
    assert pod(found["slurm-rest"])["securityContext"]["runAsUser"] == 65534
    assert containers(found["slurm-cpu"])["slurmd"]["securityContext"]["runAsUser"] == 0
    assert containers(found["slurm-login"])["sshd"]["securityContext"]["runAsUser"] == 0


# ---- 7. the /run directories daemons write are mounted --------------------------------------


def test_slurmdbd_and_sshd_get_their_run_directories() -> None:
    found = workloads(render(ACCOUNTING))
    accounting = found["slurm-accounting"]
    slurmdbd = containers(accounting)["slurmdbd"]
    run = mounts(slurmdbd)["/run/slurmdbd"]["name"]
    assert "emptyDir" in volumes(accounting)[run]
    assert "mkdir" not in slurmdbd["command"][-1]
    assert pod(accounting)["securityContext"]["fsGroup"] == 64030  # SlurmUser's group writes it
    login = found["slurm-login"]
    sshd = containers(login)["sshd"]
    assert "emptyDir" in volumes(login)[mounts(sshd)["/run/sshd"]["name"]]
    # sshd refuses a privilege separation directory others may write (an emptyDir is 0777).
    assert sshd["args"][-1].startswith("chmod 0755 /run/sshd && ")
    # The image has no host keys: sshd exits at once without one.
    assert "ssh-keygen -A && exec /usr/sbin/sshd" in sshd["args"][-1]


def test_cgroup_config_lines_replace_ours_or_add_to_them() -> None:
    objects = render("""
slurmConfig:
  slurmCtld: {taskPlugin: task/cgroup}
  cgroupConfig: |
    ConstrainRAMSpace=no
    ConstrainDevices=yes
""")
    conf = next(o for o in objects if o["metadata"]["name"] == "slurm-slurm-conf")["data"]
    lines = conf["cgroup.conf"].splitlines()
    assert "ConstrainRAMSpace=no" in lines and "ConstrainRAMSpace=yes" not in lines
    assert lines[-1] == "ConstrainDevices=yes"


def test_cgroup_config_without_a_cgroup_plugin_is_reported() -> None:
    state = compile_desired_state(config_from("slurmConfig: {cgroupConfig: 'X=1'}\n" + NODES))
    assert any("cgroupConfig is not used" in w.message for w in state.warnings)


def test_a_control_character_in_cgroup_config_names_its_line() -> None:
    with pytest.raises(ConfigTypeError, match=r"slurmConfig.cgroupConfig line 1 holds"):
        config_from('slurmConfig: {cgroupConfig: "A=1\\rB=2"}\n')
