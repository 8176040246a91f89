"""How the Kubernetes CEL library functions meet celpy (pure: no I/O): the calling convention
k8s_library.py and k8s_quantity.py share.

A function *returns* a CELEvalError, never raises one: a returned error is a CEL error value,
which `||`, `&&` and the macros absorb as CEL requires (`true || x.charAt(9) == ""`), and
`Runner.evaluate` raises it if it is the result. A raised one escapes the evaluator. `cel`
turns what a function raises (Failed with its message; TypeError for a wrong arity or argument
types, as celpy reports its own; ValueError for celtypes' int64 overflow) into such values,
each naming the call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError


class Failed(Exception):
    """A CEL evaluation error with its message; `cel` returns it as a CELEvalError value."""


def cel(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Errors become returned CELEvalError values naming the call (see the module docstring)."""

    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def call(*args: Any) -> Any:
            try:
                return function(*args)
            except Failed as failed:
                return CELEvalError(f"{name}: {failed}")
            except TypeError:  # wrong arity or argument types, as celpy reports its own
                return CELEvalError(f"no such overload: {name}({type_names(args)})")
            except ValueError as error:  # celtypes int64 overflow
                return CELEvalError(f"{name}: {error}")

        return call

    return wrap


def type_names(args: Sequence[Any]) -> str:
    return ", ".join(type_name(arg) for arg in args)


def type_name(value: Any) -> str:
    names = {
        celtypes.BoolType: "bool",
        celtypes.IntType: "int",
        celtypes.UintType: "uint",
        celtypes.DoubleType: "double",
        celtypes.StringType: "string",
        celtypes.ListType: "list",
        celtypes.MapType: "map",
    }
    return names.get(type(value), type(value).__name__)  # a Quantity: "Quantity"


def as_string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError
    return str(value)  # plain, so that messages show 'abc', not StringType('abc')


def as_int(value: Any) -> int:
    # BoolType is an int subclass in celpy, but not an int in CEL.
    if isinstance(value, bool | celtypes.BoolType) or not isinstance(value, int):
        raise TypeError
    return int(value)


def as_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError
    return value


def plain(number: int | float) -> int | float:
    return int(number) if isinstance(number, int) else float(number)
