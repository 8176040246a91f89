"""A config repo built to hurt is refused fast, by name, and in
bounded memory; the files around it are read as the repo's own are; node-definition labels
cannot take over the labels we own.

The bombs run in a child process capped at 1 GiB of address space (where each of them ended in
a MemoryError before): the child times only the command and reports its peak RSS, so the
assertions bound the time and the memory of the refusal itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from reconciler import cli
from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.apply.reservations import reservation_phases
from reconciler.apply.target import ApplyError
from reconciler.compile.desired import compile_desired_state
from reconciler.config.limits import MAX_NODE_SETS
from reconciler.daemon.topology_watch import TopologyWatch
from reconciler.errors import CompileError, ConfigTypeError, ReconcilerError
from reconciler.hostlists import MAX_NAMES
from reconciler.plan.declared import legacy_nodes, recorded_nodes
from reconciler.plan.model import SLURM_RESERVATION, Action, Change, ObjectRef, Plan
from tests.unit.conftest import config_from
from tests.unit.test_hostile_yaml import _repo
from tests.unit.test_topology_watch import SPEC

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30
MIB = 2**20
# 300 ranges of 100,000 names: 3.3 KB of text, 30 million names (one partition line).
RANGES = ",".join(f"x{i}[0-99999]" for i in range(300))
NODE = "definitions: [cpu-epyc, las1]"
# Run in the child: cap the address space, import everything, then time the command alone.
_CHILD = """
import contextlib, io, json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, CAP_BYTES))
from reconciler import cli
cli.build_parser()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out, err = io.StringIO(), io.StringIO()
start = time.perf_counter()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = cli.main(sys.argv[1:])
    except BaseException as exc:  # MemoryError, RecursionError: what the bombs did before
        code = repr(exc)[:200]
elapsed = time.perf_counter() - start
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
print(json.dumps({"code": code, "err": err.getvalue(), "elapsed": elapsed, "grown": grown}))
""".replace("CAP_BYTES", str(GIB))


def _bounded(*argv: str) -> dict[str, Any]:
    """Run `reconciler ARGV` in a child capped at 1 GiB; its exit code, stderr, the seconds the
    command took and how much its peak RSS grew while it ran (bytes)."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return cast(dict[str, Any], json.loads(done.stdout.splitlines()[-1]))


def _refused_fast(result: dict[str, Any], start: str, *parts: str) -> str:
    """One error line that starts with `start` and holds each of `parts`, in well under a
    second and 32 MiB."""
    err = result["err"]
    assert result["code"] == 1, result
    assert err.startswith(start), err
    assert "Traceback" not in err and len(err.splitlines()[0]) < 300
    for part in parts:
        assert part in err.splitlines()[0], err
    assert result["elapsed"] < 0.5, result
    assert result["grown"] < 32 * MIB, result
    return str(err)


@pytest.fixture
def small_peak() -> Iterator[None]:
    """The test body allocates at most 32 MiB at its peak (Python allocations, tracemalloc)."""
    tracemalloc.start()
    yield
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 32 * MIB, f"peak {peak / MIB:.0f} MiB"


# ---- item 5: counts that multiply Slurm nodes ---------------------------------------------


@pytest.mark.parametrize("key", ["replicas", "maxReplicas", "minReplicas"])
def test_a_node_count_past_the_limit_is_refused_naming_file_key_and_limit(
    tmp_path: Path, key: str
) -> None:
    """`maxReplicas: 2000000` (54 bytes) rendered for 29 s and 1.35 GB (RSS) before."""
    values = f"compute:\n  nodes:\n    a:\n      {NODE}\n      {key}: 2000000\n"
    result = _bounded("render", str(_repo(tmp_path, values)))
    _refused_fast(result, f"error: values.yaml:5 (compute.nodes.a.{key}):", "from 0 to 65536")


def test_a_node_count_in_a_layer_file_is_refused_there() -> None:
    files = {"compute-defs/big.yaml": "big:\n  replicas: 1\n  maxReplicas: 70000\n"}
    with pytest.raises(ConfigTypeError, match=r"^compute-defs/big.yaml:3 \(big.maxReplicas\):"):
        config_from("compute: {nodes: {}}\n", files)


def test_a_negative_node_count_is_refused() -> None:
    refused = r"\(compute.nodes.a.maxReplicas\): .*from 0 to 65536, got -1"
    with pytest.raises(ConfigTypeError, match=refused):
        config_from(f"compute:\n  nodes:\n    a: {{{NODE}, maxReplicas: -1}}\n")


def test_the_nodes_of_all_node_sets_together_are_capped(small_peak: None) -> None:
    """Twenty node sets of 60,000 each: 1.2 million Slurm nodes, each set under the limit."""
    nodes = "".join(f"    n{i}: {{{NODE}, replicas: 1, maxReplicas: 60000}}\n" for i in range(20))
    config = config_from("compute:\n  nodes:\n" + nodes)
    start = time.perf_counter()
    with pytest.raises(CompileError) as err:
        compile_desired_state(config)
    assert time.perf_counter() - start < 0.5
    text = str(err.value)
    assert text.startswith("values.yaml:4 (compute.nodes.n1): ")
    assert "120,000 Slurm nodes" in text and "65,536" in text and "hint:" in text


def test_node_definitions_are_capped_before_they_are_compiled() -> None:
    """Each node definition is a StatefulSet of a few KB from a few bytes that name layers:
    8,000 of them rendered in 9.8 s and 243 MB, and 200,000 values allow about 28,000."""
    nodes = "".join(f"    n{i:04}: {{{NODE}}}\n" for i in range(MAX_NODE_SETS + 100))
    start = time.perf_counter()
    with pytest.raises(ConfigTypeError) as err:
        config_from("compute:\n  nodes:\n" + nodes)
    assert time.perf_counter() - start < 1.0  # parsing the file is most of it
    text = str(err.value)
    assert text.startswith(f"values.yaml:{MAX_NODE_SETS + 3} (compute.nodes.n{MAX_NODE_SETS}): ")
    assert "more than 2,048 node definitions" in text


def test_the_largest_cluster_still_renders() -> None:
    """65,536 Slurm nodes in two node sets (five times Frontier's 9,408) compile in seconds."""
    values = (
        "compute:\n  nodes:\n"
        f"    gpu: {{definitions: [h100, las1], replicas: 12500, maxReplicas: 13000}}\n"
        f"    cpu: {{{NODE}, replicas: 1, maxReplicas: {MAX_NAMES - 13000}}}\n"
    )
    start = time.perf_counter()
    state = compile_desired_state(config_from(values))
    elapsed = time.perf_counter() - start
    assert len(state.slurm_nodes) + len(state.spare_nodes) == MAX_NAMES
    assert elapsed < 5.0, elapsed


# ---- item 5: hostlists from the repo and the annotations we wrote -------------------------


def test_a_partition_of_thirty_million_nodes_is_refused(tmp_path: Path) -> None:
    """Nodes= of 300 `x[0-99999]` ranges: a MemoryError at 1 GiB before."""
    values = f"compute:\n  nodes: {{}}\n  partitions: |\n    PartitionName=p Nodes={RANGES}\n"
    result = _bounded("render", str(_repo(tmp_path, values)))
    _refused_fast(result, "error: values.yaml:3 (compute.partitions): partition 'p'",
                  "30,000,000", "65,536")  # fmt: skip


def test_a_reservation_of_thirty_million_nodes_is_refused(tmp_path: Path) -> None:
    values = (
        "compute: {nodes: {}}\nslurmConfig:\n  reservations:\n    r:\n"
        f"      nodes: {RANGES}\n      users: [root]\n      startTime: now\n      duration: 60\n"
    )
    result = _bounded("render", str(_repo(tmp_path, values)))
    _refused_fast(result, "error: values.yaml:5 (slurmConfig.reservations.r.nodes):",
                  "30,000,000", "65,536")  # fmt: skip


def _conf_map(nodes: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {wk.ANNOTATION_SLURM_NODES: nodes}}}


def test_an_edited_slurm_nodes_annotation_is_refused_by_name(small_peak: None) -> None:
    start = time.perf_counter()
    with pytest.raises(ReconcilerError) as err:
        recorded_nodes(_conf_map(RANGES))
    assert time.perf_counter() - start < 0.5
    text = str(err.value)
    assert wk.ANNOTATION_SLURM_NODES in text and "30,000,000" in text and "65,536" in text
    assert recorded_nodes(_conf_map("slurm-cpu-[0-1]")) == {"slurm-cpu-0", "slurm-cpu-1"}


def test_node_lines_of_an_edited_slurm_conf_are_counted_in_all(small_peak: None) -> None:
    """A slurm.conf written before the record: its NodeName= lines, summed, are capped too."""
    lines = "".join(f"NodeName=x{i}-[0-39999] CPUs=1\n" for i in range(3))
    with pytest.raises(
        ReconcilerError,
        match=r"NodeName= line's hostlist names 40,000 nodes; the limit is 25,536 \(65,536 for all",
    ):
        legacy_nodes("# Nodes: one line per node definition\n" + lines)
    with pytest.raises(ReconcilerError, match=r"line's hostlist 'x\[0-1' cannot be read"):
        legacy_nodes("# Nodes:\nNodeName=x[0-1 CPUs=1\n")


def test_the_topology_watch_refuses_an_edited_annotation(small_peak: None) -> None:
    """The daemon logs a ReconcilerError from the watch as a warning (daemon/run.py)."""

    class Edited:
        def get(self, *_: Any) -> Any:
            return _conf_map(RANGES) | {"data": {}}

    watch = TopologyWatch(cast(Kube, Edited()))
    watch.follow(SPEC, "slurm", "slurm")
    with pytest.raises(ReconcilerError, match=r"30,000,000 nodes; the limit is 65,536"):
        watch.stale()


def test_apply_refuses_a_reservation_change_of_too_many_nodes(small_peak: None) -> None:
    """A saved plan is a file a user can edit before apply reads it."""
    change = Change(
        ObjectRef("slurm", SLURM_RESERVATION, "", "slurm-r"), Action.UPDATE,
        before={"nodes": "slurm-cpu-0"}, after={"nodes": RANGES}, desired={},
    )  # fmt: skip
    plan = Plan("slurm", "slurm", "default", (change,))
    refused = r"^reservation slurm-r: the hostlist names 30,000,000 nodes; the limit is 65,536"
    with pytest.raises(ApplyError, match=refused):
        reservation_phases(plan)


# ---- item 8: files around the repo --------------------------------------------------------


def _policy_test_repo(root: Path) -> Path:
    return _repo(root, "compute: {nodes: {}}\n", **{"policies/tests/ok.yaml": "{}\n"})


def test_policy_test_refuses_a_test_file_linked_out_of_the_repo(tmp_path: Path) -> None:
    """A link to /dev/zero: a MemoryError (at 1 GiB) before."""
    repo = _policy_test_repo(tmp_path / "repo")
    (repo / "policies" / "tests" / "a-zero.yaml").symlink_to("/dev/zero")  # read first
    result = _bounded("policy", "test", str(repo))
    _refused_fast(result, "error: policies/tests/a-zero.yaml: ", "outside the config repo")


def test_policy_test_refuses_a_link_out_of_a_policy_folder(tmp_path: Path) -> None:
    folder = tmp_path / "policies"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "zero.yaml").symlink_to("/dev/zero")
    result = _bounded("policy", "test", str(folder))
    _refused_fast(result, "error: tests/zero.yaml: ", "outside")


def test_a_special_file_in_the_repo_is_refused_unread(tmp_path: Path) -> None:
    """A FIFO blocked the read for ever before; a device or socket is no config file either."""
    repo = _policy_test_repo(tmp_path / "repo")
    os.mkfifo(repo / "policies" / "tests" / "fifo.yaml")
    result = _bounded("policy", "test", str(repo))
    _refused_fast(result, "error: policies/tests/fifo.yaml: ", "not a regular file")
    (repo / "values.d").mkdir()
    os.mkfifo(repo / "values.d" / "fifo.yaml")
    result = _bounded("render", str(repo))
    _refused_fast(result, "error: values.d/fifo.yaml: ", "not a regular file")


def test_policy_test_files_linked_inside_the_repo_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path, "compute: {nodes: {}}\n")
    source = ROOT / "policies" / "tests"
    shipped = next(iter(sorted(source.glob("*.yaml"))))
    (repo / "shared").mkdir()
    (repo / "shared" / "t.yaml").write_text(shipped.read_text())
    (repo / "policies" / "tests").mkdir(parents=True)
    (repo / "policies" / "tests" / "t.yaml").symlink_to(repo / "shared" / "t.yaml")
    assert cli.main(["policy", "test", str(repo)]) == 0
    assert " 0 failed" in capsys.readouterr().out


@pytest.mark.parametrize("loop", [["a.yaml"], ["b.yaml", "a.yaml"]], ids=["self", "pair"])
def test_a_symlink_loop_in_values_d_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loop: list[str]
) -> None:
    """A RuntimeError traceback ("Symlink loop from ...") before."""
    repo = _repo(tmp_path, "compute: {nodes: {}}\n")
    (repo / "values.d").mkdir()
    for name, target in zip(["a.yaml", "b.yaml"], loop, strict=False):
        (repo / "values.d" / name).symlink_to(target)
    assert cli.main(["render", str(repo)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: values.d/a.yaml: is a symbolic link that loops")
    assert "Traceback" not in err and str(tmp_path) not in err


def test_a_dangling_symlink_in_values_d_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path, "compute: {nodes: {}}\n")
    (repo / "values.d").mkdir()
    (repo / "values.d" / "gone.yaml").symlink_to("nothing.yaml")
    assert cli.main(["render", str(repo)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: values.d/gone.yaml: is a symbolic link that leads to nothing")


# ---- item 9b: labels we own ---------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [wk.LABEL_NAME, wk.LABEL_INSTANCE, wk.LABEL_MANAGED_BY, wk.LABEL_RELEASE, wk.LABEL_NODESET,
     wk.LABEL_COMPONENT, wk.LABEL_PART_OF, f"{wk.DOMAIN}/anything"],
)  # fmt: skip
def test_a_node_label_cannot_replace_one_we_own(key: str) -> None:
    values = f"compute:\n  nodes:\n    a:\n      {NODE}\n      labels: {{{key}: other}}\n"
    with pytest.raises(ConfigTypeError) as err:
        config_from(values)
    text = str(err.value)
    assert text.startswith(f"values.yaml:5 (compute.nodes.a.labels.{key}): ")
    assert f"node definition 'a': label {key!r}" in text


def test_a_layer_label_cannot_replace_one_we_own() -> None:
    files = {"compute-defs/x.yaml": f"x:\n  labels:\n    {wk.LABEL_MANAGED_BY}: helm\n"}
    with pytest.raises(ConfigTypeError, match=r"^compute-defs/x.yaml:3 \(x.labels."):
        config_from("compute: {nodes: {}}\n", files)


def test_other_node_labels_reach_the_pods() -> None:
    state = compile_desired_state(
        config_from(f"compute:\n  nodes:\n    a: {{{NODE}, labels: {{team: ml}}}}\n")
    )
    sts = next(o for o in state.kube_objects if o["kind"] == "StatefulSet")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert labels["team"] == "ml" and labels[wk.LABEL_MANAGED_BY] == wk.MANAGED_BY_VALUE
