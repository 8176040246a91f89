"""One convergence: a revision of the config repo -> compile -> plan -> apply, recorded.

A revision that fails to load, compile, plan or apply is recorded as failed with its error;
the cluster keeps the last good revision (apply refuses an unrestartable plan before changing
anything, and a failure mid-apply is retried once from a fresh plan before it is reported).
A resync re-plans the revision already applied: changes found then were made by hand (drift),
and applying reverts them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.kube_wire import Obj
from reconciler.apply.executor import apply_plan
from reconciler.apply.target import ApplyOptions
from reconciler.apply.upgrade_effects import UpgradePausedError, UpgradeStoppedError
from reconciler.compile.topology_spec import topology_set
from reconciler.config.repo import Config
from reconciler.daemon.status import Status, read_status, revision_event, write_status
from reconciler.daemon.topology_watch import TopologyWatch
from reconciler.daemon.upgrade_status import StatusRecords
from reconciler.errors import ReconcilerError
from reconciler.pipeline.clients import Clients
from reconciler.pipeline.load import RevisionLoader
from reconciler.pipeline.plans import Compiler, plan_config, plan_passes
from reconciler.pipeline.upgrades import upgrade_first
from reconciler.policy.engine import CompiledPolicy
from reconciler.policy.loader import revision_policies
from reconciler.policy.subjects import params_of
from reconciler.scheduler.pod_policies import PodPolicies
from reconciler.sources import Revision

log = logging.getLogger(__name__)

APPLY_ATTEMPTS = 2


@dataclass(frozen=True)
class Outcome:
    revision: Revision
    state: str  # applied | unchanged | failed
    summary: str = ""
    error: str = ""
    drift: bool = False
    seconds: float = 0.0
    denied: bool = False  # failed because the revision's policies deny it


class Converger:
    """Holds what the cluster was last brought to; `converge` is called by one thread at a
    time (the daemon's loop). `connect` makes the clients plans and applies go through: asked
    once, at the first convergence that needs them, then reused until an attempt fails."""

    def __init__(
        self,
        connect: Callable[[], Clients],
        kube: Kube,
        *,
        release: str | None = None,
        namespace: str | None = None,
        options: ApplyOptions | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._connect = connect
        self._clients: Clients | None = None
        self.loader = RevisionLoader(release, namespace)  # the daemon's start shares it
        self._kube = kube  # for the status ConfigMap
        self._release = release
        self._namespace = namespace
        self._options = options or ApplyOptions()
        self._clock = clock
        self.status = Status()
        self.pod_policies = PodPolicies()
        self.power_saving: bool | None = None  # as the last applied revision says
        self.scheduler_names = ""  # the Pod scheduler's, for the status (run.py sets them)
        # Whether this process may still act (run.py: not stopping, and leading): a Slurm
        # upgrade asks before each step, since it can wait for hours.
        self.proceed: Callable[[], bool] = lambda: True
        self._policies: tuple[str, tuple[CompiledPolicy, ...]] = ("", ())
        # The applied revision's desired state, kept for its resyncs: one compilation per
        # revision while the cluster's inputs (profile, topology, Slurm release) stay the same.
        self._compiler: Compiler | None = None
        self._known: tuple[str | None, str | None] = (release, namespace)
        self._settled = ""  # the revision this process last applied or found unchanged
        self.topology = TopologyWatch(kube)  # the daemon looks between convergences

    def converge(self, revision: Revision, *, resync: bool = False) -> Outcome:
        started = self._clock()
        try:
            config = self.loader.load(revision.id, revision.path)
            policies = self._compiled(revision, config)
        except ReconcilerError as error:
            failed = Outcome(revision, "failed", error=str(error))
            return self._record(revision, failed, started, release=self._known[0],
                                namespace=self._known[1])  # fmt: skip
        release, namespace = config.settings.release, config.settings.namespace
        self._known = (release, namespace)
        if not self.status.revision:
            self.status = read_status(self._kube, namespace, release) or Status()
        outcome = self._plan_and_apply(revision, config, policies, resync=resync)
        if outcome.state != "failed":  # the applied revision's rules judge new Pods
            self.pod_policies = PodPolicies(
                tuple(p for p in policies if p.policy.target == "pod"), params_of(config)
            )
            view = config.view
            self.power_saving = view.power is not None
            topologies = topology_set(view.values, config.topology_where)
            self.topology.follow(topologies, namespace, release)
        return self._record(revision, outcome, started, release=release, namespace=namespace)

    def _tell(self, stored: Obj, status: Status, denied: bool) -> None:
        kind, reason, message = revision_event(status, denied)
        self._kube.create_event(stored, reason=reason, message=message, action="Converge",
                                type=kind, reporting_controller=wk.EVENT_REPORTER,
                                reporting_instance=wk.EVENT_REPORTER)  # fmt: skip

    def _compiled(self, revision: Revision, config: Config) -> tuple[CompiledPolicy, ...]:
        """Once per revision: a resync of the same revision reuses them."""
        if self._policies[0] != revision.id:
            self._policies = (revision.id, revision_policies(config))
        return self._policies[1]

    def clients(self) -> Clients:
        if self._clients is None:
            self._clients = self._connect()
        return self._clients

    def applied(self) -> tuple[str, str]:
        """The revision the cluster holds, and the origin it was fetched from ("" when none)."""
        return self.status.applied_revision, self.status.applied_origin

    def resume(self, status: Status, release: str, namespace: str) -> None:
        """Before the first convergence: what the status ConfigMap of `namespace/release`
        says, so failures are recorded there (and not twice) before a revision is loaded."""
        self.status = status
        self._known = (self._known[0] or release, self._known[1] or namespace)

    def refused(self, revision: Revision, error: ReconcilerError) -> Outcome | None:
        """A fetched revision the source refused (unsigned, bad digest), or one the daemon
        could not start from, is recorded as failed, once; the applied one stays. None when
        it was already recorded."""
        if (self.status.revision, self.status.error) == (revision.id, str(error)):
            return None
        failed = Outcome(revision, "failed", error=str(error))
        return self._record(revision, failed, self._clock(), release=self._known[0],
                            namespace=self._known[1])  # fmt: skip

    def _plan_and_apply(
        self,
        revision: Revision,
        config: Config,
        policies: tuple[CompiledPolicy, ...],
        *,
        resync: bool,
    ) -> Outcome:
        error = ""
        for attempt in range(1, APPLY_ATTEMPTS + 1):
            try:
                return self._passes(revision, config, policies, resync=resync)
            except UpgradeStoppedError as stopped:  # the same until the repo changes
                return Outcome(revision, "failed", error=str(stopped))
            except UpgradePausedError:  # nothing to record: another acts now, or nobody
                raise
            except ReconcilerError as failure:
                error = str(failure)
                log.warning("converge: %s: attempt %d failed: %s", revision, attempt, error)
                # The next attempt connects afresh: a slurmrestd upgraded under the daemon
                # may no longer serve the API version these clients found.
                self._clients = None
        return Outcome(revision, "failed", error=error)

    def _passes(
        self,
        revision: Revision,
        config: Config,
        policies: tuple[CompiledPolicy, ...],
        *,
        resync: bool,
    ) -> Outcome:
        """One plan and apply; after a bootstrap plan (the control plane was down), a second
        one for what needed Slurm, now that it answers."""
        texts: list[str] = []
        if self._compiler is None or self._compiler.config is not config:
            self._compiler = Compiler(config)
        for planned in plan_passes(config, self.clients(), policies, self._compiler):
            plan, target = planned.plan, planned.target
            if plan.denials:  # the same next time: no retry
                denied = "policies deny this revision:\n  " + "\n  ".join(plan.denials)
                return Outcome(revision, "failed", error=denied, denied=True)
            if upgrade_first(planned, self._upgrade_records(config), revision.id, self._options,
                             lambda line: log.info("upgrade: %s", line), self.proceed):  # fmt: skip
                texts.append(f"Slurm upgraded to {', '.join(plan.upgrade[-1].after)}"
                             if plan.upgrade else "Slurm upgrade finished")  # fmt: skip
                planned = plan_config(config, self.clients(), policies, self._compiler)
                plan, target = planned.plan, planned.target
            if not plan.has_changes:
                break
            summary = plan.summary()
            text = f"{summary.add} added, {summary.change} changed, {summary.destroy} destroyed"
            texts.append(text + (" (control plane)" if plan.bootstrap else ""))
            log.info("converge: %s: applying (%s)", revision, texts[-1])
            apply_plan(plan, target, self._options, lambda line: log.info("apply: %s", line))
        if not texts:
            return Outcome(revision, "unchanged", summary="no changes")
        drift = resync and revision.id == self.status.applied_revision
        return Outcome(revision, "applied", summary="; then ".join(texts), drift=drift)

    def _upgrade_records(self, config: Config) -> StatusRecords:
        """A Slurm upgrade's record, in the status this Converger writes."""

        def keep(status: Status) -> None:
            self.status = status

        settings = config.settings
        return StatusRecords(self._kube, settings.namespace, settings.release,
                             lambda: self.status, keep)  # fmt: skip

    def _record(
        self,
        revision: Revision,
        outcome: Outcome,
        started: float,
        *,
        release: str | None = None,
        namespace: str | None = None,
    ) -> Outcome:
        outcome = replace(outcome, seconds=self._clock() - started)
        now = datetime.fromtimestamp(self._clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = replace(
            self.status, revision=revision.id, origin=revision.origin, state=outcome.state,
            summary=outcome.summary, error=outcome.error, attempted_at=now,
            scheduler_names=self.scheduler_names,
        )  # fmt: skip
        if outcome.state != "failed":
            status = replace(status, applied_revision=revision.id, applied_at=now,
                             applied_origin=revision.origin)  # fmt: skip
        if outcome.drift:
            status = replace(status, drift_corrected=str(int(status.drift_corrected or 0) + 1))
        news = outcome.state == "applied" or (
            outcome.state == "failed"
            and (self.status.revision, self.status.error) != (status.revision, status.error)
        )  # a resync of a failed revision says nothing new
        self.status = status
        release = release or self._release
        namespace = namespace or self._namespace
        if release and namespace:
            try:
                stored = write_status(self._kube, namespace, release, status)
                if news:
                    self._tell(stored, status, outcome.denied)
            except ReconcilerError as error:
                log.warning("converge: cannot write the status ConfigMap or its Event: %s", error)
        # A resync that finds the settled revision unchanged is no news: at DEBUG, so an idle
        # daemon logs nothing at INFO (the first "unchanged" of a process still says it).
        repeat = outcome.state == "unchanged" and self._settled == revision.id
        self._settled = "" if outcome.state == "failed" else revision.id
        level = logging.WARNING if outcome.state == "failed" else logging.INFO
        log.log(logging.DEBUG if repeat else level, "converge: %s: %s %s", revision, outcome.state,
                outcome.error or outcome.summary)  # fmt: skip
        return outcome
