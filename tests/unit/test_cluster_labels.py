"""compute.clusterLabels: the shipped layers request
`sunk.coreweave.com/accelerator` and select on `gpu.nvidia.com/*` and `node.coreweave.cloud/cpu`
(the rtx4000 layer of SUNK's "Slurm Workload Manager" page), names only CoreWeave's clusters carry.
The key renames them; `plan` warns when no Node carries a name a node set needs."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.config.repo import Config
from reconciler.errors import ConfigTypeError
from reconciler.pipeline.plans import plan_offline
from reconciler.plan.node_names import missing_on_nodes, names_iter, needs_of, nodeset_wheres
from tests.unit.conftest import config_from

Obj = dict[str, Any]
# The layered definition of SUNK's "Slurm Workload Manager" page: "rtx4000-cu117: replicas: 2,
# definitions: [rtx4000, cu117, las1]".
SEED = """
compute:
  nodes:
    rtx4000-cu117:
      enabled: true
      replicas: 2
      definitions: [rtx4000, cu117, las1]
    cpu:
      enabled: true
      replicas: 1
      definitions: [cpu-epyc]
"""
# A second extended resource each GPU Node advertises for slurmd, beside the device plugin's
# nvidia.com/gpu that the scheduler's Pods request (docs/node-definitions.md).
SLURMD_GPU = "example.com/slurmd-gpu"
ELSEWHERE = f"""
compute:
  clusterLabels:
    gpuResource: {SLURMD_GPU}
    gpuModel: nvidia.com/gpu.product
    cpu: feature.node.kubernetes.io/cpu-model.vendor_id
"""


def compiled(values: str, files: dict[str, str] | None = None) -> tuple[Config, DesiredState]:
    config = config_from(values, files)
    return config, compile_desired_state(config)


def pod_spec(state: DesiredState, name: str) -> Obj:
    sts = next(o for o in state.kube_objects
               if o["kind"] == "StatefulSet" and o["metadata"]["name"] == name)  # fmt: skip
    return sts["spec"]["template"]["spec"]


def match_keys(spec: Obj) -> set[str]:
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return {e["key"] for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"]}


def test_by_default_the_layers_say_coreweave_names_as_slurm_workload_manager_does() -> None:
    _, state = compiled(SEED)
    gpu = pod_spec(state, "slurm-rtx4000-cu117")
    assert gpu["containers"][0]["resources"]["requests"]["sunk.coreweave.com/accelerator"] == "7"
    assert match_keys(gpu) == {"gpu.nvidia.com/model", "topology.kubernetes.io/region"}
    assert match_keys(pod_spec(state, "slurm-cpu")) == {"node.coreweave.cloud/cpu"}


def test_cluster_labels_rename_the_shipped_layers_names() -> None:
    _, state = compiled(SEED, {"values.d/cluster.yaml": ELSEWHERE})
    gpu = pod_spec(state, "slurm-rtx4000-cu117")
    requests = gpu["containers"][0]["resources"]["requests"]
    assert requests[SLURMD_GPU] == "7" and "sunk.coreweave.com/accelerator" not in requests
    assert gpu["containers"][0]["resources"]["limits"][SLURMD_GPU] == "7"
    assert match_keys(gpu) == {"nvidia.com/gpu.product", "topology.kubernetes.io/region"}
    cpu = pod_spec(state, "slurm-cpu")
    assert match_keys(cpu) == {"feature.node.kubernetes.io/cpu-model.vendor_id"}


def test_a_repos_own_layer_keeps_the_names_it_writes() -> None:
    own = {
        "compute-defs/mine.yaml": """
mine:
  resources: {limits: {cpu: "2", memory: 4Gi, sunk.coreweave.com/accelerator: "1"}}
""",
        "values.d/cluster.yaml": ELSEWHERE,
    }
    values = "compute: {nodes: {x: {enabled: true, replicas: 1, definitions: [mine]}}}"
    _, state = compiled(values, own)
    limits = pod_spec(state, "slurm-x")["containers"][0]["resources"]["limits"]
    assert "sunk.coreweave.com/accelerator" in limits


def test_a_name_kubernetes_refuses_names_its_line() -> None:
    with pytest.raises(ConfigTypeError, match=r"compute\.clusterLabels\.gpuResource") as error:
        config_from("compute:\n  clusterLabels:\n    gpuResource: 'nvidia gpu'\n")
    assert error.value.where is not None and error.value.where.line == 3


def node(labels: dict[str, str], allocatable: dict[str, str] | None = None) -> Obj:
    return {
        "metadata": {"name": "n", "labels": labels},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", **(allocatable or {})}},
    }


def warnings_for(values: str, nodes: list[Obj], files: dict[str, str] | None = None) -> list[str]:
    config, state = compiled(values, files)
    return missing_on_nodes(needs_of(state.kube_objects), list(names_iter(nodes)),
                            config.values, nodeset_wheres(state.nodesets))  # fmt: skip


def test_nodes_without_coreweaves_names_warn_naming_set_label_and_key() -> None:
    plain = [node({"topology.kubernetes.io/region": "LAS1"}, {"nvidia.com/gpu": "8"})]
    found = warnings_for(SEED, plain)
    gpu = [w for w in found if "'rtx4000-cu117'" in w]
    assert any("gpu.nvidia.com/model" in w and "compute.clusterLabels.gpuModel" in w
               and "Pending" in w for w in gpu)  # fmt: skip
    assert any("sunk.coreweave.com/accelerator" in w and "compute.clusterLabels.gpuResource" in w
               for w in gpu)  # fmt: skip
    assert any("'cpu'" in w and "node.coreweave.cloud/cpu" in w
               and "compute.clusterLabels.cpu" in w for w in found)  # fmt: skip
    assert all("topology.kubernetes.io/region" not in w for w in found)
    assert all(w.startswith("values.yaml:") for w in found)  # the node set's line


def test_nodes_that_carry_the_names_raise_no_warning() -> None:
    coreweave = [node({"topology.kubernetes.io/region": "LAS1",
                       "gpu.nvidia.com/model": "Quadro_RTX_4000"},
                      {"sunk.coreweave.com/accelerator": "7"}),
                 node({"node.coreweave.cloud/cpu": "amd-epyc-rome"})]  # fmt: skip
    assert warnings_for(SEED, coreweave) == []
    renamed = [node({"topology.kubernetes.io/region": "LAS1",
                     "nvidia.com/gpu.product": "Quadro_RTX_4000",
                     "feature.node.kubernetes.io/cpu-model.vendor_id": "AMD"},
                    {"nvidia.com/gpu": "8", SLURMD_GPU: "8"})]  # fmt: skip
    assert warnings_for(SEED, renamed, {"values.d/cluster.yaml": ELSEWHERE}) == []


def test_a_label_one_affinity_term_can_do_without_is_not_needed() -> None:
    values = """
compute:
  nodes:
    x:
      enabled: true
      replicas: 1
      resources: {limits: {cpu: "1", memory: 1Gi}}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions: [{key: gpu.nvidia.com/class, operator: In, values: [A]}]
              - matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
"""
    assert warnings_for(values, [node({"kubernetes.io/arch": "amd64"})]) == []


def test_offline_plan_says_coreweaves_names_are_not_checked() -> None:
    warnings = plan_offline(config_from(SEED)).warnings
    said = [w for w in warnings if "CoreWeave" in w]
    assert len(said) == 1 and "compute.clusterLabels" in said[0]
    assert "sunk.coreweave.com/accelerator" in said[0] and "node.coreweave.cloud/cpu" in said[0]
    elsewhere = plan_offline(config_from(SEED, {"values.d/cluster.yaml": ELSEWHERE})).warnings
    # gpuModel, gpuResource and cpu renamed; nothing CoreWeave's is left to say.
    assert [w for w in elsewhere if "CoreWeave" in w] == []


# ---- the GPU resource slurmd holds and the one the scheduler's Pods request ------------------

NVIDIA_GPU = "compute:\n  clusterLabels:\n    gpuResource: nvidia.com/gpu\n"
NO_SCHEDULER = "scheduler:\n  enabled: false\n"


def test_the_resource_the_schedulers_gpu_pods_request_is_refused_at_its_line() -> None:
    """gpuResource: nvidia.com/gpu (the example these docs gave) made each shipped GPU layer's
    slurmd Pod hold all of its Node's nvidia.com/gpu, the resource the scheduler's GPU Pods
    request (the Pods of SUNK's "Schedule Kubernetes Pods with Slurm"): none could ever be
    bound on those Nodes, and nothing said why."""
    with pytest.raises(ConfigTypeError) as error:
        config_from(SEED, {"values.d/cluster.yaml": NVIDIA_GPU})
    where = error.value.where
    assert where is not None and (where.file, where.line) == ("values.d/cluster.yaml", 3)
    said = str(error.value)
    assert "compute.clusterLabels.gpuResource" in said and "nvidia.com/gpu" in said
    assert "scheduler.enabled" in said and "sunk.coreweave.com/accelerator" in said


def test_without_the_scheduler_slurmd_may_hold_the_device_plugins_gpus() -> None:
    """No Pod of ours is bound beside slurmd then: it may hold every nvidia.com/gpu."""
    _, state = compiled(SEED + NO_SCHEDULER, {"values.d/cluster.yaml": NVIDIA_GPU})
    requests = pod_spec(state, "slurm-rtx4000-cu117")["containers"][0]["resources"]["requests"]
    assert requests["nvidia.com/gpu"] == "7"
    assert not [w for w in state.warnings if "nvidia.com/gpu" in str(w)]


@pytest.mark.parametrize("name", ["cpu", "memory", "hugepages-2Mi", "kubernetes.io/batch"])
def test_a_kubernetes_resource_is_no_gpu_resource(name: str) -> None:
    """Every scheduled Pod requests cpu and memory; a shipped GPU layer's GPU count would
    replace slurmd's own cpu request. Refused with or without the scheduler."""
    with pytest.raises(ConfigTypeError, match=r"compute\.clusterLabels\.gpuResource") as error:
        config_from(SEED + NO_SCHEDULER, {"values.d/cluster.yaml": NVIDIA_GPU.replace(
            "nvidia.com/gpu", name)})  # fmt: skip
    assert error.value.where is not None and error.value.where.line == 3


OWN_GPU_LAYER = {
    "compute-defs/mine.yaml": """
mine:
  resources:
    limits: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "8"}
"""
}
OWN_GPU_SET = "compute: {nodes: {x: {enabled: true, replicas: 1, definitions: [mine]}}}\n"


def test_a_slurmd_pod_that_requests_the_schedulers_gpus_is_named_in_the_plan() -> None:
    """A repo's own layer is not renamed: its slurmd Pods may still ask for nvidia.com/gpu.
    The scheduler then never binds a GPU Pod on those Nodes; the plan names the definition,
    the layer that sets it and its file."""
    _, state = compiled(OWN_GPU_SET, OWN_GPU_LAYER)
    said = [str(w) for w in state.warnings if "nvidia.com/gpu" in str(w)]
    assert len(said) == 1, state.warnings
    assert said[0].startswith("values.yaml:1") and "node definition 'x'" in said[0]
    assert "layer 'mine' (compute-defs/mine.yaml:2)" in said[0]
    assert "never" in said[0] and "sunk.coreweave.com/accelerator" in said[0]
    _, off = compiled(OWN_GPU_SET + NO_SCHEDULER, OWN_GPU_LAYER)
    assert not [w for w in off.warnings if "nvidia.com/gpu" in str(w)]


def test_the_missing_accelerator_warning_does_not_send_you_to_nvidia_gpu() -> None:
    """Nodes that offer only nvidia.com/gpu: renaming gpuResource to it is the trap above."""
    plain = [node({"topology.kubernetes.io/region": "LAS1"}, {"nvidia.com/gpu": "8"})]
    [said] = [w for w in warnings_for(SEED, plain) if "sunk.coreweave.com/accelerator" in w]
    assert "not nvidia.com/gpu" in said and "docs/node-definitions.md" in said
    [offline] = [w for w in plan_offline(config_from(SEED)).warnings if "CoreWeave" in w]
    assert "not nvidia.com/gpu" in offline
