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
- a function returns its errors as CEL error values (cel_calls.py, the convention this module
  and k8s_quantity.py, the quantity library, share).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from itertools import pairwise
from types import MappingProxyType
from typing import Any, Final

import re2  # RE2, as the API server: celpy itself depends on it for matches()
from celpy import celtypes

from reconciler.policy.cel_calls import Failed, as_int, as_list, as_string, cel, plain, type_name
from reconciler.policy.cost import PER_CALL_LIMIT, STRING_TRAVERSAL
from reconciler.policy.k8s_quantity import FUNCTIONS as QUANTITY_FUNCTIONS

# The longest string a call may build: writing it would cost the whole per-call budget in
# cel-go's units (0.1 a character), 10,000,000 characters.
MAX_BUILT_CHARS: Final = int(PER_CALL_LIMIT / STRING_TRAVERSAL)
# Go's unicode.IsSpace, which strings.TrimSpace uses (Python's str.strip() also strips \x1c-\x1f).
GO_SPACE: Final = "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    map(chr, range(0x2000, 0x200B))
)
_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_UPPER: Final = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


# ---- extended strings library (indices count code points, as Go's runes) ----


def _index_error(index: int) -> Failed:
    return Failed(f"index out of range: {index}")


@cel("charAt")
def char_at(text: Any, index: Any) -> celtypes.StringType:
    s, i = as_string(text), as_int(index)
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


@cel("indexOf")
def index_of(target: Any, wanted: Any, *start: Any) -> celtypes.IntType:
    if isinstance(target, list) and not start:
        return celtypes.IntType(_list_index_of(target, wanted, reverse=False))
    offset = as_int(start[0]) if len(start) == 1 else None
    if len(start) > 1:
        raise TypeError
    return celtypes.IntType(_string_index_of(as_string(target), as_string(wanted), offset))


@cel("lastIndexOf")
def last_index_of(target: Any, wanted: Any, *last: Any) -> celtypes.IntType:
    if isinstance(target, list) and not last:
        return celtypes.IntType(_list_index_of(target, wanted, reverse=True))
    offset = as_int(last[0]) if len(last) == 1 else None
    if len(last) > 1:
        raise TypeError
    return celtypes.IntType(_string_last_index_of(as_string(target), as_string(wanted), offset))


@cel("lowerAscii")
def lower_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType(as_string(text).translate(_LOWER))


@cel("upperAscii")
def upper_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType(as_string(text).translate(_UPPER))


@cel("replace")
def replace(text: Any, old: Any, new: Any, *limit: Any) -> celtypes.StringType:
    # Python's str.replace matches Go's strings.Replace, also for "" and a negative count.
    count = as_int(limit[0]) if limit else -1
    if len(limit) > 1:
        raise TypeError
    s, o, n = as_string(text), as_string(old), as_string(new)
    hits = len(s) + 1 if o == "" else s.count(o)  # counted before anything is built
    _buildable(len(s) + (hits if count < 0 else min(hits, count)) * (len(n) - len(o)))
    return celtypes.StringType(s.replace(o, n, count))  # s.replace(x, s) squares it


def _buildable(size: int) -> None:
    """Refuses a result counted before it is built, past MAX_BUILT_CHARS."""
    if size > MAX_BUILT_CHARS:
        raise Failed(f"the result would be {size:,} characters, over {MAX_BUILT_CHARS:,}")


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


@cel("split")
def split(text: Any, sep: Any, *limit: Any) -> celtypes.ListType:
    count = as_int(limit[0]) if limit else -1
    if len(limit) > 1:
        raise TypeError
    parts = _split(as_string(text), as_string(sep), count)
    return celtypes.ListType([celtypes.StringType(part) for part in parts])


@cel("substring")
def substring(text: Any, start: Any, *end: Any) -> celtypes.StringType:
    s, begin = as_string(text), as_int(start)
    stop = as_int(end[0]) if end else len(s)
    if len(end) > 1:
        raise TypeError
    if begin > stop:
        raise Failed(f"invalid substring range. start: {begin}, end: {stop}")
    for index in (begin, stop):
        if not 0 <= index <= len(s):
            raise _index_error(index)
    return celtypes.StringType(s[begin:stop])


@cel("trim")
def trim(text: Any) -> celtypes.StringType:
    return celtypes.StringType(as_string(text).strip(GO_SPACE))


@cel("join")
def join(items: Any, *separator: Any) -> celtypes.StringType:
    sep = as_string(separator[0]) if separator else ""
    if len(separator) > 1:
        raise TypeError
    parts = as_list(items)
    for position, part in enumerate(parts):
        if not isinstance(part, str):
            raise Failed(f"element {position} is {type_name(part)}, not string")
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
            return plain(left) == plain(right)  # Python compares int and float exactly
        return False


@cel("isSorted")
def is_sorted(items: Any) -> celtypes.BoolType:
    return celtypes.BoolType(all(a <= b for a, b in pairwise(as_list(items))))


@cel("sum")
def sum_(items: Any) -> Any:
    values = as_list(items)
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
    values = as_list(items)
    if not values:
        raise Failed("empty list")
    return pick(values)


@cel("min")
def min_(items: Any) -> Any:
    return _extreme(items, min)


@cel("max")
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
        raise Failed(f"invalid regex {pattern!r}: {detail}".rstrip(": ")) from None


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


@cel("find")
def find(text: Any, pattern: Any) -> celtypes.StringType:
    match = _regex(as_string(pattern)).search(as_string(text))
    return celtypes.StringType(match.group(0) if match else "")


@cel("findAll")
def find_all(text: Any, pattern: Any, *limit: Any) -> celtypes.ListType:
    count = as_int(limit[0]) if limit else -1
    if len(limit) > 1:
        raise TypeError
    matches = _find_all(as_string(text), as_string(pattern), count)
    return celtypes.ListType([celtypes.StringType(m) for m in matches])


FUNCTIONS: Mapping[str, Callable[..., Any]] = MappingProxyType(
    {
        **QUANTITY_FUNCTIONS,
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
