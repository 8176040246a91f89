"""Session fixtures: one real local stack (Slurm 22.05 + kube-apiserver 1.20.2) per test session.

The stack runs in its own temp runtime dir on free loopback ports, so two sessions on one machine
don't collide. Without the binaries (see tools/setup.sh) the tests are skipped, unless
SUNK_RECONCILER_REQUIRE_LOCAL_STACK=1 (CI sets it), which turns the skip into a failure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.errors import LocalStackError
from reconciler.local import SETUP_COMMAND
from reconciler.local.kube import control_plane as kube_module
from reconciler.local.slurm import cluster as slurm_module
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import new_temp_runtime_dir
from tests.integration.endpoints import KubeEndpoints, SlurmEndpoints
from tests.integration.helpers import wait_for
from tests.integration.local_stack_ops import leftover_processes, recorded_pids
from tests.integration.simple_cluster import SimpleCluster, render_gres_conf, render_slurm_conf

REQUIRE_ENV = "SUNK_RECONCILER_REQUIRE_LOCAL_STACK"
# 4 nodes up with fake gpu:4, 3 spares declared FUTURE, partitions debug (default) and high.
SESSION_CLUSTER = SimpleCluster(nodes=4, spares=3, gpus=4, partitions=("debug", "high"))
HERE = Path(__file__).parent

_TIMINGS: dict[str, float] = {}
_FIGURES: dict[str, str] = {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)
    # Last: CI starts the image build at the beginning, and the other tests run meanwhile.
    items.sort(key=lambda item: item.get_closest_marker("image") is not None)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _TIMINGS:
        terminalreporter.section("local stack timings")
        for what, seconds in _TIMINGS.items():
            terminalreporter.write_line(f"{what}: {seconds:.3f} s")
    if _FIGURES:
        terminalreporter.section("figures")
        for what, value in _FIGURES.items():
            terminalreporter.write_line(f"{what}: {value}")


def unavailable(reason: str) -> None:
    message = f"{reason}\n(run `{SETUP_COMMAND}` first)"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but the local stack cannot run: {message}")
    pytest.skip(message)


def require_kube_binaries() -> None:
    try:
        kube_module.find_binaries()
    except LocalStackError as exc:
        unavailable(exc.message)


def require_slurm_binaries(*, accounting: bool = False) -> None:
    missing = slurm_module.missing_binaries(accounting)
    if missing:
        unavailable("missing Slurm binaries: " + ", ".join(missing))


@pytest.fixture(scope="session")
def stack_timings() -> dict[str, float]:
    """Record `what -> seconds` here; the terminal summary prints them."""
    return _TIMINGS


@pytest.fixture(scope="session")
def figures() -> dict[str, str]:
    """Record `what -> value with its unit` here; the terminal summary prints them."""
    return _FIGURES


@pytest.fixture
def full_stack_binaries() -> None:
    """Skip (or fail under SUNK_RECONCILER_REQUIRE_LOCAL_STACK=1) without every binary."""
    require_kube_binaries()
    require_slurm_binaries(accounting=True)


@pytest.fixture(scope="session")
def local_stack() -> Iterator[LocalStack]:
    """The session's LocalStack; `slurm` and `kube` bring up its halves on first use."""
    # Not tmp_path_factory: pytest's base dir is mode 700, and slurmrestd runs as sunk-slurmrestd.
    runtime = new_temp_runtime_dir("sunk-reconciler-it-")
    stack = LocalStack(runtime, cluster_name="it")
    try:
        yield stack
    finally:
        pids = recorded_pids(stack)
        stack.down()
        left = leftover_processes(stack, pids)
        shutil.rmtree(runtime, ignore_errors=True)
        assert not left, "processes left after down: " + "; ".join(left)


@pytest.fixture(scope="session")
def slurm(local_stack: LocalStack) -> SlurmEndpoints:
    require_slurm_binaries()
    cluster_def = SESSION_CLUSTER
    site = local_stack.allocate_slurm(cluster_def.all_names())
    slurm_conf = render_slurm_conf(cluster_def, site.settings, site.ports.nodes)
    gres_conf = render_gres_conf(cluster_def, site.paths)
    timings = local_stack.up_slurm(slurm_conf, gres_conf, cluster_def.node_names())
    _TIMINGS["slurm up() to ready (4 nodes IDLE, REST answering)"] = timings["total"]
    cluster = local_stack.slurm
    assert cluster is not None
    return SlurmEndpoints(
        rest_url=cluster.rest_url(),
        jwt_key=site.paths.jwt_key,
        slurm_conf=site.paths.slurm_conf,
        env=cluster.env(),
        runtime_dir=local_stack.runtime_dir,
        node_names=cluster_def.node_names(),
        partition=cluster_def.partitions[0],
        user=slurm_module.current_user(),
    )


@pytest.fixture(scope="session")
def slurm_spare_nodes(slurm: SlurmEndpoints) -> list[str]:
    """Nodes declared State=FUTURE: start their slurmd (local_stack.slurm) to bring them in."""
    return SESSION_CLUSTER.spare_names()


@pytest.fixture(scope="session")
def kube(local_stack: LocalStack) -> KubeEndpoints:
    require_kube_binaries()
    timings = local_stack.up_kube()
    _TIMINGS["kube up() to ready (apiserver /readyz ok, controllers working)"] = timings["total"]
    plane = local_stack.kube
    assert plane is not None
    return KubeEndpoints(
        kubeconfig=plane.paths.kubeconfig,
        server=kube_module.server_url(plane.ports),
        token=kube_module.read_token(plane.paths),
    )


@pytest.fixture(scope="module")
def tokens(slurm: SlurmEndpoints) -> MintedTokens:
    return MintedTokens(slurm.jwt_key, slurm.user)


@pytest.fixture(scope="module")
def api(slurm: SlurmEndpoints, tokens: MintedTokens) -> Iterator[SlurmRestApi]:
    client = connect(slurm.rest_url, tokens)
    yield client
    client.close()


@pytest.fixture(scope="module")
def scontrol(slurm: SlurmEndpoints, tokens: MintedTokens) -> Scontrol:
    return Scontrol(tokens, env=slurm.env)


# ---- the Pod scheduler's tests (test_scheduler*.py): each module has its own `env` ------------


@pytest.fixture
def pods(env: Any) -> Iterator[list[str]]:
    """Names of Pods a test made; deleted (and their jobs ended) after it."""
    from tests.integration.test_scheduler import NAMESPACE, _live_placeholders

    names: list[str] = []
    yield names
    for name in names:
        env.kube.delete("v1", "Pod", name, NAMESPACE, grace_period_seconds=0)
    wait_for(lambda: not _live_placeholders(env), 30, "placeholder jobs to end after the test")


@pytest.fixture
def plain_jobs(env: Any) -> Iterator[list[int]]:
    """Ids of plain Slurm jobs a test submitted; cancelled after it."""
    ids: list[int] = []
    yield ids
    for job_id in ids:
        with contextlib.suppress(Exception):
            env.api.cancel(job_id)
