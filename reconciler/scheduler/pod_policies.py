"""Pod policies at admission (pure): which findings refuse a Pod, which only warn.

A Deny finding refuses the Pod (Event, PodScheduled=False, no job), a Warn finding is a
Warning Event and the job goes ahead, an Audit finding is logged. Policies come from the
revision the daemon last applied; `namespaceObject` is read only if a policy uses it. Before
the first one, `startup_pod_policies` gives the scheduler the revision's own or the shipped ones.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from reconciler.config.repo import Config
from reconciler.errors import ReconcilerError
from reconciler.policy.engine import CompiledPolicy, Finding, evaluate
from reconciler.policy.loader import revision_policies, shipped_policies
from reconciler.policy.subjects import params_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PodPolicies:
    policies: tuple[CompiledPolicy, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)

    @cached_property  # asked for every Pod; the answer is fixed per revision
    def reads_namespace(self) -> bool:
        return any(
            "namespaceObject" in program.expression.text
            for compiled in self.policies
            if compiled.policy.target == "pod"
            for program in _programs(compiled)
        )

    def judge(self, pod: Mapping[str, Any], namespace: Mapping[str, Any] | None) -> Verdict:
        meta = pod.get("metadata") or {}
        subject = f"Pod {meta.get('namespace')}/{meta.get('name')}"
        findings = evaluate(
            self.policies, "pod", pod, subject, params=self.params, namespace_object=namespace
        )
        return Verdict(tuple(findings))


@dataclass(frozen=True)
class Verdict:
    findings: tuple[Finding, ...]

    @property
    def denials(self) -> Sequence[Finding]:
        return [f for f in self.findings if f.denies]

    @property
    def warnings(self) -> Sequence[Finding]:
        return [f for f in self.findings if f.warns]

    @property
    def audits(self) -> Sequence[Finding]:
        return [f for f in self.findings if "Audit" in f.actions]

    def refusal(self) -> str | None:
        """The message of a refused Pod, each policy with its message and fix."""
        if not self.denials:
            return None
        return "; ".join(f"denied by policy {f.policy}: {f.message}" for f in self.denials)


def _programs(compiled: CompiledPolicy) -> list[Any]:
    programs = [program for _, program in compiled.conditions]
    for validation in compiled.validations:
        programs.append(validation.check)
        if validation.message is not None:
            programs.append(validation.message)
    return programs


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
