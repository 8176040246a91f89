"""The daemon's scheduler, made once Slurm answers: on a cluster the daemon brings up from
nothing, slurmrestd answers before slurmctld does, and the scheduler's start (its first job
list) fails with Slurm's 502. The in-cluster reconciler once lost its scheduler so for good,
silently: its Pods stayed Pending without an Event."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient

from reconciler.adapters.kube import Kube
from reconciler.daemon.converge import Converger
from reconciler.daemon.run import Daemon, RunSettings
from reconciler.daemon.scheduler_slot import SettingsFollower
from reconciler.errors import SlurmApiError, SlurmUnavailableError
from reconciler.scheduler.settings import SchedulerSettings, restart_needed
from reconciler.sources import Revision
from reconciler.sources.directory import DirectorySource
from tests.unit.no_cluster import unconnected


class Scheduler:
    """Stands in for PodScheduler (our class): its start fails as told, once per attempt."""

    def __init__(self, failure: Exception | None, made: list[Scheduler]) -> None:
        self.failure = failure
        self.started = self.stopped = False
        self.settings = type(
            "Settings", (), {"name": "test-scheduler", "names": ("test-scheduler",)}
        )()
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
    with caplog.at_level(logging.INFO, logger="reconciler.daemon.scheduler_slot"):
        # What start() runs in its thread once the converger has begun (run without it: this
        # test is about the scheduler, not a convergence).
        daemon.scheduler.attach(lambda: Scheduler(answers.pop(0), made), 0.01, 0)  # type: ignore[arg-type, return-value]
    assert [s.started for s in made] == [False, False, False, True]
    assert [s.stopped for s in made[:3]] == [True, True, True]  # a half-started one released
    waits = [r.getMessage() for r in caplog.records if "waits for Slurm" in r.getMessage()]
    assert len(waits) == 2 and "502" in waits[1], waits  # once per kind of answer
    assert any("scheduling Pods as test-scheduler" in r.getMessage() for r in caplog.records)


# ---- a revision's scheduler settings --------------------------------------------------------


def _settings(**changed: Any) -> SchedulerSettings:
    return replace(SchedulerSettings("slurm-slurm-slurm-scheduler", "slurm", "slurm", ("slurm",)),
                   **changed)  # fmt: skip


@pytest.mark.parametrize(
    ("running", "wanted", "restart"),
    [(_settings(), _settings(), ()),
     (_settings(), _settings(power_saving=True), ()),  # taken live by the running one
     (_settings(), _settings(name="renamed"), ("name",)),
     (_settings(), _settings(watch_namespaces=None, accounting=True),
      ("watch_namespaces", "accounting")),
     (_settings(), None, ("enabled",)), (None, _settings(), ("enabled",)), (None, None, ())],
)  # fmt: skip
def test_what_a_revision_changes_decides_whether_the_scheduler_is_made_again(
    running: SchedulerSettings | None, wanted: SchedulerSettings | None, restart: tuple[str, ...]
) -> None:
    assert restart_needed(running, wanted) == restart


class Follower:
    """What cli/run.py gives the daemon: the settings each revision names, in turn."""

    def __init__(self, *settings: SchedulerSettings | None) -> None:
        self.settings, self.made = list(settings), list[Scheduler]()

    def follower(self) -> SettingsFollower:
        def connect(settings: SchedulerSettings) -> Any:
            def made() -> Scheduler:
                scheduler = Scheduler(None, self.made)
                scheduler.settings = settings  # type: ignore[assignment]
                return scheduler

            return made

        return SettingsFollower(lambda _revision: self.settings.pop(0), connect, 0.01)


def test_a_revision_with_new_settings_replaces_the_scheduler_and_the_same_keeps_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "values.yaml").write_text("compute: {nodes: {}}\n")
    first, renamed = _settings(), _settings(name="renamed")
    running = Scheduler(None, [])
    daemon = Daemon(DirectorySource(tmp_path), Converger(unconnected, Kube(ApiClient())),
                    RunSettings(listen_port=0, interval_seconds=3600),
                    scheduler=running)  # type: ignore[arg-type]  # fmt: skip
    follow = Follower(first, renamed, renamed, None)
    daemon.scheduler.follow(follow.follower(), first)
    revision = Revision("r1", tmp_path, "test", "")
    daemon.scheduler._follow_revision(revision, follow.follower())  # the same settings: kept
    assert not running.stopped and follow.made == []
    daemon.scheduler._follow_revision(revision, follow.follower())
    assert running.stopped
    _wait(lambda: daemon.scheduler.current is not None)
    [made] = follow.made
    assert made.started and made.settings is renamed and daemon.scheduler.current is made
    daemon.scheduler._follow_revision(revision, follow.follower())  # the same again: kept
    assert follow.made == [made] and not made.stopped
    daemon.scheduler._follow_revision(revision, follow.follower())  # scheduler.enabled: false
    assert made.stopped and daemon.scheduler.current is None


def _wait(done: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "not done in time"
        time.sleep(0.01)
