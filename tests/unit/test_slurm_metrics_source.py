"""Which source the Slurm series come from: slurmctld's OpenMetrics while they answer (no job
list read through slurmrestd), slurmrestd otherwise, the source served and logged once. One
real HTTP server plays both: slurmrestd's answers of 24.11.5 and a 26.05.3 slurmctld's
exposition (tests/unit/data/slurmctld_openmetrics)."""

from __future__ import annotations

import argparse
import logging

import pytest

from reconciler.adapters.slurm.client import SlurmRestClient
from reconciler.adapters.slurm.transport import Transport
from reconciler.adapters.slurm.versions import codec_for
from reconciler.adapters.slurmctld_metrics import SlurmctldMetrics
from reconciler.cli.run import slurmctld_metrics_url
from reconciler.compile.desired import compile_desired_state
from reconciler.compile.profile import Profile
from reconciler.slurm_metrics.openmetrics import ENDPOINTS
from reconciler.slurm_metrics.reader import OPENMETRICS_RETRY_SECONDS, SlurmMetricsReader
from tests.unit.conftest import config_from
from tests.unit.slurm_answers import CannedSlurm, StaticToken
from tests.unit.test_slurm_metrics_reader import BASE, Clock, served, slurm  # noqa: F401
from tests.unit.test_slurm_openmetrics import captured

SOURCE = "reconciler_slurm_metrics_source"


def serve_openmetrics(server: CannedSlurm) -> None:
    for endpoint, text in captured().items():
        server.answers[f"/metrics/{endpoint}"] = (200, text.encode())


def reader_with_openmetrics(server: CannedSlurm, clock: Clock) -> SlurmMetricsReader:
    api = SlurmRestClient(Transport(server.url, StaticToken(), timeout=5), codec_for("v0.0.42"))
    return SlurmMetricsReader(api, openmetrics=SlurmctldMetrics(server.url), clock=clock)


def test_openmetrics_where_slurmctld_serves_them_and_no_job_list(
    slurm: CannedSlurm,  # noqa: F811
) -> None:
    serve_openmetrics(slurm)
    clock = Clock()
    reader = reader_with_openmetrics(slurm, clock)
    reader.refresh()
    assert [path for _, path in slurm.requests] == [f"/metrics/{e}" for e in ENDPOINTS]
    found = served(reader, clock)
    assert found[(SOURCE, (("source", "openmetrics"),))] == 1
    assert found[(SOURCE, (("source", "rest"),))] == 0
    assert found[("slurm_controller_up", ())] == 1
    assert found[("slurm_jobs", (("partition", "cpu"), ("state", "pending")))] == 5
    assert found[("slurm_node_base_states", (("state", "mixed"),))] == 2
    assert not any(name == "slurm_jobs_pending" for name, _ in found), "no reasons made up"


def test_rest_while_openmetrics_do_not_answer_asked_again_later(
    slurm: CannedSlurm,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A slurmctld before 25.11, or without MetricsType: 404 (or no HTTP at all)."""
    clock = Clock()
    reader = reader_with_openmetrics(slurm, clock)
    with caplog.at_level(logging.INFO):
        reader.refresh()
        clock.now += 30
        reader.refresh()
    paths = [path.split("?")[0] for _, path in slurm.requests]
    assert paths.count("/metrics/nodes") == 1, "asked again before the retry"
    assert f"{BASE}/jobs" in paths
    found = served(reader, clock)
    assert found[(SOURCE, (("source", "rest"),))] == 1
    assert found[("slurm_nodes", (("reason", "reconciler"), ("state", "draining")))] == 1
    said = [r.getMessage() for r in caplog.records if "reading Slurm" in r.getMessage()]
    assert len(said) == 1 and "through slurmrestd" in said[0] and "HTTP 404" in said[0], said

    serve_openmetrics(slurm)  # slurmctld restarted with MetricsType=metrics/openmetrics
    clock.now += OPENMETRICS_RETRY_SECONDS
    with caplog.at_level(logging.INFO):
        reader.refresh()
    assert served(reader, clock)[(SOURCE, (("source", "openmetrics"),))] == 1
    assert "from slurmctld's OpenMetrics" in caplog.records[-1].getMessage()


def test_the_url_given_else_slurmctld_s_port_where_the_config_puts_it() -> None:
    def args(url: str | None = None, local: bool = False) -> argparse.Namespace:
        return argparse.Namespace(slurmctld_metrics_url=url, local=local, runtime_dir=None)

    cluster = Profile()
    assert slurmctld_metrics_url(args(), "hpc", "slurm", cluster) == (
        "http://slurm-controller.hpc.svc:6817"
    )
    local = Profile(slurmctld_port=23817)
    assert slurmctld_metrics_url(args(local=True), "slurm", "slurm", local) == (
        "http://127.0.0.1:23817"
    )
    assert slurmctld_metrics_url(args("http://ctl:6817/metrics"), "s", "s", cluster) == (
        "http://ctl:6817/metrics"
    )
    assert slurmctld_metrics_url(args("off"), "s", "s", cluster) == ""
    assert SlurmctldMetrics("http://ctl:6817/metrics").url == "http://ctl:6817"


def test_until_the_render_sets_it_extra_config_turns_openmetrics_on() -> None:
    """slurmConfig.extraConfig: MetricsType=metrics/openmetrics reaches slurm.conf, and the
    URL the daemon derives is the rendered controller Service on the rendered SlurmctldPort."""
    state = compile_desired_state(
        config_from(
            """
            slurmConfig:
              extraConfig: |
                MetricsType=metrics/openmetrics
            """
        )
    )
    conf = state.slurm_conf.splitlines()
    assert "MetricsType=metrics/openmetrics" in conf
    service = next(
        o
        for o in state.kube_objects
        if o["kind"] == "Service" and o["metadata"]["name"].endswith("-controller")
    )
    port = service["spec"]["ports"][0]["port"]
    assert f"SlurmctldPort={port}" in conf
    args = argparse.Namespace(slurmctld_metrics_url=None, local=False, runtime_dir=None)
    url = slurmctld_metrics_url(args, state.namespace, state.release, Profile())
    assert (
        url == f"http://{service['metadata']['name']}.{service['metadata']['namespace']}.svc:{port}"
    )
