"""The Kubernetes CEL helpers policy authors reach for first, for celpy (pure: no I/O).

Pass `FUNCTIONS` as `env.program(ast, functions=FUNCTIONS)`. Semantics follow
https://kubernetes.io/docs/reference/using-api/cel/ : the quantity library, the extended strings
library (cel-go ext.Strings, version 2), the lists library and the regex library.

How celpy 0.5 calls these (why each name is one callable that dispatches itself):
- a member call `x.f(a)` becomes `FUNCTIONS["f"](x, a)`, a global call `f(a)` becomes
  `FUNCTIONS["f"](a)`; celpy does not tell them apart, and holds one callable per name, so
  overloads by arity or by receiver type ("abc".indexOf vs [1].indexOf) are resolved here;
- `x.min()` never arrives here: celpy's interpreter treats `min` as a built-in macro (Python
  `min`, an error on an empty list), which has the same meaning;
- a function should *return* a `CELEvalError`, not raise it: a returned error is a CEL error
  value, which `||`, `&&` and the macros absorb as CEL requires (`true || x.charAt(9) == ""`),
  and `Runner.evaluate` raises it if it is the result. A raised one escapes the evaluator.
  `_cel` turns our TypeError/ValueError into such values with a message naming the call.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from types import MappingProxyType
from typing import Any, Final

import re2  # RE2, as the API server: celpy itself depends on it for matches()
from celpy import celtypes
from celpy.evaluation import CELEvalError

from reconciler.compile.quantity import QuantityError, parse_quantity
from reconciler.policy.cost import PER_CALL_LIMIT, STRING_TRAVERSAL

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
NANO: Final = 10**9
# The longest string a call may build: writing it would cost the whole per-call budget in
# cel-go's units (0.1 a character), 10,000,000 characters.
MAX_BUILT_CHARS: Final = int(PER_CALL_LIMIT / STRING_TRAVERSAL)
# Go's unicode.IsSpace, which strings.TrimSpace uses (Python's str.strip() also strips \x1c-\x1f).
GO_SPACE: Final = "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    map(chr, range(0x2000, 0x200B))
)
_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_UPPER: Final = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


class _Failed(Exception):
    """A CEL evaluation error with its message; `_cel` returns it as a CELEvalError value."""


# ---- calling convention ----


def _cel(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Errors become returned CELEvalError values naming the call (see the module docstring)."""

    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def call(*args: Any) -> Any:
            try:
                return function(*args)
            except _Failed as failed:
                return CELEvalError(f"{name}: {failed}")
            except TypeError:  # wrong arity or argument types, as celpy reports its own
                return CELEvalError(f"no such overload: {name}({_type_names(args)})")
            except ValueError as error:  # celtypes int64 overflow
                return CELEvalError(f"{name}: {error}")

        return call

    return wrap


def _type_names(args: Sequence[Any]) -> str:
    return ", ".join(_type_name(arg) for arg in args)


def _type_name(value: Any) -> str:
    names = {
        celtypes.BoolType: "bool",
        celtypes.IntType: "int",
        celtypes.UintType: "uint",
        celtypes.DoubleType: "double",
        celtypes.StringType: "string",
        celtypes.ListType: "list",
        celtypes.MapType: "map",
        Quantity: "Quantity",
    }
    return names.get(type(value), type(value).__name__)


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError
    return str(value)  # plain, so that messages show 'abc', not StringType('abc')


def _int(value: Any) -> int:
    # BoolType is an int subclass in celpy, but not an int in CEL.
    if isinstance(value, bool | celtypes.BoolType) or not isinstance(value, int):
        raise TypeError
    return int(value)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError
    return value


# ---- quantity library ----


@dataclass(frozen=True)
class Quantity:
    """A Kubernetes resource.Quantity: an exact value, equal (==) by value as in Kubernetes.

    Always whole nanos: parse_quantity rounds to them, and add/sub add whole nanos or ints."""

    value: Fraction

    def __str__(self) -> str:
        nanos = int(self.value * NANO)  # exact: whole nanos
        whole, fraction = divmod(abs(nanos), NANO)
        sign = "-" if nanos < 0 else ""
        return f"{sign}{whole}" + (f".{fraction:09d}".rstrip("0") if fraction else "")


def _parse(raw: Any) -> Quantity:
    """A Kubernetes quantity from a string; ints and doubles too, as YAML may hold `cpu: 8`."""
    return _parsed(_quantity_source(raw))


@functools.lru_cache(maxsize=1024, typed=True)  # Pods of a cluster name few distinct amounts
def _parsed(text: str | int | float) -> Quantity:  # a Quantity is immutable; errors not kept
    try:
        return Quantity(Fraction(parse_quantity(text)))  # whole nanos already
    except QuantityError as error:
        raise _Failed(str(error)) from None


def _quantity_source(raw: Any) -> str | int | float:
    """Plain Python values, so that messages show '12Q', not StringType('12Q')."""
    if isinstance(raw, bool | celtypes.BoolType):
        raise TypeError
    if isinstance(raw, str):
        return str(raw)
    if isinstance(raw, int | float):
        return _plain(raw)
    raise TypeError


def _quantity(value: Any) -> Quantity:
    if not isinstance(value, Quantity):
        raise TypeError
    return value


def _operand(value: Any) -> Fraction:
    """add/sub take a Quantity or an int."""
    if isinstance(value, Quantity):
        return value.value
    return Fraction(_int(value))


@_cel("quantity")
def quantity(text: Any) -> Quantity:
    return _parse(text)


@_cel("isQuantity")
def is_quantity(text: Any) -> celtypes.BoolType:
    try:
        _parse(text)
    except _Failed:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _as_int64(q: Quantity) -> int | None:
    value = q.value
    if value.denominator == 1 and INT64_MIN <= value.numerator <= INT64_MAX:
        return value.numerator
    return None


@_cel("isInteger")
def is_integer(q: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_as_int64(_quantity(q)) is not None)


@_cel("asInteger")
def as_integer(q: Any) -> celtypes.IntType:
    value = _as_int64(_quantity(q))
    if value is None:
        raise _Failed(f"cannot convert quantity {q} to an int64 without loss")
    return celtypes.IntType(value)


@_cel("asApproximateFloat")
def as_approximate_float(q: Any) -> celtypes.DoubleType:
    value = _quantity(q).value
    try:
        return celtypes.DoubleType(float(value))
    except OverflowError:  # as Go's AsApproximateFloat64: beyond float64 is ±Inf
        return celtypes.DoubleType(math.inf if value > 0 else -math.inf)


@_cel("sign")
def sign(q: Any) -> celtypes.IntType:
    value = _quantity(q).value
    return celtypes.IntType((value > 0) - (value < 0))


@_cel("add")
def add(q: Any, other: Any) -> Quantity:
    return Quantity(_quantity(q).value + _operand(other))


@_cel("sub")
def sub(q: Any, other: Any) -> Quantity:
    return Quantity(_quantity(q).value - _operand(other))


def _compare(q: Any, other: Any) -> int:
    left, right = _quantity(q).value, _quantity(other).value
    return (left > right) - (left < right)


@_cel("isGreaterThan")
def is_greater_than(q: Any, other: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(q, other) > 0)


@_cel("isLessThan")
def is_less_than(q: Any, other: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(q, other) < 0)


@_cel("compareTo")
def compare_to(q: Any, other: Any) -> celtypes.IntType:
    return celtypes.IntType(_compare(q, other))


# ---- extended strings library (indices count code points, as Go's runes) ----


def _index_error(index: int) -> _Failed:
    return _Failed(f"index out of range: {index}")


@_cel("charAt")
def char_at(text: Any, index: Any) -> celtypes.StringType:
    s, i = _string(text), _int(index)
    if not 0 <= i <= len(s):
        raise _index_error(i)
    return celtypes.StringType(s[i : i + 1])  # at len(s): "" (cel-go)


def _string_index_of(s: str, sub: str, start: int | None) -> int:
    if start is None:
        start = 0
    elif start < 0:
        raise _index_error(start)
    if sub == "":
        return start
    return s.find(sub, start)  # past the end: -1 (current cel-go, older ones errored)


def _string_last_index_of(s: str, sub: str, last: int | None) -> int:
    if last is None:
        return len(s) if sub == "" else s.rfind(sub)
    if last < 0:
        raise _index_error(last)
    if sub == "":
        return last
    # `last` is the last position a match may start at.
    return s.rfind(sub, 0, last + len(sub)) if last < len(s) else -1


def _list_index_of(items: list[Any], wanted: Any, reverse: bool) -> int:
    positions = range(len(items) - 1, -1, -1) if reverse else range(len(items))
    return next((i for i in positions if _equal(items[i], wanted)), -1)


@_cel("indexOf")
def index_of(target: Any, wanted: Any, *start: Any) -> celtypes.IntType:
    if isinstance(target, list) and not start:
        return celtypes.IntType(_list_index_of(target, wanted, reverse=False))
    offset = _int(start[0]) if len(start) == 1 else None
    if len(start) > 1:
        raise TypeError
    return celtypes.IntType(_string_index_of(_string(target), _string(wanted), offset))


@_cel("lastIndexOf")
def last_index_of(target: Any, wanted: Any, *last: Any) -> celtypes.IntType:
    if isinstance(target, list) and not last:
        return celtypes.IntType(_list_index_of(target, wanted, reverse=True))
    offset = _int(last[0]) if len(last) == 1 else None
    if len(last) > 1:
        raise TypeError
    return celtypes.IntType(_string_last_index_of(_string(target), _string(wanted), offset))


@_cel("lowerAscii")
def lower_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType(_string(text).translate(_LOWER))


@_cel("upperAscii")
def upper_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType(_string(text).translate(_UPPER))


@_cel("replace")
def replace(text: Any, old: Any, new: Any, *limit: Any) -> celtypes.StringType:
    # Python's str.replace matches Go's strings.Replace, also for "" and a negative count.
    count = _int(limit[0]) if limit else -1
    if len(limit) > 1:
        raise TypeError
    s, o, n = _string(text), _string(old), _string(new)
    hits = len(s) + 1 if o == "" else s.count(o)  # counted before anything is built
    _buildable(len(s) + (hits if count < 0 else min(hits, count)) * (len(n) - len(o)))
    return celtypes.StringType(s.replace(o, n, count))  # s.replace(x, s) squares it


def _buildable(size: int) -> None:
    """Refuses a result counted before it is built, past MAX_BUILT_CHARS."""
    if size > MAX_BUILT_CHARS:
        raise _Failed(f"the result would be {size:,} characters, over {MAX_BUILT_CHARS:,}")


def _split(s: str, sep: str, limit: int) -> list[str]:
    """Go's strings.SplitN: 0 gives [], a negative limit splits all, "" splits characters."""
    if limit == 0:
        return []
    if sep == "":
        parts = list(s)
        if 0 < limit < len(parts):
            parts = [*parts[: limit - 1], "".join(parts[limit - 1 :])]
        return parts
    return s.split(sep, limit - 1 if limit > 0 else -1)


@_cel("split")
def split(text: Any, sep: Any, *limit: Any) -> celtypes.ListType:
    count = _int(limit[0]) if limit else -1
    if len(limit) > 1:
        raise TypeError
    parts = _split(_string(text), _string(sep), count)
    return celtypes.ListType([celtypes.StringType(part) for part in parts])


@_cel("substring")
def substring(text: Any, start: Any, *end: Any) -> celtypes.StringType:
    s, begin = _string(text), _int(start)
    stop = _int(end[0]) if end else len(s)
    if len(end) > 1:
        raise TypeError
    if begin > stop:
        raise _Failed(f"invalid substring range. start: {begin}, end: {stop}")
    for index in (begin, stop):
        if not 0 <= index <= len(s):
            raise _index_error(index)
    return celtypes.StringType(s[begin:stop])


@_cel("trim")
def trim(text: Any) -> celtypes.StringType:
    return celtypes.StringType(_string(text).strip(GO_SPACE))


@_cel("join")
def join(items: Any, *separator: Any) -> celtypes.StringType:
    sep = _string(separator[0]) if separator else ""
    if len(separator) > 1:
        raise TypeError
    parts = _list(items)
    for position, part in enumerate(parts):
        if not isinstance(part, str):
            raise _Failed(f"element {position} is {_type_name(part)}, not string")
    _buildable(sum(map(len, parts)) + len(sep) * max(0, len(parts) - 1))  # a long separator
    return celtypes.StringType(sep.join(parts))


# ---- lists library ----


def _equal(left: Any, right: Any) -> bool:
    """CEL equality: a bool is never a number; 1 == 1.0 (celpy raises TypeError there)."""
    if isinstance(left, bool | celtypes.BoolType) != isinstance(right, bool | celtypes.BoolType):
        return False
    try:
        return bool(left == right)
    except TypeError:
        numbers = (int, float)
        if isinstance(left, numbers) and isinstance(right, numbers):
            return _plain(left) == _plain(right)  # Python compares int and float exactly
        return False


def _plain(number: int | float) -> int | float:
    return int(number) if isinstance(number, int) else float(number)


@_cel("isSorted")
def is_sorted(items: Any) -> celtypes.BoolType:
    return celtypes.BoolType(all(a <= b for a, b in pairwise(_list(items))))


@_cel("sum")
def sum_(items: Any) -> Any:
    values = _list(items)
    if not values:
        return celtypes.IntType(0)
    if not all(_summable(value) for value in values):
        raise TypeError  # celtypes would concatenate strings and lists
    # celtypes arithmetic: int64 overflow is a ValueError, int + double a TypeError, as in CEL.
    total = functools.reduce(operator.add, values)
    # DoubleType + DoubleType is a plain float in celpy.
    return celtypes.DoubleType(total) if type(total) is float else total


def _summable(value: Any) -> bool:
    if isinstance(value, bool | celtypes.BoolType):
        return False
    return isinstance(value, int | float | celtypes.DurationType)


def _extreme(items: Any, pick: Callable[..., Any]) -> Any:
    values = _list(items)
    if not values:
        raise _Failed("empty list")
    return pick(values)


@_cel("min")
def min_(items: Any) -> Any:
    return _extreme(items, min)


@_cel("max")
def max_(items: Any) -> Any:
    return _extreme(items, max)


# ---- regex library (RE2, like the API server; Python's re would accept backreferences) ----

_RE2_OPTIONS: Final = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is a CEL error, not a line on stderr


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as error:
        detail = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else ""
        raise _Failed(f"invalid regex {pattern!r}: {detail}".rstrip(": ")) from None


def _find_all(text: str, pattern: str, limit: int) -> list[str]:
    """Go's FindAllString: whole matches, but no empty match right after the previous one."""
    found: list[str] = []
    previous_end = -1
    for match in _regex(pattern).finditer(text):
        start, end = match.span()
        if start == end == previous_end:
            continue
        previous_end = end
        if 0 <= limit <= len(found):
            break
        found.append(match.group(0))
    return found


@_cel("find")
def find(text: Any, pattern: Any) -> celtypes.StringType:
    match = _regex(_string(pattern)).search(_string(text))
    return celtypes.StringType(match.group(0) if match else "")


@_cel("findAll")
def find_all(text: Any, pattern: Any, *limit: Any) -> celtypes.ListType:
    count = _int(limit[0]) if limit else -1
    if len(limit) > 1:
        raise TypeError
    matches = _find_all(_string(text), _string(pattern), count)
    return celtypes.ListType([celtypes.StringType(m) for m in matches])


FUNCTIONS: Mapping[str, Callable[..., Any]] = MappingProxyType(
    {
        "quantity": quantity,
        "isQuantity": is_quantity,
        "isInteger": is_integer,
        "asInteger": as_integer,
        "asApproximateFloat": as_approximate_float,
        "sign": sign,
        "add": add,
        "sub": sub,
        "isGreaterThan": is_greater_than,
        "isLessThan": is_less_than,
        "compareTo": compare_to,
        "charAt": char_at,
        "indexOf": index_of,
        "lastIndexOf": last_index_of,
        "lowerAscii": lower_ascii,
        "upperAscii": upper_ascii,
        "replace": replace,
        "split": split,
        "substring": substring,
        "trim": trim,
        "join": join,
        "isSorted": is_sorted,
        "sum": sum_,
        "min": min_,
        "max": max_,
        "find": find,
        "findAll": find_all,
    }
)
DECLARED_NAMES: frozenset[str] = frozenset(FUNCTIONS)
