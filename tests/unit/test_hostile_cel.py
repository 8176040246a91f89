"""CEL: a policy built to hurt is refused, or stopped, by name.

A policy of three nested 100-element all() ran 27 to 42 s in `plan` and at Pod admission; it is
refused when the policies compile, its estimated cost over Kubernetes' per-expression limit.
An expression that only grows costly on a large object is stopped at run time at the same
limit, an error under the policy's failurePolicy. 5,000 nested parentheses ended in a
RecursionError traceback; any nesting past cel-go's 250 is refused before it is parsed or
compiled, with the file, the policy and the limit, and no input gives a traceback.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import celpy
import pytest

from reconciler import cli
from reconciler.config.policy_file import Expression, Policy, Validation, parse_policy_file
from reconciler.errors import Location, PolicyCostError, PolicyLimitError, PolicyNestingError
from reconciler.policy import cost
from reconciler.policy.cel_compiled import compile_program
from reconciler.policy.engine import compile_policies, evaluate
from reconciler.policy.k8s_library import FUNCTIONS
from reconciler.scheduler.pod_policies import PodPolicies

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"
HUNDRED = "[" + ", ".join(str(i) for i in range(100)) + "]"
# The hostile policy: 1,000,000 evaluations of its body, 27 s on celpy here.
THREE_NESTED = f"{HUNDRED}.all(x, {HUNDRED}.all(y, {HUNDRED}.all(z, x + y + z >= 0)))"
# Cheap on a Pod of a few containers, quadratic in their number: passes the estimate (a list
# read from the object counts as cost.UNKNOWN_ITEMS), stopped at run time on 3,000.
PAIRWISE = (
    "object.spec.containers.all(c, object.spec.containers.all(d, c == d || c.name != d.name))"
)
WHERE = Location("policies/site.yaml", 7, "spec.validations[0].expression")


def _policy(text: str, failure: str = "Fail", name: str = "hostile") -> Policy:
    validation = Validation(Expression(text, WHERE), None, None, "Invalid")
    return Policy(name, "pod", (validation,), (), failure, frozenset({"Deny"}), "repo",
                  Location("policies/site.yaml", 1))  # fmt: skip


def _policy_yaml(text: str) -> str:
    return (
        "apiVersion: policy.reconciler.sunk.dev/v1alpha1\nkind: Policy\n"
        "metadata: {name: hostile}\nspec:\n  target: nodeDefinition\n  validations:\n"
        f"    - expression: '{text}'\n"
    )


def _pod(containers: int) -> dict[str, Any]:
    names = [{"name": f"c{i}"} for i in range(containers)]
    return {"metadata": {"namespace": "a", "name": "p"}, "spec": {"containers": names}}


def _one_line(error: BaseException) -> str:
    first, *rest = str(error).split("\n")
    assert len(rest) == 1 and rest[0].startswith("  hint: ")  # one line, then the hint
    return first


# ---- cost, at compile time ---------------------------------------------------------------


def test_three_nested_hundred_element_alls_are_refused_at_compile_time() -> None:
    start = time.perf_counter()
    with pytest.raises(PolicyCostError) as err:
        compile_policies([_policy(THREE_NESTED)])
    assert time.perf_counter() - start < 2.0
    line = _one_line(err.value)
    assert line.startswith("policies/site.yaml:7 (spec.validations[0].expression): policy hostile")
    assert "9,141,411" in line  # cel-go's estimate of it, by hand: 100 * (100 * (100 * 9))
    assert "limit is 1,000,000 (Kubernetes' PerCallLimit)" in line


def test_a_message_expression_is_estimated_too() -> None:
    validation = Validation(Expression("true", WHERE), None, Expression(THREE_NESTED, WHERE), "")
    policy = _policy("true")
    policy = Policy(policy.name, "pod", (validation,), (), "Fail", policy.actions, "repo",
                    policy.where)  # fmt: skip
    with pytest.raises(PolicyCostError):
        compile_policies([policy])


def test_two_nested_alls_and_the_shipped_policies_pass_the_estimate() -> None:
    compile_policies([_policy(f"{HUNDRED}.all(x, {HUNDRED}.all(y, x + y >= 0))")])
    compile_policies([_policy(PAIRWISE)])


def test_a_replace_that_doubles_a_string_per_level_is_refused() -> None:
    text = "'aa'"  # 2 characters; each replace of 'a' by the string so far doubles it
    for _ in range(30):
        text = f"'aa'.replace('a', {text})"
    with pytest.raises(PolicyCostError):
        compile_policies([_policy(text + " != ''")])


# cel-go checker/cost_test.go, TestCost (commit 093d95ab): (case name, expression, sizes of
# the variables as its `hints`, wanted Max). Our policies are untyped: a hint on a list is a
# Shape with items; one on a string, without.
_LIST = cost.Shape(0.0)
COST_CASES = [
    ("const", '"Hello World!"', {}, 0),
    ("identity", "input", {}, 1),
    ("select: map", "input['key']", {}, 2),
    ("select: field", "input.single_int32", {}, 2),
    ("create list", "[1, 2, 3]", {}, 10),
    ("create map", '{"a": 1, "b": 2, "c": 3}', {}, 30),
    ("all comprehension", "input.all(x, true)", {"input": cost.Shape(100, _LIST)}, 302),
    ("nested all comprehension", "input.all(x, x.all(y, true))",
     {"input": cost.Shape(50, cost.Shape(10, _LIST))}, 1752),
    ("all comprehension on literal", "[1, 2, 3].all(x, true)", {}, 20),
    ("variable cost function with constant", "'123'.matches('[0-9]')", {}, 2),
    ("or", "true || false", {}, 0),
    ("and", "true && false", {}, 0),
    ("lt", "1 < 2", {}, 1),
    ("eq", "1 == 2", {}, 1),
    ("in", "2 in [1, 2, 3]", {}, 13),
    ("plus", "1 + 1", {}, 1),
    ("%", "1 % 1", {}, 1),
    ("ternary", "true ? 1 : 2", {}, 0),
    ("string size", 'size("123")', {}, 1),
    ("int to string conversion", "string(1)", {}, 1),
    ("contains", "input.contains(arg1)", {"input": cost.Shape(500), "arg1": cost.Shape(500)},
     2502),
    ("startsWith", "input.startsWith(arg1)", {"arg1": cost.Shape(500)}, 52),
    ("size receiver", "input.size()", {}, 2),
    ("ternary eval", "(x > 2 ? input1 : input2).all(y, true)",
     {"input1": cost.Shape(1, _LIST), "input2": cost.Shape(1, _LIST)}, 7),
    ("comprehension over map", "input.all(k, input[k].single_int32 > 3)",
     {"input": cost.Shape(10, _LIST)}, 82),
    ("list concat", "(list1 + list2).all(x, true)",
     {"list1": cost.Shape(10, _LIST), "list2": cost.Shape(10, _LIST)}, 64),
    ("str concat", '"abcdefg".contains(str1 + str2)',
     {"str1": cost.Shape(10), "str2": cost.Shape(10)}, 6),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "text", "sizes", "wanted"), COST_CASES, ids=[c[0] for c in COST_CASES]
)
def test_the_estimate_is_cel_gos(name: str, text: str, sizes: dict[str, Any], wanted: int) -> None:
    assert cost.estimate(celpy.Environment().compile(text), sizes) == wanted


# ---- cost, at run time -------------------------------------------------------------------


def test_a_quadratic_policy_on_a_huge_pod_is_stopped_at_the_per_call_limit() -> None:
    policies = compile_policies([_policy(PAIRWISE)])
    assert evaluate(policies, "pod", _pod(30), "Pod a/p", params={}) == []
    start = time.perf_counter()
    findings = evaluate(policies, "pod", _pod(3000), "Pod a/p", params={})
    assert time.perf_counter() - start < 5.0  # 9,000,000 elements otherwise
    (finding,) = findings
    assert finding.denies and finding.policy == "hostile" and finding.where == WHERE
    assert "cost limit exceeded" in finding.message and "PerCallLimit" in finding.message
    assert "failurePolicy Fail" in finding.message and PAIRWISE in finding.message


def test_under_failure_policy_ignore_the_stop_is_an_audit_finding() -> None:
    policies = compile_policies([_policy(PAIRWISE, failure="Ignore")])
    (finding,) = evaluate(policies, "pod", _pod(3000), "Pod a/p", params={})
    assert finding.actions == frozenset({"Audit"}) and "cost limit exceeded" in finding.message


def test_pod_admission_refuses_the_pod_with_the_reason() -> None:
    verdict = PodPolicies(compile_policies([_policy(PAIRWISE)])).judge(_pod(3000), None)
    refusal = verdict.refusal()
    assert refusal is not None and refusal.startswith("denied by policy hostile:")
    assert "cost limit exceeded" in refusal


def test_a_replace_that_squares_an_annotation_is_an_error_not_a_huge_string() -> None:
    # Within the estimate (a string read from the object counts as 253 characters); on a
    # 5,000-character annotation it would build 25,000,000 characters, 100,000 one of 10**10.
    text = "object.metadata.annotations.x.replace('a', object.metadata.annotations.x) != ''"
    policies = compile_policies([_policy(text)])
    pod = {"metadata": {"annotations": {"x": "a" * 5000}}}
    start = time.perf_counter()
    (finding,) = evaluate(policies, "pod", pod, "Pod a/p", params={})
    assert time.perf_counter() - start < 0.5
    assert "replace: the result would be 25,000,000 characters, over 10,000,000" in finding.message


def test_a_long_separator_is_an_error_not_a_huge_string() -> None:
    text = "object.spec.containers.map(c, c.name).join(object.metadata.annotations.x) != ''"
    pod = {**_pod(3000), "metadata": {"annotations": {"x": "," * 5000}}}
    (finding,) = evaluate(compile_policies([_policy(text)]), "pod", pod, "Pod a/p", params={})
    assert "join: the result would be 15,0" in finding.message


def test_concatenating_a_long_string_per_element_is_charged_by_its_length() -> None:
    # 3,000 copies of a 100,000-character annotation: 300 MB, and within the step's estimate.
    text = "object.spec.containers.map(c, object.metadata.annotations.x + c.name).size() > 0"
    pod = {**_pod(3000), "metadata": {"annotations": {"x": "a" * 100_000}}}
    start = time.perf_counter()
    (finding,) = evaluate(compile_policies([_policy(text)]), "pod", pod, "Pod a/p", params={})
    assert time.perf_counter() - start < 1.0
    assert "cost limit exceeded" in finding.message


def test_a_policys_expressions_share_the_runtime_budget() -> None:
    program = compile_program(celpy.Environment().compile("[1, 2].all(x, x > 0)"), FUNCTIONS)
    assert program.evaluate({}, [0.0])
    with pytest.raises(cost.CostLimitExceeded, match="RuntimeCELCostBudget"):
        program.evaluate({}, [cost.RUNTIME_BUDGET - 1.0])


# ---- nesting and length, before parsing ----------------------------------------------------


def _shapes(n: int) -> dict[str, str]:
    """Every kind of nesting, n deep, each a bool expression."""
    return {
        "parentheses": "(" * n + "true" + ")" * n,
        "lists": "[" * n + "1" + "]" * n + " != []",
        "maps": "{'a': " * n + "1" + "}" * n + " != {}",
        "calls": "size(" * n + "'a'" + ")" * n + " > 0",
        "not": "!" * n + "true",
        "minus": "-" * n + "1 != 0",
        "members": "has(object" + ".a" * n + ")",
        "indexes": "has(object" + "['a']" * n + ".b)",
        "ternaries": "true ? true : " * n + "true",
        "plus": " + ".join(["1"] * n) + " > 0",
        "or": " || ".join(["false"] * n) + " || true",
        "strings": " + ".join(["'a'"] * n) + " != ''",
        "macros": "".join(f"[1].all(x{i}, " for i in range(n)) + "true" + ")" * n,
    }


@pytest.mark.parametrize("kind", list(_shapes(1)))
def test_5000_deep_of_any_kind_is_refused_naming_file_policy_and_limit(kind: str) -> None:
    start = time.perf_counter()
    with pytest.raises(PolicyNestingError) as err:
        compile_policies([_policy(_shapes(5000)[kind])])
    assert time.perf_counter() - start < 5.0
    line = _one_line(err.value)
    assert line.startswith("policies/site.yaml:7 (spec.validations[0].expression): policy hostile")
    assert "the limit is 250" in line


@pytest.mark.parametrize("kind", list(_shapes(1)))
def test_just_under_the_limit_any_kind_compiles_and_runs(kind: str) -> None:
    policies = compile_policies([_policy(_shapes(245)[kind])])
    findings = evaluate(policies, "pod", _pod(1), "Pod a/p", params={})
    assert all("RecursionError" not in f.message for f in findings)


def test_an_expression_over_100000_characters_is_refused_before_parsing() -> None:
    text = " || ".join(["object.metadata.name == 'x'"] * 4000)
    start = time.perf_counter()
    with pytest.raises(PolicyNestingError, match="characters long; the limit is 100,000"):
        compile_policies([_policy(text)])
    assert time.perf_counter() - start < 0.5


def test_the_expressions_of_a_revision_are_bounded_in_all() -> None:
    # 11 s to parse a 100,000-character flat list here: a repo of 32 MiB could hold 300.
    text = "'" + "a" * 90_000 + "' != ''"  # one token: quick to parse, long to read
    policies = [_policy(text, name=f"long-{i}") for i in range(3)]
    with pytest.raises(PolicyNestingError) as err:
        compile_policies(policies)
    line = _one_line(err.value)
    assert "policy long-2" in line and "270,024 characters in all; the limit is 200,000" in line


def test_brackets_inside_string_literals_do_not_count() -> None:
    compile_policies([_policy("'" + "(" * 400 + "' != '' && \"[[[\" != r'{{{{'")])


# ---- through the commands: one line, no traceback ---------------------------------------------


def _repo_with(tmp_path: Path, expression: str) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    (repo / "policies" / "hostile.yaml").write_text(_policy_yaml(expression))
    return repo


@pytest.mark.parametrize("text", [THREE_NESTED, "(" * 5000 + "true" + ")" * 5000])
@pytest.mark.parametrize("command", ["plan", "policy"])
def test_plan_and_policy_test_print_the_refusal_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, command: str
) -> None:
    repo = _repo_with(tmp_path, text)
    args = ["plan", str(repo), "--offline"] if command == "plan" else ["policy", "test", str(repo)]
    start = time.perf_counter()
    code = cli.main(args)
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert code == 1 and elapsed < 10.0
    assert "Traceback" not in err and "RecursionError" not in err
    error = err[err.index("error: ") :]  # after the repo's warnings, if any
    assert error.startswith("error: policies/hostile.yaml:7 (spec.validations[0].expression): "
                            "policy hostile: the expression")  # fmt: skip
    assert "hint:" in err


def test_the_limit_errors_are_typed() -> None:
    assert issubclass(PolicyCostError, PolicyLimitError)
    assert issubclass(PolicyNestingError, PolicyLimitError)


def test_the_yaml_policy_file_reads_as_the_tests_assume() -> None:
    (doc,) = parse_policy_file(_policy_yaml("true"), "policies/hostile.yaml", "repo")
    assert isinstance(doc, Policy)
    assert doc.validations[0].expression.where.line == 7
