"""Compile policies once per revision, evaluate them against plain objects.

Semantics follow ValidatingAdmissionPolicy: every matchCondition must be true for a policy to
apply; each validation that is false yields a finding carrying the policy's actions; an
expression that errors counts as a violation under failurePolicy Fail and is set aside (an
Audit finding, so it is still seen) under Ignore.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError, base_functions

from reconciler.config.policy_file import Expression, Override, Policy, Validation
from reconciler.errors import Location, ReconcilerError
from reconciler.policy import cost
from reconciler.policy.cel_compiled import Program, Unsupported, compile_program
from reconciler.policy.cel_values import to_cel
from reconciler.policy.inputs import Path, covering, inputs_key, paths_read
from reconciler.policy.k8s_library import FUNCTIONS
from reconciler.policy.limits import Refusals

# Macros look like member calls in the parse tree but are not functions.
MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter", "has"})
KNOWN_FUNCTIONS: Final = frozenset(base_functions) | frozenset(FUNCTIONS) | MACROS
VARIABLES: Final = ("object", "params", "namespaceObject")
ERROR_TEXT_LIMIT: Final = 300
MEMO_LIMIT: Final = 4096  # verdicts remembered per policy; cleared whole when full


class PolicyCompileError(ReconcilerError):
    """Expressions that do not compile, each with its file, line, policy and column."""

    def __init__(self, problems: Sequence[str]):
        super().__init__(
            "policy expressions do not compile:\n  " + "\n  ".join(problems),
            hint="fix the expression at the column shown (CEL, as in ValidatingAdmissionPolicy)",
        )
        self.problems = tuple(problems)


@dataclass(frozen=True)
class Finding:
    """One violated validation (or one that errored) of one policy on one object."""

    policy: str
    actions: frozenset[str]
    message: str
    reason: str
    subject: str  # what it is about: "Pod ns/name", "nodeDefinition h100"
    where: Location  # the policy's own place, so the reader can open it

    @property
    def denies(self) -> bool:
        return "Deny" in self.actions

    @property
    def warns(self) -> bool:
        return "Warn" in self.actions

    def __str__(self) -> str:
        return f"{self.subject}: policy {self.policy} ({self.where}): {self.message}"


@dataclass(frozen=True)
class _Program:
    expression: Expression
    runner: Any  # cel_compiled.Program, or a celpy.Runner (its interpreter)
    reads: frozenset[Path] = frozenset()


@dataclass(frozen=True)
class CompiledValidation:
    validation: Validation
    check: _Program
    message: _Program | None


@dataclass(frozen=True)
class CompiledPolicy:
    policy: Policy
    conditions: tuple[tuple[str, _Program], ...]
    validations: tuple[CompiledValidation, ...]
    # Everything its expressions read; its verdicts remembered by those values (inputs.py).
    inputs: tuple[Path, ...] = ()
    memo: dict[str, tuple[_Failure, ...]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )


def effective_policies(
    shipped: Iterable[Policy | Override], repo: Iterable[Policy | Override]
) -> list[Policy]:
    """Shipped policies, then the repo's; a repo override softens or turns off a shipped
    one by name. A repo policy may not reuse a shipped name (say which one wins: override)."""
    policies: dict[str, Policy] = {}
    for doc in shipped:
        if isinstance(doc, Policy):
            policies[doc.name] = doc
    overrides: list[Override] = []
    for doc in repo:
        if isinstance(doc, Override):
            overrides.append(doc)
        elif doc.name in policies:
            raise ReconcilerError(
                f"policy {doc.name} is defined twice ({policies[doc.name].where} and {doc.where})",
                where=doc.where,
                hint="rename it, or change a shipped policy with kind: PolicyOverride",
            )
        else:
            policies[doc.name] = doc
    for override in overrides:
        policies = _overridden(policies, override)
    return [p for p in policies.values()]


def _overridden(policies: dict[str, Policy], override: Override) -> dict[str, Policy]:
    found = policies.get(override.name)
    if found is None:
        raise ReconcilerError(
            f"PolicyOverride {override.name}: no such policy",
            where=override.where,
            hint="known: " + ", ".join(sorted(policies)),
        )
    changed = dict(policies)
    if override.disabled:
        del changed[override.name]
    elif override.actions is not None:
        changed[override.name] = _with_actions(found, override.actions)
    return changed


def _with_actions(policy: Policy, actions: frozenset[str]) -> Policy:
    return replace(policy, actions=actions)


def compile_policies(
    policies: Iterable[Policy], *, interpret: bool = False
) -> tuple[CompiledPolicy, ...]:
    """Every expression compiled once; all problems reported together. An expression runs as
    Python closures (cel_compiled.py), or, if it uses a construct they leave out, or with
    `interpret` (the benchmark's reference), on celpy's interpreter: the same meaning."""
    env = celpy.Environment()
    problems: list[str] = []
    refusals = Refusals()  # over a limit (limits.py): refused alone, on one line
    compiled: list[CompiledPolicy] = []

    def program(policy: Policy, expression: Expression) -> _Program:
        if refusals.before_parse(policy, expression):
            return _Program(expression, None)
        try:
            ast = env.compile(expression.text)
        except celpy.CELParseError as error:
            problems.append(_parse_problem(policy, expression, error))
            return _Program(expression, None)
        if refusals.after_parse(policy, expression, ast):
            return _Program(expression, None)
        unknown = sorted(_called(ast) - KNOWN_FUNCTIONS)
        if unknown:
            problems.append(
                f"{expression.where}: policy {policy.name}: unknown function {', '.join(unknown)}"
            )
        runner: Any = None
        if not interpret:
            with contextlib.suppress(Unsupported):  # else interpreted: interpreted() says so
                runner = compile_program(ast, FUNCTIONS)
        runner = runner or env.program(ast, functions=dict(FUNCTIONS))
        return _Program(expression, runner, frozenset(paths_read(ast)))

    for policy in policies:
        conditions = tuple((c.name, program(policy, c.expression)) for c in policy.match_conditions)
        validations = tuple(
            CompiledValidation(
                v,
                program(policy, v.expression),
                None if v.message_expression is None else program(policy, v.message_expression),
            )
            for v in policy.validations
        )
        # Messages are computed per object on failure: the memo keys on what checks read.
        checks = [p for _, p in conditions] + [v.check for v in validations]
        inputs = covering(path for program in checks for path in program.reads)
        compiled.append(CompiledPolicy(policy, conditions, validations, inputs))
    refusals.raise_first()
    if problems:
        raise PolicyCompileError(problems)
    return tuple(compiled)


def interpreted(policies: Iterable[CompiledPolicy]) -> list[Expression]:
    """The expressions that run on celpy's interpreter rather than compiled."""
    found = []
    for compiled in policies:
        programs = [p for _, p in compiled.conditions]
        programs += [p for v in compiled.validations for p in (v.check, v.message) if p]
        found += [p.expression for p in programs if not isinstance(p.runner, Program)]
    return found


def _parse_problem(policy: Policy, expression: Expression, error: celpy.CELParseError) -> str:
    column = getattr(error, "column", None)
    at = f" at column {column}" if column else ""
    line = getattr(error, "line", None)
    shown = expression.text.splitlines()[line - 1] if line else expression.text
    return f"{expression.where}: policy {policy.name}: does not parse{at}: {shown.strip()!r}"


def _called(ast: Any) -> set[str]:
    names: set[str] = set()
    for tree in ast.iter_subtrees():
        if tree.data == "ident_arg":
            names.add(str(tree.children[0]))
        elif tree.data == "member_dot_arg":
            names.add(str(tree.children[1]))
    return names


def evaluate(
    policies: Iterable[CompiledPolicy],
    target: str,
    obj: Mapping[str, Any],
    subject: str,
    *,
    params: Mapping[str, Any],
    namespace_object: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """Findings of every policy for `target` on one object (plain data). A policy that saw
    the same values at the paths its checks read answers from its memo; only the message of a
    failed check is computed for this object."""
    roots = {"object": obj, "params": dict(params), "namespaceObject": dict(namespace_object or {})}
    converted: dict[str, Any] = {}
    seen: dict[Path, str] = {}  # the JSON of each path read, for the memo keys

    def activation() -> dict[str, Any]:  # CEL values, made once, on the first need
        if not converted:
            converted.update({name: to_cel(value) for name, value in roots.items()})
        return converted

    findings: list[Finding] = []
    for compiled in policies:
        if compiled.policy.target != target:
            continue
        key = inputs_key(compiled.inputs, roots, seen)
        failures = compiled.memo.get(key)
        if failures is None:
            failures = _failures(compiled, activation())
            if len(compiled.memo) >= MEMO_LIMIT:
                compiled.memo.clear()
            compiled.memo[key] = failures
        findings.extend(_finding(compiled, failure, activation, subject) for failure in failures)
    return findings


@dataclass(frozen=True)
class _Failure:
    """A validation that was false (error None), or an expression that errored; `index` is
    the validation's, or -1 for a match condition."""

    index: int
    error: _ExpressionFailed | None = None


def _failures(compiled: CompiledPolicy, activation: dict[str, Any]) -> tuple[_Failure, ...]:
    total = [0.0]  # the policy's budget on this object (Kubernetes' RuntimeCELCostBudget)
    try:
        for _, condition in compiled.conditions:
            if not _truth(condition, activation, total):
                return ()
    except _ExpressionFailed as failed:
        return (_Failure(-1, failed),)
    failures = []
    for index, validation in enumerate(compiled.validations):
        try:
            if not _truth(validation.check, activation, total):
                failures.append(_Failure(index))
        except _ExpressionFailed as failed:
            failures.append(_Failure(index, failed))
    return tuple(failures)


def _finding(
    compiled: CompiledPolicy,
    failure: _Failure,
    activation: Callable[[], dict[str, Any]],
    subject: str,
) -> Finding:
    policy = compiled.policy
    if failure.error is not None:
        return _errored(policy, failure.error, subject)
    validation = compiled.validations[failure.index]
    message = _message(validation, activation())
    return Finding(policy.name, policy.actions, message, validation.validation.reason,
                   subject, policy.where)  # fmt: skip


class _ExpressionFailed(Exception):
    def __init__(self, expression: Expression, text: str):
        super().__init__(text)
        self.expression = expression
        self.text = text


def _run(program: _Program, activation: dict[str, Any], total: list[float] | None = None) -> Any:
    """`total` the cost spent by the policy's expressions on this object so far."""
    try:
        if isinstance(program.runner, Program):
            return program.runner.evaluate(activation, total)
        return program.runner.evaluate(activation)
    except cost.CostLimitExceeded as error:
        raise _ExpressionFailed(program.expression, error.text) from None
    except CELEvalError as error:
        raise _ExpressionFailed(program.expression, _short(error)) from None
    except (TypeError, ValueError, ArithmeticError, KeyError, IndexError) as error:
        raise _ExpressionFailed(program.expression, f"{type(error).__name__}: {error}") from None


def _truth(program: _Program, activation: dict[str, Any], total: list[float]) -> bool:
    value = _run(program, activation, total)
    if not isinstance(value, celtypes.BoolType | bool):
        raise _ExpressionFailed(
            program.expression, f"expected a bool, got {type(value).__name__} {value!r}"
        )
    return bool(value)


def _message(validation: CompiledValidation, activation: dict[str, Any]) -> str:
    """messageExpression wins; if it errors or is empty, the static message (as in VAP)."""
    fallback = validation.validation.message or f"failed: {validation.validation.expression.text}"
    if validation.message is None:
        return fallback
    try:
        text = str(_run(validation.message, activation))
    except _ExpressionFailed:
        return fallback
    return text.strip() or fallback


def _errored(policy: Policy, failed: _ExpressionFailed, subject: str) -> Finding:
    text = f"expression {failed.expression.text!r} failed: {failed.text}"
    if policy.failure_policy == "Ignore":
        return Finding(policy.name, frozenset({"Audit"}), f"{text} (failurePolicy Ignore)",
                       "InternalError", subject, failed.expression.where)  # fmt: skip
    return Finding(policy.name, policy.actions, f"{text} (failurePolicy Fail)",
                   "InternalError", subject, failed.expression.where)  # fmt: skip


def _short(error: CELEvalError) -> str:
    """celpy puts the whole activation in some messages: keep the first part."""
    text = str(error.args[0]) if error.args else str(error)
    text = text.split(" (in activation", 1)[0]
    return text if len(text) <= ERROR_TEXT_LIMIT else text[:ERROR_TEXT_LIMIT] + "..."
