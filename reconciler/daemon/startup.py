"""Where `reconciler run` starts from: the source's head, or, when the head cannot be used (a
commit refused as unsigned, a broken file, a remote that does not answer), the last revision
applied, as the status ConfigMap names it. A bad head never stops the daemon, since a Pod that
exits on it would only crash-loop: the failure is recorded in the status ConfigMap, the daemon
runs from what the cluster holds, and tries the head again at every fetch.

When neither can be used (no revision was ever applied, or the source cannot go back to one:
a directory, a Flux artifact), the daemon waits: it serves /healthz, /readyz says why it is not
ready, and it tries again every interval.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reconciler.adapters.kube import Kube
from reconciler.config.repo import SETTINGS_FILE, VALUES_FILE, Config, RepoSettings, load_config
from reconciler.daemon.converge import Converger
from reconciler.daemon.status import Status, read_status
from reconciler.errors import ReconcilerError, SourceError
from reconciler.scheduler.pod_policies import PodPolicies, startup_pod_policies
from reconciler.scheduler.settings import SchedulerSettings, settings_from_values
from reconciler.sources import Revision, Source

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """What the daemon needs from a revision before it starts."""

    config: Config
    scheduler: SchedulerSettings | None  # None: no Pod scheduler
    pod_policies: PodPolicies


@dataclass(frozen=True)
class Start:
    revision: Revision
    prepared: Prepared
    fallback: bool  # the head could not be used: this is the last revision applied


@dataclass(frozen=True)
class HooksFlags:
    """Where the Pod scheduler's hooks API listens, and the URL placeholder jobs reach it by
    (--hooks-api-bind-address, --hooks-url); `scheduler`: False with --no-scheduler."""

    host: str
    port: int
    url: str | None = None
    scheduler: bool = True


def preparer(
    load: Callable[[str, Path], Config], hooks: HooksFlags
) -> Callable[[Revision], Prepared]:
    """Load a revision as `reconciler run` needs it (through `load`, which the converger
    shares: the revision started from is not loaded again); a ReconcilerError when it cannot
    be."""

    def prepare(revision: Revision) -> Prepared:
        config = load(revision.id, revision.path)
        settings = scheduler_settings(config, hooks)
        if settings is None:
            return Prepared(config, None, PodPolicies())
        return Prepared(config, settings, startup_pod_policies(config))

    return prepare


def scheduler_settings(config: Config, hooks: HooksFlags) -> SchedulerSettings | None:
    """The Pod scheduler's settings from a revision and the flags; None: no scheduler."""
    if not hooks.scheduler or not config.view.scheduler_enabled:
        return None
    return settings_from_values(
        config.values, release=config.settings.release, namespace=config.settings.namespace,
        hooks_host=hooks.host, hooks_port=hooks.port, hooks_url=hooks.url,
    )  # fmt: skip


class Startup:
    def __init__(
        self,
        source: Source,
        prepare: Callable[[Revision], Prepared],
        converger: Converger,
        kube: Kube,
        *,
        release: str | None,
        namespace: str | None,
    ) -> None:
        self._source = source
        self._prepare = prepare
        self._converger = converger
        self._kube = kube
        self._flags = (release, namespace)

    def first(
        self, stop: threading.Event, retry_seconds: float, waiting: Callable[[str], None]
    ) -> Start | None:
        """The first usable revision; None when `stop` is set while waiting for one.
        `waiting(reason)` is told why there is none yet ("" once there is)."""
        told = ""
        while not stop.is_set():
            try:
                start = self.once()
            except ReconcilerError as error:
                if error.message != told:  # once per reason, not at every retry
                    log.error("run: no revision to start from yet: %s", error)
                    told = error.message
                waiting(error.message)
                stop.wait(retry_seconds)
                continue
            waiting("")
            return start
        return None

    def once(self) -> Start:
        head, outcome = self._head()
        if isinstance(outcome, Prepared):
            assert head is not None
            behind = self._not_descending(head, outcome)
            if behind is None:
                return Start(head, outcome, fallback=False)
            outcome = behind
        return self._applied(head, outcome)

    def _not_descending(self, head: Revision, prepared: Prepared) -> SourceError | None:
        """Why `head` may not be applied over the last revision applied (a rollback by force
        push), or None. The source checks each fetch against what was applied, but the first
        fetch comes before the status ConfigMap can be found: its name is in the repo."""
        require: Callable[[str], None] | None = getattr(self._source, "require_descent", None)
        if require is None:
            return None
        settings = prepared.config.settings
        status = read_status(self._kube, settings.namespace, settings.release) or Status()
        self._converger.resume(status, settings.release, settings.namespace)
        try:
            require(head.id)
        except SourceError as error:
            return error
        return None

    def _head(self) -> tuple[Revision | None, Prepared | ReconcilerError]:
        """The head, prepared; or what is known of it and why it cannot be used."""
        try:
            head = self._source.fetch()
        except SourceError as error:
            if not error.revision:  # nothing fetched (the remote does not answer)
                return None, error
            origin = getattr(self._source, "origin", "")
            return Revision(error.revision, Path(), origin, "refused by the source"), error
        except ReconcilerError as error:
            return None, error
        try:
            return head, self._prepare(head)
        except ReconcilerError as error:
            return head, error
        except Exception as error:  # a file that trips a bug must not crash-loop the Pod
            log.exception("run: loading revision %s failed", head)
            return head, ReconcilerError(f"loading it failed: {type(error).__name__}: {error}")

    def _applied(self, head: Revision | None, failure: ReconcilerError) -> Start:
        release, namespace = self._names(head)
        status = read_status(self._kube, namespace, release) or Status()
        self._converger.resume(status, release, namespace)
        if head is not None:  # recorded once: `reconciler status` says why the head waits
            self._converger.refused(head, failure)
        applied = status.applied_revision
        what = f"the head of {getattr(self._source, 'origin', 'the source')} cannot be used"
        if not applied:
            raise ReconcilerError(
                f"{what} ({_said(failure)}), and no revision was applied before "
                f"(status ConfigMap {namespace}/{release}-reconciler-status)",
                hint=failure.hint or "fix the head; it is tried again every --interval",
            )
        at: Callable[[str], Revision] | None = getattr(self._source, "at", None)
        if at is None:
            raise ReconcilerError(
                f"{what} ({_said(failure)}), and this source cannot go back to the applied "
                f"revision {applied[:12]}",
                hint=failure.hint or "fix the head; it is tried again every --interval",
            )
        revision = at(applied)
        prepared = self._prepare(revision)
        log.warning("run: %s (%s); running from the last applied revision %s",
                    what, _said(failure), revision)  # fmt: skip
        return Start(revision, prepared, fallback=True)

    def _names(self, head: Revision | None) -> tuple[str, str]:
        """Where the status ConfigMap is: the flags, else the head's reconciler.yaml when it
        reads, else the defaults."""
        release, namespace = self._flags
        settings = RepoSettings()
        settings_file = head.path / SETTINGS_FILE if head and head.path.parts else None
        if settings_file is not None and settings_file.is_file():
            try:
                files = {VALUES_FILE: "{}", SETTINGS_FILE: settings_file.read_text()}
                settings = load_config(files, {}).settings
            except (ReconcilerError, OSError, UnicodeDecodeError):
                pass  # a broken reconciler.yaml: the defaults
        return release or settings.release, namespace or settings.namespace


def _said(error: ReconcilerError) -> str:
    """The error's message with where it is, without its hint."""
    return f"{error.where}: {error.message}" if error.where else error.message
