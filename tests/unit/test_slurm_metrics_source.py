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
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.profile import Profile
from reconciler.slurm_metrics.openmetrics import ENDPOINTS
from reconciler.slurm_metrics.reader import OPENMETRICS_RETRY_SECONDS, SlurmMetricsReader
from tests.unit.conftest import config_from
from tests.unit.slurm_answers import CannedSlurm, StaticToken
from tests.unit.test_slurm_metrics_reader import BASE, UP, Clock, served, slurm  # noqa: F401
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
    slurm.answers[f"{BASE}/ping"] = (200, {**UP, "meta": {"slurm": {"release": "26.05.3"}}})
    clock = Clock()
    reader = reader_with_openmetrics(slurm, clock)
    reader.refresh()
    clock.now += 30
    reader.refresh()  # the release is asked once (a ping), then only slurmctld is
    metrics = [f"/metrics/{e}" for e in ENDPOINTS]
    assert [path for _, path in slurm.requests] == [f"{BASE}/ping", *metrics, *metrics]
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


def test_the_render_turns_openmetrics_on_from_25_11_and_the_daemon_finds_them() -> None:
    """slurm.conf has MetricsType=metrics/openmetrics for Slurm 25.11+ (not before, not with
    PrivateData, which Slurm refuses them with: a plan warning says so), and the URL the
    daemon derives is the rendered controller Service on the rendered SlurmctldPort."""

    def compiled(release: str, extra: str = "") -> DesiredState:
        extra_config = f"  extraConfig: |\n    {extra}\n" if extra else ""
        return compile_desired_state(
            config_from(f"slurmConfig:\n  release: '{release}'\n{extra_config}")
        )

    line = "MetricsType=metrics/openmetrics"
    assert line not in compiled("24.11.5").slurm_conf.splitlines()
    state = compiled("25.11.7")
    conf = state.slurm_conf.splitlines()
    assert line in conf and not [w for w in state.warnings if "OpenMetrics" in w.message]
    private = compiled("26.05.3", "PrivateData=jobs")
    assert line not in private.slurm_conf.splitlines()
    assert any("serves no OpenMetrics" in w.message for w in private.warnings), private.warnings
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


def test_a_slurm_before_25_11_is_never_sent_http_on_its_port(
    slurm: CannedSlurm,  # noqa: F811
) -> None:
    """24.11's slurmctld logs "Insane message length" for each HTTP request on its port: where
    slurmrestd names such a release, OpenMetrics are not asked at all."""
    serve_openmetrics(slurm)
    ping = {**UP, "meta": {"slurm": {"release": "24.11.5"}}}
    slurm.answers[f"{BASE}/ping"] = (200, ping)
    clock = Clock()
    reader = reader_with_openmetrics(slurm, clock)
    for _ in range(2):
        reader.refresh()
        clock.now += OPENMETRICS_RETRY_SECONDS
    assert not [path for _, path in slurm.requests if path.startswith("/metrics")]
    assert served(reader, clock)[(SOURCE, (("source", "rest"),))] == 1
    slurm.answers[f"{BASE}/ping"] = (200, {**UP, "meta": {"slurm": {"release": "25.11.7"}}})
    reader.refresh()  # the REST read learnt the upgrade; the next read asks
    clock.now += OPENMETRICS_RETRY_SECONDS
    reader.refresh()
    assert served(reader, clock)[(SOURCE, (("source", "openmetrics"),))] == 1
