"""The daemon's scheduler, made once Slurm answers: on a cluster the daemon brings up from
nothing, slurmrestd answers before slurmctld does, and the scheduler's start (its first job
list) fails with Slurm's 502. The in-cluster reconciler once lost its scheduler so for good,
silently: its Pods stayed Pending without an Event."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient

from reconciler.adapters.kube import Kube
from reconciler.daemon.converge import Converger
from reconciler.daemon.run import Daemon, RunSettings
from reconciler.errors import SlurmApiError, SlurmUnavailableError
from reconciler.sources.directory import DirectorySource
from tests.unit.no_cluster import unconnected


class Scheduler:
    """Stands in for PodScheduler (our class): its start fails as told, once per attempt."""

    def __init__(self, failure: Exception | None, made: list[Scheduler]) -> None:
        self.failure = failure
        self.started = self.stopped = False
        self.settings = type("Settings", (), {
            "name": "test-scheduler", "names": ("test-scheduler",)
        })()
        made.append(self)

    def set_policies(self, policies: Any) -> None:
        pass

    def observe(self, **hooks: Any) -> None:
        pass

    def start(self) -> None:
        if self.failure is not None:
            raise self.failure
        self.started = True

    def stop(self) -> None:
        self.stopped = True


def test_a_start_slurmctld_refuses_is_tried_again_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "values.yaml").write_text("compute: {nodes: {}}\n")
    daemon = Daemon(DirectorySource(tmp_path), Converger(unconnected, Kube(ApiClient())),
                    RunSettings(listen_port=0, interval_seconds=3600))  # fmt: skip
    answers: list[Exception | None] = [
        SlurmUnavailableError("slurmrestd at http://slurm-rest:6820 unreachable"),
        SlurmApiError("GET /slurm/v0.0.42/jobs/: HTTP 502: Unable to contact slurm controller"),
        SlurmApiError("GET /slurm/v0.0.42/jobs/: HTTP 502: Unable to contact slurm controller"),
        None,
    ]
    made: list[Scheduler] = []
    with caplog.at_level(logging.INFO, logger="reconciler.daemon.run"):
        # What start() runs in its thread once the converger has begun (run without it: this
        # test is about the scheduler, not a convergence).
        daemon._attach_scheduler(lambda: Scheduler(answers.pop(0), made), 0.01)  # type: ignore[arg-type, return-value]
    assert [s.started for s in made] == [False, False, False, True]
    assert [s.stopped for s in made[:3]] == [True, True, True]  # a half-started one released
    waits = [r.getMessage() for r in caplog.records if "waits for Slurm" in r.getMessage()]
    assert len(waits) == 2 and "502" in waits[1], waits  # once per kind of answer
    assert any("scheduling Pods as test-scheduler" in r.getMessage() for r in caplog.records)
