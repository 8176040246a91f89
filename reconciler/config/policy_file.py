"""Policy documents, shaped like Kubernetes ValidatingAdmissionPolicy so they read the same:

    apiVersion: policy.reconciler.sunk.dev/v1alpha1
    kind: Policy
    metadata: {name: gpu-pods-set-exclusive}
    spec:
      target: pod                  # pod | nodeDefinition | slurmConfig | partition
      failurePolicy: Fail          # or Ignore: what an expression that errors does
      validationActions: [Deny]    # Deny | Warn | Audit (Deny and Warn exclude each other)
      matchConditions: [{name: ..., expression: ...}]
      validations: [{expression: ..., message: ... | messageExpression: ..., reason: ...}]

and `kind: PolicyOverride` (metadata.name of a shipped policy; spec.validationActions, or
spec.disabled: true) for a config repo that wants a shipped rule softer or off.
Pure: text in, dataclasses out; errors name the file, line and policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from reconciler.config.yamlfile import KeyPath, YamlFile, parse_yaml_documents
from reconciler.errors import Location, ReconcilerError
from reconciler.wellknown import POLICY_API_VERSION

TARGETS: Final = ("pod", "nodeDefinition", "slurmConfig", "partition")
ACTIONS: Final = ("Deny", "Warn", "Audit")
FAILURE_POLICIES: Final = ("Fail", "Ignore")
DEFAULT_REASON: Final = "Invalid"


class PolicyError(ReconcilerError):
    """A policy document that cannot be used as written."""


@dataclass(frozen=True)
class Expression:
    """A CEL expression and where it is written, for compile and runtime errors."""

    text: str
    where: Location


@dataclass(frozen=True)
class MatchCondition:
    name: str
    expression: Expression


@dataclass(frozen=True)
class Validation:
    expression: Expression
    message: str | None
    message_expression: Expression | None
    reason: str


@dataclass(frozen=True)
class Policy:
    name: str
    target: str
    validations: tuple[Validation, ...]
    match_conditions: tuple[MatchCondition, ...]
    failure_policy: str
    actions: frozenset[str]
    origin: str  # "shipped" or "repo"
    where: Location


@dataclass(frozen=True)
class Override:
    name: str
    actions: frozenset[str] | None  # None: keep the policy's own
    disabled: bool
    where: Location


def parse_policy_file(text: str, name: str, origin: str) -> list[Policy | Override]:
    return [_document(doc, origin) for doc in parse_yaml_documents(text, name)]


def _document(doc: YamlFile, origin: str) -> Policy | Override:
    data = _mapping(doc, (), doc.data)
    kind = data.get("kind")
    if data.get("apiVersion") != POLICY_API_VERSION or kind not in ("Policy", "PolicyOverride"):
        raise PolicyError(
            f"not a policy document (apiVersion {data.get('apiVersion')!r}, kind {kind!r})",
            where=doc.location(("kind",)),
            hint=f"start it with apiVersion: {POLICY_API_VERSION} and kind: Policy "
            "(or PolicyOverride)",
        )
    name = _string(doc, ("metadata", "name"), (data.get("metadata") or {}).get("name"))
    spec = _mapping(doc, ("spec",), data.get("spec"))
    if kind == "PolicyOverride":
        return _override(doc, name, spec)
    return _policy(doc, name, spec, origin)


def _policy(doc: YamlFile, name: str, spec: dict[str, Any], origin: str) -> Policy:
    target = spec.get("target")
    if target not in TARGETS:
        raise PolicyError(
            f"policy {name}: spec.target is {target!r}",
            where=doc.location(("spec", "target")),
            hint=f"one of {', '.join(TARGETS)}",
        )
    failure = spec.get("failurePolicy", "Fail")
    if failure not in FAILURE_POLICIES:
        raise PolicyError(
            f"policy {name}: spec.failurePolicy is {failure!r}",
            where=doc.location(("spec", "failurePolicy")),
            hint="Fail (an expression that errors counts as a violation) or Ignore",
        )
    validations = _list(doc, ("spec", "validations"), spec.get("validations"))
    if not validations:
        raise PolicyError(
            f"policy {name}: no spec.validations",
            where=doc.location(("spec",)),
            hint="add at least one {expression: ..., message: ...}",
        )
    conditions = _list(doc, ("spec", "matchConditions"), spec.get("matchConditions") or [])
    return Policy(
        name=name,
        target=target,
        validations=tuple(_validation(doc, name, i, v) for i, v in enumerate(validations)),
        match_conditions=tuple(_condition(doc, i, c) for i, c in enumerate(conditions)),
        failure_policy=failure,
        actions=_actions(doc, name, spec.get("validationActions", ["Deny"])),
        origin=origin,
        where=doc.location(("metadata", "name")),
    )


def _override(doc: YamlFile, name: str, spec: dict[str, Any]) -> Override:
    disabled = spec.get("disabled", False)
    if not isinstance(disabled, bool):
        raise PolicyError(
            f"override {name}: spec.disabled must be true or false, not {disabled!r}",
            where=doc.location(("spec", "disabled")),
        )
    actions = spec.get("validationActions")
    if actions is None and not disabled:
        raise PolicyError(
            f"override {name}: says neither validationActions nor disabled: true",
            where=doc.location(("spec",)),
            hint="e.g. validationActions: [Warn], or disabled: true",
        )
    chosen = None if actions is None else _actions(doc, name, actions)
    return Override(name, chosen, disabled, doc.location(("metadata", "name")))


def _validation(doc: YamlFile, policy: str, index: int, raw: Any) -> Validation:
    path: KeyPath = ("spec", "validations", index)
    item = _mapping(doc, path, raw)
    message, message_expression = item.get("message"), item.get("messageExpression")
    if message is not None and not isinstance(message, str):
        raise PolicyError(
            f"policy {policy}: message must be a string", where=doc.location((*path, "message"))
        )
    return Validation(
        expression=_expression(doc, (*path, "expression"), item.get("expression")),
        message=message,
        message_expression=(
            None
            if message_expression is None
            else _expression(doc, (*path, "messageExpression"), message_expression)
        ),
        reason=str(item.get("reason") or DEFAULT_REASON),
    )


def _condition(doc: YamlFile, index: int, raw: Any) -> MatchCondition:
    path: KeyPath = ("spec", "matchConditions", index)
    item = _mapping(doc, path, raw)
    return MatchCondition(
        name=_string(doc, (*path, "name"), item.get("name")),
        expression=_expression(doc, (*path, "expression"), item.get("expression")),
    )


def _actions(doc: YamlFile, policy: str, raw: Any) -> frozenset[str]:
    path: KeyPath = ("spec", "validationActions")
    items = _list(doc, path, raw)
    unknown = [a for a in items if a not in ACTIONS]
    if unknown or ("Deny" in items and "Warn" in items):
        raise PolicyError(
            f"policy {policy}: validationActions {items!r}",
            where=doc.location(path),
            hint="a list of Deny, Warn and Audit; Deny and Warn together make no sense "
            "(as in ValidatingAdmissionPolicyBinding)",
        )
    return frozenset(items)


def _expression(doc: YamlFile, path: KeyPath, raw: Any) -> Expression:
    return Expression(_string(doc, path, raw), doc.location(path))


def _string(doc: YamlFile, path: KeyPath, raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise PolicyError(f"{path[-1]} must be a non-empty string", where=doc.location(path))
    return raw


def _mapping(doc: YamlFile, path: KeyPath, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise PolicyError(
            f"{'.'.join(map(str, path)) or 'the document'} must be a mapping",
            where=doc.location(path),
        )
    return raw


def _list(doc: YamlFile, path: KeyPath, raw: Any) -> list[Any]:
    if not isinstance(raw, list):
        raise PolicyError(f"{'.'.join(map(str, path))} must be a list", where=doc.location(path))
    return raw
