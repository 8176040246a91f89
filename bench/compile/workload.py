"""The compile benchmark's synthetic config repo, generated as YAML text at any size; the
plan benchmark compiles it too."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

TARGET_NODES = 10_000
TARGET_SECONDS = 2.0
REPLICAS = 10
STAGES = ("load", "compile", "render", "total")

# Shipped library layers the generated definitions cycle through.
NODE_TYPES = (
    "h100", "a100", "a40", "a6000", "a5000", "a4000", "rtx5000", "rtx4000", "cpu-epyc", "cpu-xeon",
)  # fmt: skip
CUDA = ("cu117", "cu118", "cu120", "cu121", "cu122", "cu124")
REGIONS = ("las1", "lga1", "ord1")
# Generated repo layers (compute-defs/generated.yaml): the same file at every size.
TEAM_LAYERS = 50
TUNE_LAYERS = 50

PARTITIONS = "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP"

VALUES_HEADER = f"""\
slurmConfig:
  killWait: 30
  waitTime: 0
  defMemPerCPU: 1024
  selectTypeParameters: CR_Core_Memory
  slurmd:
    prolog: |
      #!/usr/bin/env bash
      exit 0
  extraConfig: |
    SchedulerParameters=sched_interval=2,bf_interval=2
compute:
  mounts:
    - name: /mnt/data
      pvc: data-nvme
  s6:
    motd:
      type: oneshot
      script: |
        #!/usr/bin/env bash
        echo "managed by reconciler" > /etc/motd
  partitions: "{PARTITIONS}"
"""


# --------------------------------------------------------------------------- workload


@dataclass(frozen=True)
class Workload:
    label: str
    definitions: int
    replicas: int
    note: str = ""

    @property
    def nodes(self) -> int:
        return self.definitions * self.replicas

    @property
    def spec(self) -> str:
        return f"{self.definitions}x{self.replicas}"


def main_workloads(sizes: list[int]) -> list[Workload]:
    out = []
    for nodes in sizes:
        if nodes % REPLICAS:
            raise SystemExit(f"size {nodes} is not a multiple of {REPLICAS} replicas")
        out.append(Workload(f"{nodes:,}", nodes // REPLICAS, REPLICAS))
    return out


FIXED = Workload("fixed", 0, REPLICAS, "no node definitions: library + compute-defs + values")
WIDE = Workload("1,000 x1", 1000, 1, "1,000 definitions x 1 replica (cost per definition)")


def generated_layers() -> str:
    parts = []
    for i in range(TEAM_LAYERS):
        parts.append(
            f"""\
team-{i:02d}:
  features: [team{i:02d}]
  labels:
    example.com/team: team-{i:02d}
  env:
    - name: TEAM
      value: team-{i:02d}
    - name: COST_CENTER
      value: "cc-{i * 7:04d}"
"""
        )
    for i in range(TUNE_LAYERS):
        parts.append(
            f"""\
tune-{i:02d}:
  features: [tune{i:02d}]
  annotations:
    example.com/tuning: profile-{i:02d}
  env:
    - name: NCCL_DEBUG
      value: WARN
    - name: TUNE_PROFILE
      value: "{i}"
  resources:
    requests:
      cpu: "{4 + i % 8}"
      memory: {16 + i}Gi
"""
        )
    return "".join(parts)


def definition_layers(i: int) -> list[str]:
    return [
        NODE_TYPES[i % len(NODE_TYPES)],
        CUDA[i % len(CUDA)],
        REGIONS[i % len(REGIONS)],
        f"team-{i % TEAM_LAYERS:02d}",
        f"tune-{(i // 3) % TUNE_LAYERS:02d}",
        "low-requests",
    ]


def values_yaml(workload: Workload) -> str:
    if workload.definitions == 0:
        return VALUES_HEADER + "  nodes: {}\n"
    parts = [VALUES_HEADER, "  nodes:\n"]
    for i in range(workload.definitions):
        parts.append(
            f"""\
    ns-{i:04d}:
      enabled: true
      replicas: {workload.replicas}
      definitions: [{", ".join(definition_layers(i))}]
      labels:
        example.com/nodeset: ns-{i:04d}
      env:
        - name: NODESET
          value: ns-{i:04d}
"""
        )
    return "".join(parts)


def generate_repo(workload: Workload) -> dict[str, str]:
    """Repo-relative path -> YAML text, as `reconciler.config.files.read_repo` would return."""
    return {
        "values.yaml": values_yaml(workload),
        "compute-defs/generated.yaml": generated_layers(),
    }


def add_size_options(parser: argparse.ArgumentParser, repeat_help: str) -> None:
    """--repeat and --sizes, as the compile and plan benchmarks take them."""
    parser.add_argument("--repeat", type=int, default=5, help=repeat_help)
    parser.add_argument(
        "--sizes",
        default="100,1000,10000",
        help=f"comma-separated Slurm node counts, multiples of {REPLICAS} (default 100,1000,10000)",
    )


def sized_workloads(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Workload]:
    """The workloads of --sizes (after checking --repeat)."""
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return main_workloads(sorted(int(s) for s in args.sizes.split(",") if s.strip()))
