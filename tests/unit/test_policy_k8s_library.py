"""The Kubernetes CEL helpers, through real CEL expressions evaluated by celpy."""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import celpy
import pytest
from celpy.evaluation import CELEvalError, base_functions
from hypothesis import given
from hypothesis import strategies as st

from reconciler.policy.k8s_library import DECLARED_NAMES, FUNCTIONS

ENV = celpy.Environment()  # building the parser takes ~0.2 s: once per module


@functools.cache
def _program(expr: str) -> Any:
    return ENV.program(ENV.compile(expr), functions=FUNCTIONS)  # as the engine passes it


def evaluate(expr: str, **activation: Any) -> Any:
    return _program(expr).evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()})


POD = {"spec": {"containers": [{"resources": {"requests": {"memory": "2Gi", "cpu": "500m"}}}]}}


@pytest.mark.parametrize(
    "expr",
    [
        # quantity
        'quantity(object.spec.containers[0].resources.requests.memory).isGreaterThan(quantity("1Gi"))',
        'quantity(object.spec.containers[0].resources.requests.cpu).isLessThan(quantity("1"))',
        'quantity("1.5").isInteger() == false',
        'quantity("500m").add(quantity("1500m")).asInteger() == 2',
        'quantity("50k").add(20) == quantity("50020")',
        'quantity("50k").sub(20000).asApproximateFloat() == 30000.0',
        'quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20")',
        'quantity("200M") == quantity("0.2G")',
        'quantity("200M").compareTo(quantity("0.2G")) == 0',
        'quantity("50M").compareTo(quantity("50Mi")) == -1',
        'quantity("50Mi").compareTo(quantity("50M")) == 1',
        'quantity("1e3") == quantity("1k")',
        'quantity("100n").add(quantity("900u")).isInteger() == false',
        'quantity("-3Ki").sign() == -1 && quantity("0").sign() == 0 && sign(quantity("2")) == 1',
        'quantity("50000000G").isInteger()',
        'quantity("9999999999999999999999999999999999999G").isInteger() == false',
        # exact: a double would lose the trailing 1
        'quantity("100000000000000000000").add(1).sub(quantity("1e20")).asInteger() == 1',
        'quantity("1e400").asApproximateFloat() > 1.0e308',
        # Kubernetes rounds below a nano up to a whole nano
        'quantity("0.0000000001") == quantity("1n")',
        'isQuantity("1.3Gi") && isQuantity("10000k") && isQuantity("+1E")',
        '!isQuantity("200K") && !isQuantity("1,3G") && !isQuantity("1e3Gi")',
        # as ParseQuantity: a suffix alone is 0, but "Pi" and "Ei" take the path that wants a digit
        'quantity("Mi") == quantity("0") && !isQuantity("Pi")',
        '!isQuantity(" 1") && !isQuantity("")',
        # extended strings
        '"Hello".lowerAscii() == "hello"',
        '"TacoCÆt Xii".upperAscii() == "TACOCÆT XII"',
        '"a,b,c".split(",") == ["a", "b", "c"]',
        '"hello hello hello".split(" ", 2) == ["hello", "hello hello"]',
        '"hello".split(" ", 0) == [] && "abc".split("") == ["a", "b", "c"]',
        '["a", "b"].join("-") == "a-b" && ["a", "b"].join() == "ab" && [].join("/") == ""',
        '"hello".charAt(4) == "o" && "hello".charAt(5) == ""',
        '"héllo".charAt(1) == "é" && "héllo".indexOf("l") == 2',
        '"abc".indexOf("c") == 2',
        '"hello mellow".indexOf("") == 0 && "hello mellow".indexOf("", 2) == 2',
        '"hello mellow".indexOf("ello", 2) == 7 && "hello mellow".indexOf("jello") == -1',
        '"hello mellow".lastIndexOf("ello") == 7 && "hello mellow".lastIndexOf("ello", 6) == 1',
        '"hello mellow".lastIndexOf("") == 12',
        '"hello hello".replace("he", "we") == "wello wello"',
        '"hello hello".replace("he", "we", 1) == "wello hello"',
        '"hello hello".replace("he", "we", 0) == "hello hello"',
        '"tacocat".substring(4) == "cat" && "tacocat".substring(0, 4) == "taco"',
        '"  \\ttrim\\n    ".trim() == "trim"',
        # lists
        "[1, 3, 2].isSorted() == false && [1, 2, 2].isSorted() && [].isSorted()",
        '["a", "b", "b", "c"].isSorted()',
        "[1, 2, 3].sum() == 6 && [1.0, 3.0].sum() == 4.0 && [].sum() == 0",
        "[1, 3].min() == 1 && [1, 3].max() == 3",
        "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2",
        '["a", "b"].indexOf("c") == -1 && [[1], [2]].indexOf([2]) == 1',
        "[1.0, 2.0].indexOf(2) == 1 && [true, 1].indexOf(1) == 1",
        # regex
        '"abc123".find("[0-9]+") == "123" && "abc".find("[0-9]+") == ""',
        '"a1b22c333".findAll("[0-9]+") == ["1", "22", "333"]',
        '"a1b22c333".findAll("[0-9]+", 2) == ["1", "22"]',
        '"a1b22c333".findAll("[0-9]+", 0) == []',
        '"abab".findAll("(a)(b)") == ["ab", "ab"]',
        # Go drops an empty match right after a match (Python would give ["ab", "", "c", ""])
        '"ab c".findAll("\\\\w*") == ["ab", "c"]',
        # an error value is absorbed by || as CEL requires
        'true || "abc".charAt(10) == "a"',
        '"abc".charAt(10) == "a" || true',
        '["x", "abcdefq"].exists(s, s.charAt(6) == "q")',
    ],
)
def test_expression_is_true(expr: str) -> None:
    assert evaluate(expr, object=POD) == celpy.celtypes.BoolType(True)


def test_results_are_cel_values() -> None:
    assert isinstance(evaluate('"a,b".split(",")'), celpy.celtypes.ListType)
    assert isinstance(evaluate('"a,b".split(",")')[0], celpy.celtypes.StringType)
    assert isinstance(evaluate('quantity("1").asInteger()'), celpy.celtypes.IntType)
    assert isinstance(evaluate('quantity("1").asApproximateFloat()'), celpy.celtypes.DoubleType)
    assert isinstance(evaluate("[1.5, 2.5].sum()"), celpy.celtypes.DoubleType)
    assert evaluate('string(quantity("1.5Gi"))') == "1610612736"
    assert evaluate('string(quantity("-1500m"))') == "-1.5"


def test_quantity_also_takes_yaml_numbers() -> None:
    # A nodeDefinition in git may say `cpu: 8` or `memory: 0.5`; Kubernetes objects never do.
    assert evaluate("quantity(cpu).asInteger() == 8", cpu=8)
    assert evaluate('quantity(cpu) == quantity("500m")', cpu=0.5)
    with pytest.raises(CELEvalError, match="no such overload: isQuantity"):
        evaluate("isQuantity(flag)", flag=True)


def test_go_whitespace_for_trim() -> None:
    # Python's str.strip() would also take the ASCII separators \x1c-\x1f; Go's TrimSpace does not.
    assert evaluate("text.trim()", text="\u00a0\u3000a\x1c\n") == "a\x1c"


def test_min_is_celpy_macro_with_the_same_meaning() -> None:
    assert evaluate("[3, 1, 2].min()") == 1
    with pytest.raises(CELEvalError):
        evaluate("[].min()")


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ('quantity("12Q")', "quantity: '12Q' is not a quantity"),
        ('quantity(" 1Gi")', "quantity: ' 1Gi' is not a quantity"),
        ('quantity("1e5000")', "quantity: '1e5000' is out of range"),
        ('quantity("1.5").asInteger()', "asInteger: cannot convert quantity 1.5"),
        ('quantity("9223372036854775808").asInteger()', "asInteger: cannot convert"),
        ('quantity("1").add("2")', "no such overload: add(Quantity, string)"),
        ('quantity("1").isGreaterThan(1)', "no such overload: isGreaterThan(Quantity, int)"),
        ('"abc".charAt(10)', "charAt: index out of range: 10"),
        ('"abc".charAt(-1)', "charAt: index out of range: -1"),
        ('"abc".charAt()', "no such overload: charAt(string)"),
        ('"abc".indexOf("a", -1)', "indexOf: index out of range: -1"),
        ('"abc".lastIndexOf("a", -1)', "lastIndexOf: index out of range: -1"),
        ('"tacocat".substring(-1)', "substring: index out of range: -1"),
        ('"tacocat".substring(2, 1)', "substring: invalid substring range. start: 2, end: 1"),
        ('"tacocat".substring(0, 8)', "substring: index out of range: 8"),
        ('["a", 1].join()', "join: element 1 is int, not string"),
        ('["a", "b"].sum()', "no such overload: sum(list)"),
        ("[9223372036854775807, 1].sum()", "sum: overflow"),
        ("[].max()", "max: empty list"),
        ('"abc".find("[")', "find: invalid regex '['"),
        # RE2, as the API server: no backreferences (Python's re would accept this)
        ('"aa".findAll("(a)\\\\1")', "findAll: invalid regex"),
    ],
)
def test_errors_are_cel_eval_errors(expr: str, message: str) -> None:
    with pytest.raises(CELEvalError) as raised:
        evaluate(expr)
    assert message in str(raised.value.args[0])


def test_quantity_has_no_ordering_operators_as_in_kubernetes() -> None:
    with pytest.raises(CELEvalError):
        evaluate('quantity("1") < quantity("2")')


def test_declared_names() -> None:
    assert set(DECLARED_NAMES) == set(FUNCTIONS)
    assert {"quantity", "isQuantity", "charAt", "indexOf", "join", "isSorted", "findAll"} <= (
        DECLARED_NAMES
    )
    # A name in celpy's base functions would replace celpy's own (size, contains, matches...).
    assert not DECLARED_NAMES & set(base_functions)


_SCALE = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
}
_QUANTITIES = st.tuples(st.integers(-(10**6), 10**6), st.sampled_from(sorted(_SCALE)))


@given(_QUANTITIES, _QUANTITIES)
def test_quantity_order_agrees_with_the_value(
    left: tuple[int, str], right: tuple[int, str]
) -> None:
    a, b = (number * _SCALE[suffix] for number, suffix in (left, right))
    result = evaluate(
        "[quantity(a).compareTo(quantity(b)), quantity(a).isLessThan(quantity(b)) ? 1 : 0,"
        " quantity(a) == quantity(b) ? 1 : 0]",
        a=f"{left[0]}{left[1]}",
        b=f"{right[0]}{right[1]}",
    )
    assert list(result) == [(a > b) - (a < b), int(a < b), int(a == b)]


@given(st.text(max_size=20), st.text(min_size=1, max_size=3))
def test_split_join_round_trip(text: str, sep: str) -> None:
    assert evaluate("text.split(sep).join(sep) == text", text=text, sep=sep)


@given(st.lists(st.integers(-1000, 1000), max_size=8))
def test_list_helpers_agree_with_python(items: list[int]) -> None:
    result = evaluate("[items.isSorted(), items.sum(), items.indexOf(7), items.lastIndexOf(7)]",
                      items=items)  # fmt: skip
    first = items.index(7) if 7 in items else -1
    last = len(items) - 1 - items[::-1].index(7) if 7 in items else -1
    assert list(result) == [items == sorted(items), sum(items), first, last]
