"""What `local up --kubelet REPO` makes beside the repo, from the repo's compiled shape: the
values layer this machine needs, the images, claims and Secrets the repo's Pods name that no
`apply` makes, and the slurmrestd URL inside the cluster. Pure: plain data in, plain data out.

The machine layer (MACHINE_LAYER in the applied copy of the repo) is what a site without GPUs
and with few CPUs writes by hand:
- slurmd Pods declare the repo's CPUs, more than a Node has: `SlurmdParameters=config_overrides`;
- the control plane's Pods ask for less than one of these Nodes holds (controller and login:
  the repo's requests are sized for a real cluster);
- no GPU here: autodetection finds no device, and slurmd drops a GPU without a device file, so
  each GPU node definition lists device files of its own (`gresAutoDetect: "off"`, a
  `gresConfig` line per definition), made by an init container in an emptyDir: character
  devices of NVIDIA's major number, one minor per GPU, that no driver serves. Each is a device
  of its own, so task/cgroup's ConstrainDevices allows a job its GPU and denies the others (an
  open of its own fails "No such device or address", of another "Operation not permitted");
  links to /dev/null were one device for all, and a job's cgroup denied it /dev/null.

The Pods' `imagePullSecrets` name registry logins nothing here uses (every image is loaded
into the Nodes, none is pulled): `local up` makes each as an empty one (pull_secrets_named).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.compile.desired import DesiredState

MACHINE_LAYER = "values.d/zz-local-machine.yaml"
FAKE_GPU_DIR = "/dev/fake-gpu"
FAKE_GPU_MAJOR = 195  # NVIDIA's character device major (/dev/nvidia<minor>)
OUR_REGISTRY = "ghcr.io/sunk-reconciler/"
# The control plane's Pods here: (requests, limits) by component, when the repo's ask for
# more than SMALL_CPU_SHARE of the machine.
SMALL_RESOURCES = {
    "controller": ({"cpu": "250m", "memory": "512Mi"}, {"memory": "1Gi"}),
    "login": ({"cpu": "100m", "memory": "256Mi"}, {"memory": "1Gi"}),
}
SMALL_CPU_SHARE = 0.25
CLAIM_SIZE = "1Gi"


@dataclass(frozen=True)
class Machine:
    cpus: int
    gpus: bool  # a GPU device (/dev/nvidia0) exists


def machine_layer(
    state: DesiredState, values: Mapping[str, Any], machine: Machine
) -> dict[str, Any]:
    """The values layer for this machine (empty when it needs none)."""
    layer: dict[str, Any] = {}
    slurm_config: dict[str, Any] = {}
    extra = str((values.get("slurmConfig") or {}).get("extraConfig") or "")
    if any(n.cpus > machine.cpus for n in state.slurm_nodes) and "config_overrides" not in extra:
        joined = extra if not extra or extra.endswith("\n") else extra + "\n"
        slurm_config["extraConfig"] = joined + "SlurmdParameters=config_overrides\n"
    if not machine.gpus:
        lines, definitions = _fake_gpus(state)
        if lines:
            given = str((values.get("slurmConfig") or {}).get("gresConfig") or "")
            slurm_config["gresAutoDetect"] = "off"
            slurm_config["gresConfig"] = "".join(
                f"{line}\n" for line in (*given.splitlines(), *lines)
            )
            layer["compute"] = {"nodes": definitions}
    if slurm_config:
        layer["slurmConfig"] = slurm_config
    for component, (requests, limits) in SMALL_RESOURCES.items():
        asked = _main_requests(state, component)
        if asked is not None and _cpus(asked.get("cpu", "0")) > machine.cpus * SMALL_CPU_SHARE:
            layer[component] = {"resources": {"requests": requests, "limits": limits}}
    return layer


def _fake_gpus(state: DesiredState) -> tuple[list[str], dict[str, Any]]:
    """gres.conf lines and node definition additions that give each GPU node its device files."""
    lines: list[str] = []
    definitions: dict[str, Any] = {}
    nodes = (*state.slurm_nodes, *state.spare_nodes)
    for nodeset in state.nodesets:
        mine = [n for n in nodes if n.nodeset == nodeset.name and n.gpus and n.gres]
        if not mine:
            continue
        count = max(n.gpus for n in mine)
        kind = _gpu_type(str(mine[0].gres))
        files = f"{FAKE_GPU_DIR}/nvidia[0-{count - 1}]" if count > 1 else f"{FAKE_GPU_DIR}/nvidia0"
        typed = f" Type={kind}" if kind else ""
        lines.append(f"NodeName={','.join(n.name for n in mine)} Name=gpu{typed} File={files}")
        image = _slurmd_image(state, nodeset.name)
        links = " ".join(str(i) for i in range(count))
        script = (
            f"for i in {links}; do rm -f /fake-gpu/nvidia$i && "
            f"mknod -m 666 /fake-gpu/nvidia$i c {FAKE_GPU_MAJOR} $i; done"
        )
        definitions[nodeset.name] = {
            "initContainers": [{
                "name": "fake-gpus", "image": image,
                "command": ["sh", "-c", script],
                "volumeMounts": [{"name": "fake-gpu", "mountPath": "/fake-gpu"}],
            }],
            "volumes": [{"name": "fake-gpu", "emptyDir": {}}],
            "volumeMounts": [{"name": "fake-gpu", "mountPath": FAKE_GPU_DIR}],
        }  # fmt: skip
    return lines, definitions


def _gpu_type(gres: str) -> str:
    """`gpu:quadro_rtx_4000:7` -> quadro_rtx_4000; `gpu:7` -> ''."""
    parts = next((g for g in gres.split(",") if g.startswith("gpu:")), "").split(":")
    return parts[1] if len(parts) == 3 else ""


def _slurmd_image(state: DesiredState, nodeset: str) -> str:
    for obj in _workloads(state):
        if obj["kind"] == "StatefulSet" and obj["metadata"]["name"].endswith("-" + nodeset):
            return str(_pod_spec(obj)["containers"][0]["image"])
    return next(iter(sorted(images(state))))


def _main_requests(state: DesiredState, component: str) -> dict[str, Any] | None:
    for obj in _workloads(state):
        if obj["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component:
            return dict(_pod_spec(obj)["containers"][0].get("resources", {}).get("requests") or {})
    return None


def _cpus(quantity: object) -> float:
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _workloads(state: DesiredState) -> Iterator[dict[str, Any]]:
    return (o for o in state.kube_objects if o["kind"] in ("Deployment", "StatefulSet"))


def _pod_spec(workload: Mapping[str, Any]) -> dict[str, Any]:
    return dict(workload["spec"]["template"]["spec"])


def _containers(state: DesiredState) -> Iterator[dict[str, Any]]:
    for obj in _workloads(state):
        spec = _pod_spec(obj)
        yield from (*spec.get("initContainers", []), *spec["containers"])


def images(state: DesiredState) -> set[str]:
    """Every image the repo's Pods name."""
    return {str(c["image"]) for c in _containers(state)}


def claims_to_make(state: DesiredState) -> list[str]:
    """Claims the repo's Pods mount that nothing of the repo makes (compute.mounts names
    them; a site's storage holds them)."""
    made = {
        o["metadata"]["name"] for o in state.kube_objects if o["kind"] == "PersistentVolumeClaim"
    }
    named = {v["persistentVolumeClaim"]["claimName"] for o in _workloads(state)
             for v in _pod_spec(o).get("volumes", []) if "persistentVolumeClaim" in v}  # fmt: skip
    return sorted(named - made)


def claim(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteMany"],
                 "resources": {"requests": {"storage": CLAIM_SIZE}}},
    }  # fmt: skip


def secrets_named(state: DesiredState) -> list[str]:
    """Secrets the repo's Pods name that no `apply` makes (apply makes its generated ones:
    munge, JWT, MySQL password; and those of the values)."""
    made = {s.name for s in state.secrets} | {s.name for s in state.value_secrets}
    made |= {o["metadata"]["name"] for o in state.kube_objects if o["kind"] == "Secret"}
    named: set[str] = set()
    for obj in _workloads(state):
        named |= {
            v["secret"]["secretName"] for v in _pod_spec(obj).get("volumes", []) if "secret" in v
        }
    for container in _containers(state):
        for env in container.get("env", []):
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            named |= {ref["name"]} if ref else set()
        named |= {e["secretRef"]["name"] for e in container.get("envFrom", []) if "secretRef" in e}
    return sorted(named - made)


def pull_secrets_named(state: DesiredState) -> list[str]:
    """The registry logins the repo's Pods name (`imagePullSecrets`) that no `apply` makes."""
    made = {o["metadata"]["name"] for o in state.kube_objects if o["kind"] == "Secret"}
    named = {str(ref["name"]) for obj in _workloads(state)
             for ref in _pod_spec(obj).get("imagePullSecrets", []) if ref.get("name")}  # fmt: skip
    return sorted(named - made)


def rest_url(state: DesiredState) -> str:
    """slurmrestd inside the cluster: the rest Service by its DNS name and port."""
    for obj in state.kube_objects:
        if obj["kind"] == "Service" and obj["metadata"]["name"] == f"{state.release}-rest":
            port = obj["spec"]["ports"][0]["port"]
            return f"http://{state.release}-rest.{state.namespace}.svc.cluster.local:{port}"
    raise ValueError(f"the repo renders no Service {state.release}-rest")
