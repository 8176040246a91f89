"""CEL's comprehensions as closures, each element charged to the run-time cost budget (pure).

cel_compiled.py compiles a macro's target, variable and body, and builds its run here: map,
filter and exists_one (`collect`), all and exists (`quantifier`), and celpy's built-in `min`
(`smallest`). The meaning is celpy's interpreter's: map, filter and exists_one raise an
element's error (its nested `evaluate` does), which no operator absorbs; all and exists keep it
as a value, and stop at their answer when the body cannot raise (`total`).

Each element adds its body's estimated cost (cost.step_cost) to the expression's cost.Budget,
found in the environment under Budget.KEY, and the run stops past PER_CALL_LIMIT. The add and
compare are written inline: a call per element would cost 5% of the simplest all().
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from celpy.celtypes import BoolType, ListType
from celpy.evaluation import CELEvalError
from lark import Tree

from reconciler.policy.cel_values import FALSE, TRUE
from reconciler.policy.cost import PER_CALL_LIMIT, Budget

Env = dict[str, Any]
Run = Callable[[Env], Any]
# What an element's value decides, by macro: map keeps the value (None), filter the elements
# whose value is true, exists_one counts them.
_KEEP: Final = {"map": None, "filter": True, "exists_one": False}


def smallest(target: Run, tree: Tree) -> Run:
    """celpy's `min` macro: Python's min(), whose TypeError escapes as there."""

    def run(env: Env) -> Any:
        items = target(env)
        if isinstance(items, CELEvalError):
            return items
        try:
            return min(items)
        except ValueError as ex:
            text = "Attempt to reduce an empty sequence or a sequence with a None value"
            return CELEvalError(text, ex.__class__, ex.args, tree=tree)

    return run


def collect(target: Run, var: str, body: Run, macro: str, step: float) -> Run:
    """map, filter or exists_one over `target`, `var` bound to each element in turn."""
    keep = _KEEP[macro]

    def run(env: Env) -> Any:
        items = target(env)
        if isinstance(items, CELEvalError):
            return items
        local, out, budget = dict(env), [], env[Budget.KEY]
        for item in items:  # not iterable: the TypeError escapes, as there
            budget.spent += step
            if budget.spent > PER_CALL_LIMIT:
                budget.stop()
            local[var] = item
            value = body(local)
            if isinstance(value, CELEvalError):
                raise value  # as the interpreter's nested evaluate()
            if keep is None:
                out.append(value)
            elif value:
                out.append(item)
        if keep is False:
            return TRUE if len(out) == 1 else FALSE
        return ListType(out)

    return run


def quantifier(
    target: Run,
    var: str,
    body: Run,
    total: bool,
    answer: bool,
    step: float,
    combine: Callable[[Any, Any], Any],
) -> Run:
    """all (answer False) and exists (True): `combine` (celpy's logical_and/or) folded over
    every element, an element's error a value. Once the fold holds the answer nothing changes
    it: the rest is skipped when the body cannot raise."""

    def run(env: Env) -> Any:
        items = target(env)
        if isinstance(items, CELEvalError):
            return items
        local, budget = dict(env), env[Budget.KEY]
        folded: Any = BoolType(not answer)  # a bool, or the error an item raised
        for item in items:
            budget.spent += step
            if budget.spent > PER_CALL_LIMIT:
                budget.stop()
            local[var] = item
            try:
                value = body(local)
            except CELEvalError as raised:  # from a map() inside: caught, as there
                value = raised
            if type(value) is BoolType and type(folded) is BoolType:
                folded = TRUE if (folded or value if answer else folded and value) else FALSE
            else:
                try:
                    folded = combine(folded, value)
                except TypeError as ex:
                    folded = CELEvalError("no such overload", ex.__class__, ex.args)
            if total and type(folded) is BoolType and bool(folded) is answer:
                return folded
        return folded

    return run
