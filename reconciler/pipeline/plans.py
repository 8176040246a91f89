"""Load, compile once, plan and judge a config against a cluster: the plans that bring it to a
config, with the revision's policies' findings (`reconciler plan` / `apply`, the daemon's
convergence and `reconciler local up`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reconciler.adapters.sacctmgr import Sacctmgr, SacctmgrError
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.adapters.topology_facts import live_release, read_topology_inputs
from reconciler.apply.live_reader import read_live, server_views
from reconciler.apply.target import Target
from reconciler.compile.desired import DesiredState, compile_desired_state, declared_nodes
from reconciler.compile.profile import Profile
from reconciler.compile.target_release import values_release
from reconciler.compile.topology_places import TopologyInputs
from reconciler.compile.topology_spec import topology_set
from reconciler.config.layering import plain
from reconciler.config.repo import Config
from reconciler.errors import ReconcilerError
from reconciler.logs import print_warnings
from reconciler.pipeline.clients import Clients
from reconciler.plan.diff import plan_changes
from reconciler.plan.live import LiveState
from reconciler.plan.model import ObjectRef, Plan
from reconciler.plan.node_names import (
    missing_on_nodes,
    names_iter,
    needs_of,
    nodeset_wheres,
    unchecked_offline,
)
from reconciler.plan.upgrade import SLURMDBD, UpgradeStage, clients_behind, plan_upgrade
from reconciler.plan.upgrade_workloads import upgrade_workloads
from reconciler.policy.engine import CompiledPolicy
from reconciler.policy.loader import revision_policies
from reconciler.policy.subjects import evaluate_state, params_of
from reconciler.slurm_release import SlurmRelease, maybe_release

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Planned:
    plan: Plan
    target: Target
    state: DesiredState


def plan_passes(
    config: Config,
    clients: Clients,
    policies: tuple[CompiledPolicy, ...] | None = None,
    compiler: Compiler | None = None,
) -> Iterator[Planned]:
    """The plans that bring the cluster to `config`, each made after the caller applied the
    one before: one plan; or, when it was a bootstrap plan (our control plane was down, and
    applying it brought it up), a second one for what needed Slurm. The policies are
    compiled once, the desired state once unless what it is compiled from changed (the
    daemon hands the same `compiler` to every resync of a revision)."""
    policies = revision_policies(config) if policies is None else policies
    compiler = compiler if compiler is not None and compiler.config is config else Compiler(config)
    for _ in range(2):
        planned = plan_config(config, clients, policies, compiler)
        yield planned
        if not (planned.plan.bootstrap and planned.plan.has_changes):
            return


def plan_config(
    config: Config,
    clients: Clients,
    policies: tuple[CompiledPolicy, ...] | None = None,
    compiler: Compiler | None = None,
) -> Planned:
    """The plan for a loaded config against the cluster `clients` reach; `policies` already
    compiled for this revision, else compiled here."""
    settings = config.settings
    target = clients.target(settings.namespace, settings.release)
    compiler = compiler or Compiler(config)
    profile = clients.profile_of(compiler.declared)
    running = _running_release(target.slurm, target.slurm_release)
    state = compiler.compiled(profile, _topology_inputs(config, target), running)
    print_warnings(state.warnings)
    live = read_live(target.kube, target.slurm, state.release, state.namespace, target.sacctmgr,
                     secret_names=[s.name for s in state.secrets],
                     value_secret_names=[s.name for s in state.value_secrets])  # fmt: skip
    upgrade = slurm_upgrade(state, config, live.kube_objects, running, target.sacctmgr,
                            target.scontrol)  # fmt: skip
    plan = with_policies(plan_against(state, live, target), config, state, policies)
    behind = clients_behind(target.scontrol.client_release(), running, upgrade)
    plan = replace(plan, warnings=(*plan.warnings, *_unplaceable(state, config, target),
                                   *([behind] if behind else [])),
                   upgrade=upgrade)  # fmt: skip
    return Planned(plan, target, state)


def slurm_upgrade(
    state: DesiredState,
    config: Config,
    live: Mapping[ObjectRef, dict[str, Any]],
    slurmctld: SlurmRelease | None,
    sacctmgr: Sacctmgr | None = None,
    scontrol: Scontrol | None = None,
) -> tuple[UpgradeStage, ...]:
    """The stages of a change of the Slurm release (none: no release changes), or
    SlurmUpgradeRefusedError. `slurmctld` is the release slurmrestd answers at; where an image
    changes, slurmctld is asked its own (an upgrade moves slurmrestd last) and slurmdbd, when
    its image changes, its own."""
    key = values_release(plain(config.values))
    workloads = upgrade_workloads(state.kube_objects, live, slurmctld=slurmctld, release_key=key)
    if scontrol is not None and any(w.changed for w in workloads):
        slurmctld = _slurmctld_release(scontrol) or slurmctld
        workloads = upgrade_workloads(state.kube_objects, live, slurmctld=slurmctld,
                                      release_key=key)  # fmt: skip
    if sacctmgr is not None and any(w.daemon == SLURMDBD and w.changed for w in workloads):
        try:
            slurmdbd = sacctmgr.slurmdbd_release()
        except SacctmgrError as error:  # not up: its live image says what it runs
            log.info("slurmdbd's release not read: %s", error)
            slurmdbd = None
        workloads = upgrade_workloads(state.kube_objects, live, slurmctld=slurmctld,
                                      slurmdbd=slurmdbd, release_key=key)  # fmt: skip
    return plan_upgrade(workloads)


def _unplaceable(state: DesiredState, config: Config, target: Target) -> list[str]:
    """Names node sets need that no Node of the cluster carries (compute.clusterLabels)."""
    needs = needs_of(state.kube_objects)
    if not needs:
        return []
    nodes = list(names_iter(target.kube.list("v1", "Node").items))
    return missing_on_nodes(needs, nodes, config.values, nodeset_wheres(state.nodesets))


class Compiler:
    """One config compiled once for each set of inputs the cluster gives (a plan after a
    bootstrap asks again: the Slurm release may be known by then)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._last: tuple[tuple[object, ...], DesiredState] | None = None
        self.count = 0  # compilations made (for the "compiles once" test and logs)

    def declared(self) -> Sequence[str]:
        """The Slurm nodes the config declares (they depend on no profile or release)."""
        return declared_nodes(self.config)

    def compiled(
        self,
        profile: Profile,
        topology: TopologyInputs | None,
        running: SlurmRelease | None,
    ) -> DesiredState:
        key = (profile, topology, running)
        if self._last is None or self._last[0] != key:
            self.count += 1
            state = compile_desired_state(self.config, profile, topology, running)
            self._last = (key, state)
        return self._last[1]


def _running_release(slurm: SlurmRestApi, known: str) -> SlurmRelease | None:
    """The release slurmctld runs now: the client is reused from plan to plan, so it is asked
    again (one ping, as a new client's first question was) rather than remembered."""
    try:
        slurm.ping()
    except ReconcilerError:  # not up (a bootstrap): what the target knows without it
        return maybe_release(known)
    return live_release(slurm, known)


def _slurmctld_release(scontrol: Scontrol) -> SlurmRelease | None:
    """The release slurmctld runs, as it says itself. slurmrestd's answers carry slurmrestd's,
    which an upgrade moves last: a plan made between stages (a restarted daemon) must see
    slurmctld already moved. None where scontrol cannot ask (Slurm down, no scontrol here)."""
    try:
        return maybe_release(scontrol.slurmctld_release())
    except ReconcilerError as error:
        log.info("slurmctld's release not read with scontrol: %s", error)
        return None


def _topology_inputs(config: Config, target: Target) -> TopologyInputs | None:
    """What compute.topology reads from the cluster; without it nothing is read."""
    topologies = topology_set(config.view.values, config.topology_where)
    if topologies is None:
        return None
    settings = config.settings
    return read_topology_inputs(target.kube, settings.namespace, settings.release,
                                topologies.labels)  # fmt: skip


def with_policies(
    plan: Plan,
    config: Config,
    state: DesiredState,
    policies: tuple[CompiledPolicy, ...] | None = None,
) -> Plan:
    """The plan with the findings of the revision's policies: Deny ones stop it from being
    applied, Warn ones are shown, Audit ones are logged."""
    if policies is None:
        policies = revision_policies(config)
    findings = evaluate_state(policies, config, state, params_of(config))
    for finding in findings:
        if "Audit" in finding.actions:
            log.info("policy audit: %s", finding)
    return replace(
        plan,
        warnings=(*plan.warnings, *(str(f) for f in findings if f.warns)),
        denials=tuple(str(f) for f in findings if f.denies),
    )


def plan_against(state: DesiredState, live: LiveState, target: Target) -> Plan:
    has_namespace = target.kube.get("v1", "Namespace", state.namespace) is not None
    # Without the namespace a dry-run cannot run; the objects are all new then anyway.
    views = server_views(target.kube, state, live) if has_namespace else {}
    return plan_changes(state, live, server_view=views)


def plan_offline(config: Config) -> Plan:
    """Against an empty cluster: no connection at all."""
    state = compile_desired_state(config)
    print_warnings(state.warnings)
    slurm_upgrade(state, config, {}, None)  # offline: only a repo that mixes releases
    plan = with_policies(plan_changes(state, None, offline=True), config, state)
    offline = unchecked_offline(needs_of(state.kube_objects), config.values)
    return replace(plan, warnings=(*plan.warnings, *offline))
