"""One run of load -> compile -> render, timed per stage, and the check of its output."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from bench.compile.workload import STAGES, Workload
from bench.harness.timing import stage_times, stamp
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.yamlout import dump_stream
from reconciler.config.repo import load_config


@dataclass
class Result:
    state: DesiredState
    stream: str
    slurm_conf: str


def run_pipeline(
    files: Mapping[str, str], library: Mapping[str, str]
) -> tuple[dict[str, float], dict[str, float], Result]:
    """load_config -> compile_desired_state -> render; stage times (wall, process CPU)."""
    t0 = stamp()
    config = load_config(files, library)
    t1 = stamp()
    state = compile_desired_state(config)
    t2 = stamp()
    # What `reconciler render` prints, plus slurm.conf (already rendered during compile, and
    # also embedded in the ConfigMap that dump_stream serialises).
    stream = dump_stream(state.kube_objects)
    slurm_conf = state.slurm_conf
    t3 = stamp()
    wall, cpu = stage_times(STAGES, (t0, t1, t2, t3))
    return wall, cpu, Result(state, stream, slurm_conf)


def check(workload: Workload, result: Result) -> dict[str, int]:
    """Refuse to report figures for output that is not what the workload asked for."""
    state = result.state
    statefulsets = [  # the node sets' (not the login StatefulSet every config renders)
        o
        for o in state.kube_objects
        if o["kind"] == "StatefulSet"
        and o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "compute"
    ]
    replicas = sum(o["spec"]["replicas"] for o in statefulsets)
    node_lines = [ln for ln in result.slurm_conf.splitlines() if ln.startswith("NodeName=")]
    counts = {
        "statefulsets": len(statefulsets),
        "replicas": replicas,
        "slurm_nodes": len(state.slurm_nodes),
        "nodename_lines": len(node_lines),
        "documents": ("\n" + result.stream).count("\n---\n"),
        "stream_kib": len(result.stream) // 1024,
        "warnings": len(state.warnings),
    }
    want = {
        "statefulsets": workload.definitions,
        "replicas": workload.nodes,
        "slurm_nodes": workload.nodes,
        "nodename_lines": workload.definitions,
        "documents": len(state.kube_objects),
        "warnings": 0,
    }
    problems = [f"{k}={counts[k]}, want {v}" for k, v in want.items() if counts[k] != v]
    if workload.definitions:
        # Every one of the 6 layers (and the definition's own keys) reached the outputs: the
        # CUDA layer carries only a feature (our library sets no image), seen in slurm.conf.
        sample = next(o for o in statefulsets if o["metadata"]["name"].endswith("-ns-0000"))
        text = yaml.safe_dump(sample)
        markers = ("H100_NVLINK_80GB", "LAS1", "team-00", "profile-00")
        for marker in (*markers, "cpu: '10'", "NODESET"):
            if marker not in text:
                problems.append(f"{marker!r} missing from StatefulSet slurm-ns-0000")
        line = next((ln for ln in node_lines if ln.startswith("NodeName=slurm-ns-0000-")), "")
        if "Feature=ns-0000,gpu,infiniband,sharp,cu117,las1,team00,tune00" not in line:
            problems.append(f"slurm.conf line for ns-0000 is {line!r}")
    if problems:
        raise SystemExit(
            f"benchmark output check failed for {workload.label}: " + "; ".join(problems)
        )
    return counts
