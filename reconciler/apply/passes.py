"""The plans that bring a cluster to a config, made against the target the where-flags name,
with the revision's policies' findings: for `reconciler plan` and `apply`, the daemon's
converger and `reconciler local up`."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from dataclasses import replace

from reconciler.adapters.topology_facts import live_release, read_topology_inputs
from reconciler.apply.connect import resolve_target
from reconciler.apply.live_reader import read_live, server_views
from reconciler.apply.target import Target
from reconciler.compile.desired import DesiredState, compile_desired_state, compile_shape
from reconciler.compile.topology_places import TopologyInputs
from reconciler.compile.topology_spec import topology_set
from reconciler.config.layering import plain
from reconciler.config.repo import Config
from reconciler.logs import print_warnings
from reconciler.plan.diff import plan_changes
from reconciler.plan.live import LiveState
from reconciler.plan.model import Plan
from reconciler.policy.engine import CompiledPolicy
from reconciler.policy.loader import revision_policies
from reconciler.policy.subjects import evaluate_state, params_of

log = logging.getLogger(__name__)


def passes(
    config: Config, args: argparse.Namespace, policies: tuple[CompiledPolicy, ...] | None = None
) -> Iterator[tuple[Plan, Target]]:
    """The plans that bring the cluster to `config`, each made after the caller applied the
    one before: one plan; or, when it was a bootstrap plan (our control plane was down, and
    applying it brought it up), a second one for what needed Slurm."""
    for _ in range(2):
        plan, target, _ = plan_config(config, args, policies)
        yield plan, target
        if not (plan.bootstrap and plan.has_changes):
            return


def plan_config(
    config: Config,
    args: argparse.Namespace,
    policies: tuple[CompiledPolicy, ...] | None = None,
) -> tuple[Plan, Target, DesiredState]:
    """The plan for a loaded config against the target the args name (CLI and daemon);
    `policies` already compiled for this revision, else compiled here."""
    shape = compile_shape(config)  # the declared nodes depend on neither profile nor release
    declared = [n.name for n in (*shape.slurm_nodes, *shape.spare_nodes)]
    target, profile = resolve_target(
        args, config.settings.namespace, declared, config.settings.release
    )
    running = live_release(target.slurm, target.slurm_release)
    state = compile_desired_state(config, profile, _topology_inputs(config, target), running)
    print_warnings(state.warnings)
    live = read_live(target.kube, target.slurm, state.release, state.namespace, target.sacctmgr,
                     secret_names=[s.name for s in state.secrets],
                     value_secret_names=[s.name for s in state.value_secrets])  # fmt: skip
    plan = with_policies(plan_against(state, live, target), config, state, policies)
    return plan, target, state


def _topology_inputs(config: Config, target: Target) -> TopologyInputs | None:
    """What compute.topology reads from the cluster; without it nothing is read."""
    topologies = topology_set(plain(config.values), config.topology_where)
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
