"""The Slurm series from a real slurmctld's OpenMetrics: a private slurmctld (Slurm 25.11+,
`MetricsType=metrics/openmetrics`) on a loopback port of its own, read by the daemon's reader,
which asks slurmrestd no more than one ping (the release it names decides whether slurmctld is
asked at all).

Needs a Slurm 25.11+ install: SUNK_RECONCILER_SLURM_PREFIX (the prefix `local up
--slurm-prefix` takes). CI builds 24.11, whose slurmctld serves no OpenMetrics: skipped there.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.adapters.slurm.client import SlurmRestClient
from reconciler.adapters.slurm.transport import Transport
from reconciler.adapters.slurm.versions import codec_for
from reconciler.adapters.slurmctld_metrics import SlurmctldMetrics
from reconciler.errors import SlurmctldMetricsError
from reconciler.local.ports import free_ports
from reconciler.slurm_metrics.openmetrics import ENDPOINTS
from reconciler.slurm_metrics.reader import SOURCE_OPENMETRICS, SlurmMetricsReader
from tests.unit.slurm_answers import StaticToken, canned_slurm

PREFIX_ENV = "SUNK_RECONCILER_SLURM_PREFIX"


def slurm_prefix() -> Path:
    prefix = os.environ.get(PREFIX_ENV, "")
    if not prefix:
        pytest.skip(f"no {PREFIX_ENV}: slurmctld's OpenMetrics need Slurm 25.11+ (CI runs 24.11)")
    slurmctld = Path(prefix) / "sbin" / "slurmctld"
    said = subprocess.run([slurmctld, "-V"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"(\d+)\.(\d+)", said)
    if found is None or (int(found[1]), int(found[2])) < (25, 11):
        pytest.skip(f"{slurmctld} is {said.strip()}: OpenMetrics come with Slurm 25.11")
    return Path(prefix)


def slurm_conf(root: Path, port: int, node_ports: list[int]) -> str:
    key = root / "slurm.key"
    key.write_bytes(os.urandom(64))
    key.chmod(0o600)
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout
    for name in ("state", "log"):
        (root / name).mkdir()
    nodes = "".join(
        f"NodeName=node{i} NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 Port={p}"
        f"{' State=FUTURE' if i == 3 else ''}\n"
        for i, p in enumerate(node_ports, 1)
    )
    return (
        f"ClusterName=om\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={port}\n"
        f"SlurmUser={user.strip()}\nAuthType=auth/slurm\nCredType=cred/slurm\nAuthInfo={key}\n"
        "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny\n"
        f"StateSaveLocation={root / 'state'}\nSlurmctldLogFile={root / 'log' / 'ctld.log'}\n"
        f"SlurmctldPidFile={root / 'ctld.pid'}\nMetricsType=metrics/openmetrics\n"
        f"{nodes}PartitionName=all Nodes=node[1-3] Default=YES State=UP\n"
    )


@pytest.fixture
def slurmctld(tmp_path: Path) -> Iterator[str]:
    """A slurmctld serving OpenMetrics; its base URL."""
    prefix = slurm_prefix()
    port, *node_ports = free_ports(4)
    conf = tmp_path / "slurm.conf"
    conf.write_text(slurm_conf(tmp_path, port, node_ports))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    process = subprocess.Popen(
        [prefix / "sbin" / "slurmctld", "-D", "-i"], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_metrics(url, process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_for_metrics(url: str, process: subprocess.Popen[bytes]) -> None:
    client = SlurmctldMetrics(url, timeout=2)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.read(ENDPOINTS)
            return
        except SlurmctldMetricsError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.3)
        finally:
            client.close()


def test_the_reader_takes_slurmctld_s_openmetrics_and_reads_nothing_through_slurmrestd(
    slurmctld: str,
) -> None:
    with canned_slurm() as rest:  # slurmrestd, recording what it is asked
        api = SlurmRestClient(Transport(rest.url, StaticToken(), timeout=5), codec_for("v0.0.42"))
        reader = SlurmMetricsReader(api, openmetrics=SlurmctldMetrics(slurmctld))
        try:
            view = reader.refresh()
        finally:
            reader.close()
        # One ping for the release (this canned slurmrestd names none: slurmctld is asked);
        # no node, job or statistics read.
        assert [path.rsplit("/", 1)[-1] for _, path in rest.requests] in ([], ["ping"])
    assert view.source == SOURCE_OPENMETRICS and view.controller_up
    found = {f.name: dict(f.samples) for f in view.families}
    # node1 and node2 have no slurmd yet: unknown; node3 is FUTURE, which is not counted.
    assert found["slurm_node_base_states"] == {("unknown",): 2}
    assert found["slurm_jobs"] == {}
    assert {"slurm_scheduler_cycles", "slurm_backfill_cycles"} <= set(found)
    assert "slurm_nodes" not in found and "slurm_jobs_pending" not in found
