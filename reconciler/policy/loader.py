"""The policies of one revision: shipped ones, then the repo's, compiled once; and the pod
policies the scheduler starts with, before the daemon has converged a revision."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from reconciler.config.files import read_shipped_policies
from reconciler.config.policy_file import Override, Policy, parse_policy_file
from reconciler.config.repo import Config
from reconciler.errors import ReconcilerError
from reconciler.policy.engine import CompiledPolicy, compile_policies, effective_policies
from reconciler.policy.subjects import params_of
from reconciler.scheduler.pod_policies import PodPolicies

log = logging.getLogger(__name__)

SHIPPED_PREFIX = "(shipped) policies/"


def shipped_documents(shipped: Mapping[str, str]) -> list[Policy | Override]:
    """`shipped` maps file name -> text (config.files.read_shipped_policies)."""
    return [
        doc
        for name, text in sorted(shipped.items())
        for doc in parse_policy_file(text, SHIPPED_PREFIX + name, "shipped")
    ]


def policies_for(config: Config, shipped: Mapping[str, str]) -> tuple[CompiledPolicy, ...]:
    return compile_policies(effective_policies(shipped_documents(shipped), config.policies))


def revision_policies(config: Config) -> tuple[CompiledPolicy, ...]:
    """Shipped policies and the repo's, compiled (the shipped files are read here)."""
    return policies_for(config, read_shipped_policies())


def shipped_policies() -> tuple[CompiledPolicy, ...]:
    """The shipped policies alone, compiled (no repo, or a repo whose own do not compile)."""
    return compile_policies(effective_policies(shipped_documents(read_shipped_policies()), ()))


def startup_pod_policies(config: Config) -> PodPolicies:
    """The pod policies to start the scheduler with, before any revision is converged. If
    the repo's own do not compile, the shipped ones (the converger records the error)."""
    try:
        policies = revision_policies(config)
    except ReconcilerError as error:
        log.warning("policies of the first revision: %s; starting with the shipped ones", error)
        policies = shipped_policies()
    pods = tuple(p for p in policies if p.policy.target == "pod")
    return PodPolicies(pods, params_of(config))
