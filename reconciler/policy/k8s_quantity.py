"""The Kubernetes CEL quantity library for celpy (pure: no I/O): `quantity()`,
`isQuantity()` and the methods of a Quantity, as https://kubernetes.io/docs/reference/using-api/cel/
describes them, on the one quantity parser (kuberules/quantity.py). k8s_library.FUNCTIONS
registers them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Final

from celpy import celtypes

from reconciler.kuberules.quantity import QuantityError, parse_quantity
from reconciler.policy.cel_calls import Failed, as_int, cel, plain

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
NANO: Final = 10**9


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
        raise Failed(str(error)) from None


def _quantity_source(raw: Any) -> str | int | float:
    """Plain Python values, so that messages show '12Q', not StringType('12Q')."""
    if isinstance(raw, bool | celtypes.BoolType):
        raise TypeError
    if isinstance(raw, str):
        return str(raw)
    if isinstance(raw, int | float):
        return plain(raw)
    raise TypeError


def _quantity(value: Any) -> Quantity:
    if not isinstance(value, Quantity):
        raise TypeError
    return value


def _operand(value: Any) -> Fraction:
    """add/sub take a Quantity or an int."""
    if isinstance(value, Quantity):
        return value.value
    return Fraction(as_int(value))


@cel("quantity")
def quantity(text: Any) -> Quantity:
    return _parse(text)


@cel("isQuantity")
def is_quantity(text: Any) -> celtypes.BoolType:
    try:
        _parse(text)
    except Failed:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _as_int64(q: Quantity) -> int | None:
    value = q.value
    if value.denominator == 1 and INT64_MIN <= value.numerator <= INT64_MAX:
        return value.numerator
    return None


@cel("isInteger")
def is_integer(q: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_as_int64(_quantity(q)) is not None)


@cel("asInteger")
def as_integer(q: Any) -> celtypes.IntType:
    value = _as_int64(_quantity(q))
    if value is None:
        raise Failed(f"cannot convert quantity {q} to an int64 without loss")
    return celtypes.IntType(value)


@cel("asApproximateFloat")
def as_approximate_float(q: Any) -> celtypes.DoubleType:
    value = _quantity(q).value
    try:
        return celtypes.DoubleType(float(value))
    except OverflowError:  # as Go's AsApproximateFloat64: beyond float64 is ±Inf
        return celtypes.DoubleType(math.inf if value > 0 else -math.inf)


@cel("sign")
def sign(q: Any) -> celtypes.IntType:
    value = _quantity(q).value
    return celtypes.IntType((value > 0) - (value < 0))


@cel("add")
def add(q: Any, other: Any) -> Quantity:
    return Quantity(_quantity(q).value + _operand(other))


@cel("sub")
def sub(q: Any, other: Any) -> Quantity:
    return Quantity(_quantity(q).value - _operand(other))


def _compare(q: Any, other: Any) -> int:
    left, right = _quantity(q).value, _quantity(other).value
    return (left > right) - (left < right)


@cel("isGreaterThan")
def is_greater_than(q: Any, other: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(q, other) > 0)


@cel("isLessThan")
def is_less_than(q: Any, other: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(q, other) < 0)


@cel("compareTo")
def compare_to(q: Any, other: Any) -> celtypes.IntType:
    return celtypes.IntType(_compare(q, other))


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
    }
)
