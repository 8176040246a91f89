"""CEL compiled to closures (reconciler/policy/cel_compiled.py) against celpy's interpreter:
random expressions on random objects give the same value (and type) or both an error, the
tricky cases by name, and every policy we ship, benchmark or test runs compiled."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy.evaluation import CELEvalError
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.policy.repo_policies import REPO_POLICIES, REPO_POLICY_FILE
from reconciler.config.files import read_shipped_policies
from reconciler.config.policy_file import parse_policy_file
from reconciler.policy.cel_compiled import Unsupported, compile_program
from reconciler.policy.cel_values import to_cel
from reconciler.policy.engine import compile_policies, effective_policies, interpreted
from reconciler.policy.k8s_library import FUNCTIONS
from reconciler.policy.loader import shipped_documents
from reconciler.policy.subjects import default_params
from reconciler.policy.testing import parse_test_file, run_cases
from tests.unit import test_policy_k8s_library

ROOT = Path(__file__).resolve().parents[2]
ENV = celpy.Environment()


@functools.cache
def _runners(expr: str) -> tuple[Any, Any]:
    tree = ENV.compile(expr)
    return ENV.program(tree, functions=FUNCTIONS), compile_program(tree, FUNCTIONS)


def _outcome(runner: Any, activation: dict[str, Any]) -> tuple[Any, ...]:
    """What a run gives: a value with its type (repr shows the celtypes of every element),
    a CEL error with its text, or a Python exception that escaped."""
    try:
        value = runner.evaluate(activation)
    except CELEvalError as error:  # the interpreter's text ends with its whole activation
        return ("error", str(error.args[0]).split(" (in activation", 1)[0])
    except Exception as error:
        return ("raised", type(error).__name__, str(error))
    return ("value", type(value), _shown(value))


_ACTIVATION = re.compile(r" \(in activation \\*'.*?\\*'\)(?=\", <class)", re.S)


def _shown(value: Any) -> str:
    """repr, or what stands for it where celpy's repr itself fails: a value holding an error
    (the interpreter's `{'k': 0 == []}` is a map holding a CELEvalError, whose repr raises)."""
    try:
        shown = repr(value)
    except Exception as error:
        return f"<no repr: {type(error).__name__}>"
    # An error held in a map literal: the interpreter's text ends with its whole activation.
    return _ACTIVATION.sub("", shown)


def agree(expr: str, **variables: Any) -> tuple[Any, ...]:
    interpreter, compiled = _runners(expr)
    activation = {name: celpy.json_to_cel(value) for name, value in variables.items()}
    expected = _outcome(interpreter, activation)
    assert _outcome(compiled, dict(activation)) == expected, expr
    return expected


# ---- the tricky cases -----------------------------------------------------------------------

OBJECT = {
    "a": {"b": 1},
    "l": [1, 0, "x"],
    "n": 9223372036854775807,
    "s": " Abc ",
    "m": {"cpu": "500m", "memory": "1Gi"},
}
TRUE = ("value", celpy.celtypes.BoolType, "BoolType(True)")
FALSE = ("value", celpy.celtypes.BoolType, "BoolType(False)")


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # || and && absorb an error whichever side it is on; two errors stay an error
        ("true || 1/0 == 1", TRUE),
        ("1/0 == 1 || true", TRUE),
        ("false && object.nope", FALSE),
        ("object.nope && false", FALSE),
        ("false || 1/0 == 1", ("error", "modulus or divide by zero")),
        ("object.nope || 1/0 == 1", ("error", "found no matching overload for _||_")),
        ("1 || true", TRUE),  # celpy: a non-bool is absorbed like an error
        # has() of a map literal's key whose value is an error: false, as the interpreter
        # says (found by the random test below)
        ("has({'k': 1/0}.k)", FALSE),
        ("has({'k': object.missing}.k)", FALSE),
        ("has({'k': 1}.k)", TRUE),
        # has() on a missing field, on a missing parent, on a non-map
        ("has(object.a.b)", TRUE),
        ("has(object.x.b)", FALSE),
        ("has(object.a.b.c)", FALSE),
        ("has(object.s.x)", FALSE),
        # a ternary runs only the branch it picks; a non-bool condition is an error
        (
            "object.a.b == 1 ? 'yes' : 1/0",
            ("value", celpy.celtypes.StringType, "StringType('yes')"),
        ),
        ("object.a.b != 1 ? 1/0 : 2", ("value", celpy.celtypes.IntType, "IntType(2)")),
        ("object.a.b ? 1 : 2", ("error", "found no matching overload for _?_:_")),
        ("object.nope ? 1 : 2", ("error", "found no matching overload for _?_:_")),
        # all/exists keep an element's error as a value and may still decide
        ("object.l.exists(x, 1 / x == 1)", TRUE),
        ("object.l.all(x, x > 0)", FALSE),
        ("object.l.all(x, x >= 0)", ("error", "found no matching overload")),
        ("[0, 1].exists(x, 1 / x == 5)", ("error", "modulus or divide by zero")),
        # map, filter, exists_one raise an element's error: not absorbed by ||
        ("object.l.map(x, x + 1)", ("error", "found no matching overload for Token('RULE', ")),
        ("true || object.l.map(x, x + 1) == []", ("error", "found no matching overload")),
        ("object.l.filter(x, x == 1) == [1]", ("error", "found no matching overload")),
        ("object.l.exists_one(x, x == 0)", ("error", "found no matching overload")),
        ("[1, 2, 3].filter(x, x > 1).map(x, x * 2) == [4, 6]", TRUE),
        ("[1, 2, 1].exists_one(x, x == 2)", TRUE),
        # a macro over a non-list: celpy iterates what it can, or lets the TypeError escape
        ("object.m.all(k, k.size() > 2)", TRUE),
        ("object.n.all(x, true)", ("raised", "TypeError", "'IntType' object is not iterable")),
        ("true || object.n.all(x, true)", ("raised", "TypeError")),
        ("[0, 1].exists(x, x == 0 || x.all(y, y))", ("raised", "TypeError")),
        # ... but a ternary makes a TypeError of its branch an error value
        ("false ? 1 : object.n.all(x, true)", ("error", "found no matching overload for _?_:_")),
        ("[0, 1].exists(x, x == 0 ? true : x.all(y, y))", TRUE),
        # int64 and uint64 overflow, division
        ("object.n + 1", ("error", "return error for overflow")),
        ("-9223372036854775808 / -1", ("error", "return error for overflow")),
        ("0u - 1u", ("error", "return error for overflow")),
        ("7 / 0", ("error", "modulus or divide by zero")),
        ("-7 / 2 == -3 && -7 % 2 == -1", TRUE),
        # comparisons across types, in, indexing
        ("1 == 1.0", ("error", "found no matching overload")),
        ("1 in [1.0, 'a', 1]", TRUE),
        ("1 in [1.0, 'a']", ("error", "no such overload")),
        ("'cpu' in object.m && !('gpu' in object.m)", TRUE),
        ("object.m['gpu']", ("error", "no such key")),
        ("object.l[5]", ("error", "invalid_argument")),
        ("object.l['a']", ("error", "found no matching overload for _[_]")),
        ("[1, 2] < [3]", ("error", "found no matching overload")),
        # names, functions, conversions
        ("nope", ("error", "undeclared reference to 'nope'")),
        ("object.s.nope()", ("error", "undeclared reference to 'nope'")),
        ("type(1) == int && type('a') == string", TRUE),
        ("int('12') + int(2.7) == 14", TRUE),
        ("int(object.s)", ("error", "return error for overflow")),
        ("object.s.trim().lowerAscii() == 'abc'", TRUE),
        ("{'a': 1, 'a': 2}", ("error", "Duplicate key StringType('a')")),
        ("[1, 2].min() == 1", TRUE),
        ("object.l.min()", ("raised", "TypeError")),
        # the Kubernetes library: member and global calls, errors as values
        ("quantity(object.m.cpu).isLessThan(quantity('1'))", TRUE),
        ("quantity(object.m.memory).compareTo(quantity('1024Mi')) == 0", TRUE),
        ("true || quantity('12Q').isInteger()", TRUE),
        ("quantity('12Q').isInteger()", ("error", "quantity: '12Q' is not a quantity")),
        ("sign(quantity('-1'))", ("value", celpy.celtypes.IntType, "IntType(-1)")),
    ],
)
def test_tricky_cases_agree(expr: str, expected: tuple[Any, ...]) -> None:
    got = agree(expr, object=OBJECT)
    assert got[0] == expected[0] and all(
        str(want) in str(have) for want, have in zip(expected[1:], got[1:], strict=False)
    ), got


def test_the_kubernetes_library_tests_agree() -> None:
    """Every expression of test_policy_k8s_library.py, compiled, as interpreted."""
    module = test_policy_k8s_library
    for test in (module.test_expression_is_true, module.test_errors_are_cel_eval_errors):
        for mark in test.pytestmark:  # type: ignore[attr-defined]
            for case in mark.args[1]:
                agree(case if isinstance(case, str) else case[0], object=module.POD)


# ---- random expressions on random objects -------------------------------------------------

KEYS = ("a", "b", "l", "m", "n", "s")
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([2**63 - 1, -(2**63), 0.5, -2.0]),
    st.sampled_from(["", "a", "Abc", " x ", "500m", "1Gi", "2", "-0", "a,b", "12Q"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)
    ),
    max_leaves=8,
)
OBJECTS = st.dictionaries(st.sampled_from(KEYS), JSON, max_size=5)

ATOMS = st.sampled_from(
    [
        "0", "1", "-2", "3u", "2.5", "9223372036854775807", "-9223372036854775808", "true",
        "false", "null", "'a'", "'500m'", "'1Gi'", "'a,b'", "[]", "[1, 2]", "['a', 'b']",
        "{'a': 1}", "object", "object.a", "object.a.b", "object.l", "object.m", "object.n",
        "object.s", "object['s']", "object.l[0]", "object.m['a']", "params.p", "x", "(1 / 0)",
        "object.missing", "('a' + 1)", "[0, 1].map(y, 1 / y)", "(2).all(y, true)",
    ]
)  # fmt: skip
FIELDS = st.sampled_from((*KEYS, "missing"))
UNARY = [
    "!{0}", "-{0}", "size({0})", "({0}).size()", "has(({0}).{f})", "({0}).{f}", "string({0})",
    "int({0})", "double({0})", "type({0})", "({0}).startsWith('a')", "({0}).endsWith('b')",
    "({0}).contains('a')", "({0}).matches('^[0-9]+$')", "({0}).lowerAscii()", "({0}).trim()",
    "({0}).split(',')", "({0}).charAt(1)", "({0}).indexOf('b')", "({0}).substring(1)",
    "({0}).join(', ')", "({0}).find('[0-9]+')", "({0}).min()", "({0}).max()", "({0}).sum()",
    "({0}).isSorted()", "quantity({0})", "isQuantity({0})", "quantity({0}).isInteger()",
    "quantity({0}).asInteger()", "quantity({0}).sign()", "quantity({0}).asApproximateFloat()",
    "({0}) * 2", "({0}) * -1", "[{0}]", "{{'k': {0}}}",
    "({0}).all(x, {1})", "({0}).exists(x, {1})", "({0}).exists_one(x, {1})",
    "({0}).map(x, {1})", "({0}).filter(x, {1})",
]  # fmt: skip
BINARY = [
    "({0} + {1})", "({0} - {1})", "({0} / {1})", "({0} % {1})", "({0} == {1})", "({0} != {1})",
    "({0} < {1})", "({0} <= {1})", "({0} > {1})", "({0} >= {1})", "({0} in {1})",
    "({0} && {1})", "({0} || {1})", "({0} ? {1} : {2})", "({0})[{1}]", "[{0}, {1}]",
    "quantity({0}).compareTo(quantity({1}))", "quantity({0}).add({1})",
    "quantity({0}).isGreaterThan(quantity({1}))", "({0}).indexOf({1})",
]  # fmt: skip


def _expressions(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    def fill(form: str) -> st.SearchStrategy[str]:
        return st.tuples(children, children, children, FIELDS).map(
            lambda p: form.format(p[0], p[1], p[2], f=p[3])
        )

    return st.sampled_from(UNARY + BINARY).flatmap(fill)


EXPRESSIONS = st.recursive(ATOMS, _expressions, max_leaves=12)


@settings(max_examples=600, deadline=None)
@given(expr=EXPRESSIONS, obj=OBJECTS, param=JSON)
def test_random_expressions_agree_with_the_interpreter(expr: str, obj: dict, param: Any) -> None:
    agree(expr, object=obj, params={"p": param})


@settings(max_examples=200, deadline=None)
@given(value=JSON)
def test_to_cel_is_json_to_cel(value: Any) -> None:
    converted, expected = to_cel(value), celpy.json_to_cel(value)
    assert (type(converted), repr(converted)) == (type(expected), repr(expected))


# ---- every policy we ship, benchmark and test runs compiled -----------------------------------


def _test_file_expressions() -> list[str]:
    """The CEL of the policies written inline in test_policy_engine.py (YAML strings)."""
    source = (ROOT / "tests" / "unit" / "test_policy_engine.py").read_text()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                data = yaml.safe_load(node.value.replace("\n    ", "\n"))
            except yaml.YAMLError:
                continue
            found += _expressions_in(data)
    return found


def _expressions_in(data: Any) -> list[str]:
    if isinstance(data, dict):
        found = [v for k, v in data.items() if k in ("expression", "messageExpression")]
        return [e for e in found if isinstance(e, str)] + _expressions_in(list(data.values()))
    if isinstance(data, list):
        return [e for item in data for e in _expressions_in(item)]
    return []


def test_shipped_benchmark_and_fixture_policies_run_compiled() -> None:
    shipped = shipped_documents(read_shipped_policies())
    bench = parse_policy_file(REPO_POLICIES, REPO_POLICY_FILE, "repo")
    with_bench = compile_policies(effective_policies(shipped, bench))
    with_fixture = compile_policies(effective_policies(shipped, _fixture_policies()))
    assert (len(with_bench), len(with_fixture)) == (7 + 20, 7 + 2)
    assert interpreted(with_bench) == interpreted(with_fixture) == []  # none falls back


def _fixture_policies() -> list:
    folder = ROOT / "fixtures" / "config-repo" / "policies"
    return [
        doc for path in sorted(folder.glob("*.yaml"))
        for doc in parse_policy_file(path.read_text(), str(path), "repo")
    ]  # fmt: skip


def test_the_engine_tests_policies_compile() -> None:
    expressions = _test_file_expressions()
    assert len(expressions) > 20
    compiled = 0
    for text in expressions:
        try:
            tree = ENV.compile(text)
        except celpy.CELParseError:
            continue  # the compile-error tests' own
        compile_program(tree, FUNCTIONS)  # raises Unsupported if it would be interpreted
        compiled += 1
    assert compiled >= len(expressions) - 2


def test_what_is_left_to_the_interpreter_says_so() -> None:
    for expr in ("google.protobuf.Int32Value{value: 1}", ".object", "dyn(1)",
                 "[1].reduce(r, i, 0, r + i)", "has(object.a, 1)"):  # fmt: skip
        with pytest.raises(Unsupported):
            compile_program(ENV.compile(expr), FUNCTIONS)


def test_policy_test_cases_give_the_same_findings_compiled_and_interpreted() -> None:
    shipped = shipped_documents(read_shipped_policies())
    effective = effective_policies(shipped, _fixture_policies())
    cases = [
        case
        for folder in (ROOT / "policies" / "tests", ROOT / "fixtures/config-repo/policies/tests")
        for path in sorted(folder.glob("*.yaml"))
        for case in parse_test_file(path.read_text(), str(path), default_params())
    ]
    assert len(cases) > 10
    compiled = run_cases(compile_policies(effective), cases)
    reference = run_cases(compile_policies(effective, interpret=True), cases)
    assert [r.findings for r in compiled] == [r.findings for r in reference]
    assert all(r.passed for r in compiled)
