"""Golden tests: every composition example of SUNK's "Slurm Workload Manager" page ("Compute Node
Definitions")."""

from __future__ import annotations

from typing import Any

import yaml

from reconciler.compile.nodesets import compose_all, compose_node_definition
from reconciler.compile.slurm_nodes import slurm_node_spec
from reconciler.config.layering import deep_update
from tests.unit.conftest import config_from

# SUNK's "Slurm Workload Manager" page, the long-form definition (verbatim but for comments).
LONG_FORM = """
compute:
  nodes:
    rtx4000:
      enabled: false
      replicas: 2
      features: [gpu, las1, cu117]
      image:
        repository: registry.gitlab.com/coreweave/sunk/slurmd-cw-cu117-extras
      env:
        - name: example
          value: "1"
      gresGpu: quadro_rtx_4000:7
      resources:
        limits:
          memory: 16Gi
          sunk.coreweave.com/accelerator: '7'
        requests:
          cpu: '8'
          memory: 16Gi
          sunk.coreweave.com/accelerator: '7'
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - key: topology.kubernetes.io/region
                    operator: In
                    values: [LAS1]
                  - key: gpu.nvidia.com/model
                    operator: In
                    values: [Quadro_RTX_4000]
"""

SHORT_FORM = """
compute:
  nodes:
    rtx4000-cu117:
      replicas: 2
      env:
        - name: example
          value: "1"
      definitions:
        - rtx4000
        - cu117
        - las1
"""


def _expressions(definition: dict[str, Any]) -> dict[str, tuple[str, list[str]]]:
    terms = definition["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert len(terms) == 1
    return {e["key"]: (e["operator"], e["values"]) for e in terms[0]["matchExpressions"]}


def _normalized(definition: dict[str, Any]) -> dict[str, Any]:
    """Order-only differences do not change the Slurm node or the Pod placement. The image is
    compared apart: SUNK's long form names CoreWeave's CUDA image, our cu117 layer none."""
    out = {k: v for k, v in definition.items() if k not in ("enabled", "affinity", "image")}
    out["features"] = sorted(out["features"])
    out["affinity"] = _expressions(definition)
    return out


def test_short_form_equals_long_form() -> None:
    long_def = compose_all(config_from(LONG_FORM))[0].definition
    short = compose_all(config_from(SHORT_FORM))[0]
    assert short.layers == ("base", "rtx4000", "cu117", "las1")
    assert _normalized(short.definition) == _normalized(long_def)
    assert long_def["image"]["repository"].endswith("slurmd-cw-cu117-extras")
    assert "image" not in short.definition  # our default image (docs/rendered-pods.md#images)
    # SUNK's long form says `enabled: false` ("can be toggled"); base switches short forms on.
    assert long_def["enabled"] is False and short.definition["enabled"] is True


def test_short_and_long_form_make_the_same_slurm_nodes() -> None:
    long_ns = compose_all(config_from(LONG_FORM))[0]
    short_ns = compose_all(config_from(SHORT_FORM))[0]
    long_spec = slurm_node_spec("slurm", long_ns, long_ns.definition)
    short_spec = slurm_node_spec("slurm", short_ns, short_ns.definition)
    assert (long_spec.cpus, long_spec.real_memory_mb, str(long_spec.gres)) == (
        8,
        16384,
        "gpu:quadro_rtx_4000:7",
    )
    assert (short_spec.cpus, short_spec.real_memory_mb, short_spec.gres) == (
        long_spec.cpus,
        long_spec.real_memory_mb,
        long_spec.gres,
    )
    assert set(short_spec.features) - {"rtx4000-cu117"} == set(long_spec.features) - {"rtx4000"}


def test_my_node_and_my_other_layer() -> None:
    base = yaml.safe_load(
        """
        features: [gpu]
        resources:
          limits:
            memory: 200Gi
            sunk.coreweave.com/accelerator: '7'
        """
    )
    applied = yaml.safe_load(
        """
        features: [las1]
        resources:
          limits:
            memory: 100Gi
          requests:
            memory: 16Gi
            sunk.coreweave.com/accelerator: '7'
        """
    )
    expected = yaml.safe_load(
        """
        features: [gpu, las1]
        resources:
          limits:
            memory: 100Gi
            sunk.coreweave.com/accelerator: '7'
          requests:
            memory: 16Gi
            sunk.coreweave.com/accelerator: '7'
        """
    )
    assert deep_update(base, applied) == expected


def test_rtx4000_cu117_las1_lga1_a4000_is_an_a4000_node_in_lga1() -> None:
    config = config_from(
        """
        compute:
          nodes:
            mixed:
              definitions: [rtx4000, cu117, las1, lga1, a4000]
        """
    )
    composed = compose_node_definition("mixed", config).definition
    assert _expressions(composed) == {
        "gpu.nvidia.com/model": ("In", ["RTX_A4000"]),
        "topology.kubernetes.io/region": ("In", ["LGA1"]),
    }
    assert composed["gresGpu"] == "rtx_a4000:7"
    assert composed["resources"]["requests"]["cpu"] == "32"
    assert composed["resources"]["limits"]["memory"] == "200Gi"
    assert "image" not in composed  # no layer picks an image: our default runs
    # String lists are unioned, so both region features stay (SUNK's rule, not a choice).
    assert composed["features"] == ["gpu", "cu117", "las1", "lga1"]


def test_inline_keys_override_layers() -> None:
    config = config_from(
        """
        compute:
          nodes:
            my-node:
              definitions: [rtx4000, cu117, las1]
              resources:
                limits:
                  memory: 100Gi
        """
    )
    composed = compose_node_definition("my-node", config).definition
    assert composed["resources"]["limits"] == {
        "memory": "100Gi",
        "sunk.coreweave.com/accelerator": "7",
    }
    assert composed["resources"]["requests"]["memory"] == "16Gi"


def test_layers_as_values() -> None:
    config = config_from(
        """
        compute:
          nodes:
            reservation-id:
              affinity:
                nodeAffinity:
                  requiredDuringSchedulingIgnoredDuringExecution:
                    nodeSelectorTerms:
                      - matchExpressions:
                          - key: node.coreweave.cloud/reserved
                            operator: In
                            values: [my-reservation-id]
            my-node-def:
              definitions: [rtx4000, las1, cu117, reservation-id]
            my-second-node-def:
              definitions: [a4000, lga1, cu120, reservation-id]
        """
    )
    by_name = {n.name: n for n in compose_all(config)}
    assert not by_name["reservation-id"].enabled  # a layer only: no `enabled`, no nodes
    first = _expressions(by_name["my-node-def"].definition)
    second = _expressions(by_name["my-second-node-def"].definition)
    assert first == {
        "gpu.nvidia.com/model": ("In", ["Quadro_RTX_4000"]),
        "topology.kubernetes.io/region": ("In", ["LAS1"]),
        "node.coreweave.cloud/reserved": ("In", ["my-reservation-id"]),
    }
    assert second == {
        "gpu.nvidia.com/model": ("In", ["RTX_A4000"]),
        "topology.kubernetes.io/region": ("In", ["LGA1"]),
        "node.coreweave.cloud/reserved": ("In", ["my-reservation-id"]),
    }
    assert "cu120" in by_name["my-second-node-def"].definition["features"]


def test_layers_may_reference_layers_and_base_applies_once() -> None:
    config = config_from(
        """
        compute:
          nodes:
            gpu-site:
              definitions: [rtx4000, lga1]
              labels: {site: "yes"}
            nodes-a:
              definitions: [gpu-site, cu120]
        """
    )
    nodeset = compose_node_definition("nodes-a", config)
    assert nodeset.layers == ("base", "rtx4000", "lga1", "gpu-site", "cu120")
    assert nodeset.definition["labels"] == {"site": "yes"}
    assert _expressions(nodeset.definition)["topology.kubernetes.io/region"] == ("In", ["LGA1"])
