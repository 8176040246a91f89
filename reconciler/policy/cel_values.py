"""CEL values for the compiled closures, and what celpy's interpreter does with them (pure).

The activation's values (`to_cel`), member access (`field`), `in` (`contains`), a function
call (`call`), and the error values the interpreter makes when an operator, an index or a name
fails (`overloaded`, `failed`, `undeclared`), with its texts: cel_compiled.py's closures and
cel_loops.py's comprehensions return these, so an error reads as the interpreter's would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType, ListType, MapType, StringType
from celpy.evaluation import CELEvalError
from lark import Token, Tree

TRUE: Final = BoolType(True)
FALSE: Final = BoolType(False)
MISSING: Final = object()


def to_cel(value: Any) -> Any:
    """`celpy.json_to_cel`: the same values, faster (dispatch on the exact type)."""
    kind = type(value)
    if kind is dict:
        converted = MapType()
        dict.update(converted, {to_cel(k): to_cel(v) for k, v in value.items()})
        return converted
    if kind is list:
        return ListType([to_cel(item) for item in value])
    if kind is str:  # what StringType(value) and IntType(value) make, without their checks
        return str.__new__(StringType, value)
    if kind is bool:
        return TRUE if value else FALSE
    if kind is int and -(2**63) <= value < 2**63:
        return int.__new__(celtypes.IntType, value)
    return json_to_cel(value)  # None, floats, tuples, subclasses, dates: as celpy does


def overloaded(label: str, ex: BaseException, tree: Tree, *values: Any) -> CELEvalError:
    types = ", ".join(str(type(v)) for v in values)
    text = f"found no matching overload for {label} applied to '({types})'"
    return CELEvalError(text, ex.__class__, ex.args, tree=tree)


def failed(tree: Tree, op: str, ex: BaseException, *values: Any) -> CELEvalError:
    """The error value of an operator that raised (Evaluator.relation, .addition ...)."""
    if isinstance(ex, TypeError):
        return overloaded(repr(op), ex, tree, *values)
    if isinstance(ex, ZeroDivisionError):
        return CELEvalError("modulus or divide by zero", ex.__class__, ex.args, tree=tree)
    return CELEvalError("return error for overflow", ex.__class__, ex.args, tree=tree)


def undeclared(name: str, **where: Any) -> CELEvalError:
    # The interpreter appends its whole activation; the engine cuts the message there.
    text = f"undeclared reference to '{name}' (in activation '<compiled>')"
    return CELEvalError(text, KeyError, (name,), **where)


def field(value: Any, name: str, tree: Tree | None) -> Any:
    """`value.name` (Evaluator.member_dot)."""
    if type(value) is MapType:
        found = dict.get(cast(dict[str, Any], value), name, MISSING)
        if found is not MISSING:
            return found
        return CELEvalError(f"no such member in mapping: {name!r}", KeyError, None, tree=tree)
    if isinstance(value, CELEvalError):
        return value
    # (a NameContainer, the interpreter's next case, comes only of `google`: Unsupported)
    if isinstance(value, celtypes.MessageType):
        return value.get(name)
    if isinstance(value, MapType):
        try:
            return value[name]
        except KeyError:
            text = f"no such member in mapping: {name!r}"
            return CELEvalError(text, KeyError, None, tree=tree)
    text = f"{value!r} with type: '{type(value)}' does not support field selection"
    return CELEvalError(text, TypeError, None, tree=tree)


def contains(item: Any, container: Any) -> Any:
    """evaluation.operator_in, without its typing.cast(Iterable[Result], ...), whose
    subscript costs more than most searches."""
    if isinstance(item, CELEvalError):
        return item
    if isinstance(container, CELEvalError):
        return container
    result: Any = FALSE  # or the error a comparison raised
    for candidate in container:
        try:
            if candidate == item:
                return TRUE
        except TypeError as ex:
            result = CELEvalError("no such overload", ex.__class__, ex.args)
    return result


def call(func: Callable[..., Any], args: list[Any], token: Token) -> Any:
    """A function or method applied (Evaluator.function_eval, .method_eval)."""
    try:
        return func(*args)
    except ValueError as ex:
        return CELEvalError("return error for overflow", ex.__class__, ex.args, token=token)
    except (TypeError, AttributeError) as ex:
        return CELEvalError("no such overload", ex.__class__, ex.args, token=token)
