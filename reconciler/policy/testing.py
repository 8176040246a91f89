"""Unit tests for policies, written as data next to them (policies/tests/*.yaml):

    apiVersion: policy.reconciler.sunk.dev/v1alpha1
    kind: PolicyTest
    metadata: {name: pod rules}
    spec:
      params: {killWait: 30}            # optional, over the repo's own
      cases:
        - name: a Pod without a CPU request is denied
          target: pod                   # default pod
          params: {killWait: 60}        # optional, for this case only
          object: {...}                 # the Pod (or compiled object) as YAML
          namespaceObject: {...}        # optional
          expect:
            deny: [pod-requests-cpu-and-memory]   # exactly these policies deny
            warn: []                               # exactly these warn (omit: not checked)
            audit: []

`deny`, `warn` and `audit` each name exactly the policies expected to act that way; a list
left out is not checked. Pure: documents in, results out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.config.policy_file import TARGETS, PolicyError
from reconciler.config.yamlfile import KeyPath, YamlFile, parse_yaml_documents
from reconciler.errors import Location
from reconciler.policy.engine import CompiledPolicy, Finding, evaluate
from reconciler.wellknown import POLICY_API_VERSION

EXPECTATIONS = {"deny": "Deny", "warn": "Warn", "audit": "Audit"}


@dataclass(frozen=True)
class Case:
    name: str
    target: str
    object: dict[str, Any]
    namespace_object: dict[str, Any] | None
    params: dict[str, Any]
    expect: dict[str, frozenset[str]]  # "Deny" -> policy names
    where: Location


@dataclass(frozen=True)
class CaseResult:
    case: Case
    got: dict[str, frozenset[str]]
    findings: tuple[Finding, ...]

    @property
    def passed(self) -> bool:
        return all(self.got[action] == names for action, names in self.case.expect.items())

    def differences(self) -> list[str]:
        lines = []
        for action, want in self.case.expect.items():
            got = self.got[action]
            if got != want:
                lines.append(
                    f"{action}: expected {sorted(want) or 'none'}, got {sorted(got) or 'none'}"
                )
        return lines


def parse_test_file(text: str, name: str, defaults: Mapping[str, Any]) -> list[Case]:
    cases: list[Case] = []
    for doc in parse_yaml_documents(text, name):
        data = doc.data if isinstance(doc.data, dict) else {}
        if data.get("apiVersion") != POLICY_API_VERSION or data.get("kind") != "PolicyTest":
            raise PolicyError(
                "not a PolicyTest document",
                where=doc.location(("kind",)),
                hint=f"apiVersion: {POLICY_API_VERSION}, kind: PolicyTest",
            )
        spec = data.get("spec") or {}
        params = {**defaults, **(spec.get("params") or {})}
        raw_cases = spec.get("cases")
        if not isinstance(raw_cases, list) or not raw_cases:
            raise PolicyError("spec.cases must be a non-empty list", where=doc.location(("spec",)))
        cases += [_case(doc, i, raw, params) for i, raw in enumerate(raw_cases)]
    return cases


def _case(doc: YamlFile, index: int, raw: Any, params: dict[str, Any]) -> Case:
    path: KeyPath = ("spec", "cases", index)
    if not isinstance(raw, dict):
        raise PolicyError("a case must be a mapping", where=doc.location(path))
    target = raw.get("target", "pod")
    if target not in TARGETS:
        raise PolicyError(
            f"case target {target!r}", where=doc.location((*path, "target")),
            hint=f"one of {', '.join(TARGETS)}",
        )  # fmt: skip
    obj, expect = raw.get("object"), raw.get("expect")
    if not isinstance(obj, dict) or not isinstance(expect, dict):
        raise PolicyError("a case needs an object and an expect mapping", where=doc.location(path))
    unknown = set(expect) - set(EXPECTATIONS)
    if unknown:
        raise PolicyError(
            f"expect: unknown {', '.join(sorted(unknown))}",
            where=doc.location((*path, "expect")),
            hint="deny, warn and audit, each a list of policy names",
        )
    return Case(
        name=str(raw.get("name") or f"case {index}"),
        target=target,
        object=obj,
        namespace_object=raw.get("namespaceObject"),
        params={**params, **(raw.get("params") or {})},
        expect={EXPECTATIONS[k]: frozenset(map(str, v or ())) for k, v in expect.items()},
        where=doc.location(path),
    )


def run_cases(policies: Iterable[CompiledPolicy], cases: Iterable[Case]) -> list[CaseResult]:
    policies = tuple(policies)
    results = []
    for case in cases:
        findings = evaluate(
            policies, case.target, case.object, case.name, params=case.params,
            namespace_object=case.namespace_object,
        )  # fmt: skip
        got = {
            action: frozenset(f.policy for f in findings if action in f.actions)
            for action in EXPECTATIONS.values()
        }
        results.append(CaseResult(case, got, tuple(findings)))
    return results
