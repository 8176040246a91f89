"""CEL programs compiled to Python closures, with the meaning celpy's interpreter gives them
(pure: no I/O).

celpy 0.5 stays the language front end: its Lark parse tree, its celtypes values, and the
operator and function implementations its interpreter calls (`base_functions`, then the
`functions` given, as to `env.program`). What changes is how a tree runs: celpy's `Evaluator`
walks the tree on every run, clones an Activation per macro element and subscripts `typing`
aliases in its hot paths; here each tree becomes nested closures `run(env) -> value` once,
`env` a dict of the variables.

The semantics are the interpreter's (celpy/evaluation.py, `Evaluator`), node by node:
- errors are values (CELEvalError, with the interpreter's text and tree), which operators
  pass on; `&&` and `||` absorb them commutatively (`logical_and`/`logical_or`), `has()` makes
  one false, a ternary runs only the branch it picks (and makes a TypeError of it an error
  value), and a run whose result is an error raises it;
- the comprehensions are built in cel_loops.py (which says how their errors go), the values,
  member access, `in` and the error values with the interpreter's texts in cel_values.py;
- operators call celpy's own functions (int64/uint64 overflow, comparisons across types,
  `in`); what they raise becomes the error value the interpreter makes, or escapes as there;
- a difference in cost, none in meaning: `a || b` does not run `b` when `a` is true (`&&`:
  false), and all/exists stop at their answer, when what is skipped cannot raise (`total`);
  the interpreter runs both and ignores the value.
Left to the interpreter (`Unsupported`; the engine falls back for that expression): protobuf
message literals `T{f: v}`, a leading-dot name `.x`, the `google.protobuf` type names, `dyn()`,
the `reduce` macro, a macro or `has()` with an unusual argument count. The shipped policies,
the benchmark's and the tests' need none of them (tests/unit/test_policy_cel_compiled.py).
"""

from __future__ import annotations

import operator
from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from celpy import celtypes
from celpy import evaluation as ev
from celpy.celtypes import BoolType, ListType, MapType, StringType
from celpy.evaluation import Activation, CELEvalError, Evaluator, base_functions
from lark import Token, Tree

from reconciler.policy import cel_loops as loops
from reconciler.policy.cel_values import (
    FALSE,
    MISSING,
    TRUE,
    call,
    contains,
    failed,
    field,
    overloaded,
    undeclared,
)
from reconciler.policy.cost import STRING_TRAVERSAL, Budget, step_cost
from reconciler.policy.k8s_library import FUNCTIONS as K8S_FUNCTIONS

Env = dict[str, Any]
Run = Callable[[Env], Any]
# Rules of one child that pass its value on.
_PASS: Final = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication",
     "unary", "member", "primary", "paren_expr"}
)  # fmt: skip
_OPERATORS: Final = {
    "relation_lt": "_<_", "relation_le": "_<=_", "relation_gt": "_>_", "relation_ge": "_>=_",
    "relation_eq": "_==_", "relation_ne": "_!=_", "relation_in": "_in_",
    "addition_add": "_+_", "addition_sub": "_-_",
    "multiplication_mul": "_*_", "multiplication_div": "_/_", "multiplication_mod": "_%_",
    "unary_not": "!_", "unary_neg": "-_",
}  # fmt: skip
# What each rule's interpreter method turns into an error value (anything else escapes).
_CAUGHT: Final = {
    "relation": (TypeError,),
    "addition": (TypeError, ValueError, OverflowError),
    "multiplication": (TypeError, ZeroDivisionError, ValueError, OverflowError),
    "unary": (TypeError, ValueError),
}
# celpy's comparisons build their wrapper (evaluation.boolean) on every call: built once here.
_COMPARISONS: Final = {
    f: ev.boolean(op)
    for f, op in ((ev.bool_lt, operator.lt), (ev.bool_le, operator.le), (ev.bool_gt, operator.gt),
                  (ev.bool_ge, operator.ge), (ev.bool_eq, operator.eq), (ev.bool_ne, operator.ne))
}  # fmt: skip
# A concatenation longer than this is charged by its length (a step's estimate counts a string
# read from the object as cost.UNKNOWN_CHARS); celpy's + gives a str, list or bytes.
_CHARGED_FROM: Final = 1_000
_SIZED: Final = frozenset({str, list, bytes, StringType, ListType, celtypes.BytesType})
_MACROS: Final = frozenset({"map", "filter", "all", "exists", "exists_one", "reduce", "min"})
# Functions that return every failure as an error value, never raise, so a short-circuit may
# skip them: the Kubernetes library's (its `_cel`), and these (int(), bool() ... can raise).
_TOTAL_BASE: Final = ("size", "contains", "startsWith", "endsWith", "matches", "string", "type")
_TOTAL: Final = {**{n: base_functions[n] for n in _TOTAL_BASE}, **K8S_FUNCTIONS}


class Unsupported(Exception):
    """A construct left to celpy's interpreter (see the module docstring)."""


@dataclass(frozen=True)
class Program:
    """One compiled expression; `evaluate` as celpy's `Runner.evaluate`. One with a
    comprehension (`loops`) runs with a cost.Budget, charged per element; `total` is its
    policy's spending on this object (cost.CostLimitExceeded past either limit)."""

    run: Run
    loops: bool = False

    def evaluate(self, activation: Env, total: list[float] | None = None) -> Any:
        if self.loops:
            budget = Budget(total)
            value = self.run({**activation, Budget.KEY: budget})
            budget.close()
        else:
            value = self.run(activation)
        if isinstance(value, CELEvalError):
            raise value
        return value


def compile_program(ast: Tree, functions: Mapping[str, Callable[..., Any]]) -> Program:
    """The closures of a tree from `celpy.Environment().compile`, `functions` as given to
    `env.program(ast, functions=...)`. Raises Unsupported."""
    if any(name.startswith("_") or name in ("!_", "-_") for name in functions):
        raise Unsupported("functions that replace operators")
    compiler = _Compiler(functions)
    run = compiler.node(ast)[0]
    return Program(run, compiler.loops)


class _Compiler:
    def __init__(self, functions: Mapping[str, Callable[..., Any]]):
        self.functions = ChainMap(dict(functions), base_functions)
        self.loops = False  # a comprehension compiled: the program needs a cost.Budget

    def node(self, tree: Tree) -> tuple[Run, bool]:
        """(run, total): total if running it cannot raise, only return (errors as values)."""
        while tree.data in _PASS and len(tree.children) == 1:
            tree = tree.children[0]
        method = getattr(self, "_" + str(tree.data), None)
        if method is None:
            raise Unsupported(str(tree.data))  # member_object, dot_ident, dot_ident_arg
        return method(tree)

    def nodes(self, trees: list[Any]) -> tuple[list[Run], bool]:
        compiled = [self.node(t) for t in trees]
        return [run for run, _ in compiled], all(total for _, total in compiled)

    def _expr(self, tree: Tree) -> tuple[Run, bool]:  # cond ? left : right
        (cond, left, right), total = self.nodes(tree.children)
        choose = self.functions["_?_:_"]

        def run(env: Env) -> Any:
            c = cond(env)
            x = y = FALSE
            try:  # as the interpreter's: a TypeError of the branch run is an error value too
                if type(c) is BoolType:
                    return left(env) if c else right(env)
                if c:  # an error is truthy
                    x = left(env)
                else:
                    y = right(env)
                return choose(c, x, y)
            except TypeError as ex:
                return overloaded("_?_:_", ex, tree, c, x, y)

        return run, total

    def _conditionalor(self, tree: Tree) -> tuple[Run, bool]:
        return self._logic(tree, "_||_", True)

    def _conditionaland(self, tree: Tree) -> tuple[Run, bool]:
        return self._logic(tree, "_&&_", False)

    def _logic(self, tree: Tree, name: str, answer: bool) -> tuple[Run, bool]:
        (left, left_total), (right, skip) = self.node(tree.children[0]), self.node(tree.children[1])
        combine = self.functions[name]

        def run(env: Env) -> Any:
            x = left(env)
            if skip and type(x) is BoolType and bool(x) is answer:
                return x  # the right operand cannot raise: its value would be ignored
            y = right(env)
            if type(x) is BoolType and type(y) is BoolType:
                return TRUE if (x or y if answer else x and y) else FALSE
            try:
                return combine(x, y)
            except TypeError as ex:
                return overloaded(name, ex, tree, x, y)

        return run, left_total and skip

    def _relation(self, tree: Tree) -> tuple[Run, bool]:
        op_tree, right_tree = tree.children
        if op_tree.data == "relation_in":
            return self._in(tree)
        return self._binary(tree, op_tree.children[0], right_tree)

    def _addition(self, tree: Tree) -> tuple[Run, bool]:
        return self._binary(tree, tree.children[0].children[0], tree.children[1])

    _multiplication = _addition

    def _binary(self, tree: Tree, left_tree: Tree, right_tree: Tree) -> tuple[Run, bool]:
        op = tree.children[0].data  # a Token: its repr is in the error text, as there
        (left, right), total = self.nodes([left_tree, right_tree])
        func, caught = self.functions[_OPERATORS[op]], _CAUGHT[str(tree.data)]
        func = _COMPARISONS.get(func, func)
        if op == "addition_add":
            return self._concatenation(tree, op, left, right, func, caught), total

        def run(env: Env) -> Any:
            x, y = left(env), right(env)
            try:
                return func(x, y)
            except caught as ex:
                return failed(tree, op, ex, x, y)

        return run, total

    def _concatenation(
        self, tree: Tree, op: Any, left: Run, right: Run, func: Any, caught: Any
    ) -> Run:
        """`+`, as _binary; a long string or list it builds inside a comprehension is charged
        by its length (cel-go: 0.1 an item), which a step's estimate cannot know."""

        def run(env: Env) -> Any:
            x, y = left(env), right(env)
            try:
                value = func(x, y)
            except caught as ex:
                return failed(tree, op, ex, x, y)
            if type(value) in _SIZED and len(value) > _CHARGED_FROM:
                budget = env.get(Budget.KEY)  # none outside a comprehension: linear there
                if budget is not None:
                    budget.charge(STRING_TRAVERSAL * len(value))
            return value

        return run

    def _in(self, tree: Tree) -> tuple[Run, bool]:
        op_tree, right_tree = tree.children
        (left, right), total = self.nodes([op_tree.children[0], right_tree])
        func = self.functions["_in_"]
        func = contains if func is ev.operator_in else func

        def run(env: Env) -> Any:
            item, container = left(env), right(env)
            # A string among a map's keys: operator_in, comparing key by key, finds it too.
            # Not found, it decides (a key of another type makes an error).
            if type(container) is MapType and type(item) is StringType and item in container:
                return TRUE
            try:
                return func(item, container)
            except TypeError as ex:
                return failed(tree, op_tree.data, ex, item, container)

        return run, total

    def _unary(self, tree: Tree) -> tuple[Run, bool]:
        op = tree.children[0].data
        operand, total = self.node(tree.children[1])
        func = self.functions[_OPERATORS[op]]

        def run(env: Env) -> Any:
            x = operand(env)
            try:
                return func(x)
            except (TypeError, ValueError) as ex:
                return failed(tree, op, ex, x)

        # -x can raise OverflowError (a duration), which the interpreter lets escape
        return run, total and op == "unary_not"

    def _member_dot(self, tree: Tree) -> tuple[Run, bool]:
        (base, total), name = self.node(tree.children[0]), str(tree.children[1])
        return (lambda env: field(base(env), name, tree)), total

    def _member_index(self, tree: Tree) -> tuple[Run, bool]:
        (base, index), total = self.nodes(tree.children)
        getitem = self.functions["_[_]"]

        def run(env: Env) -> Any:
            value, key = base(env), index(env)
            if type(value) is MapType and type(key) is StringType:
                found = dict.get(value, key, MISSING)
                if found is not MISSING:
                    return found
            try:
                return getitem(value, key)
            except TypeError as ex:
                return overloaded("_[_]", ex, tree, value, key)
            except KeyError as ex:
                return CELEvalError("no such key", ex.__class__, ex.args, tree=tree)
            except IndexError as ex:
                return CELEvalError("invalid_argument", ex.__class__, ex.args, tree=tree)

        return run, total

    def _function(self, token: Token, args: list[Any]) -> tuple[Run, bool]:
        """A global call f(a), or a method x.f(a) whose x is args[0]."""
        params, total = self.nodes(args)
        name, func = str(token), self.functions.get(str(token))

        def run(env: Env) -> Any:
            values = [p(env) for p in params]
            if func is None:
                return undeclared(name, token=token)
            for value in values:  # the receiver's error first, then the arguments'
                if isinstance(value, CELEvalError):
                    return value
            return call(func, values, token)

        return run, total and func is not None and _TOTAL.get(name) is func

    def _member_dot_arg(self, tree: Tree) -> tuple[Run, bool]:
        name = _token(tree.children[1])
        args = tree.children[2].children if len(tree.children) == 3 else []
        if name in _MACROS:
            return self._macro(tree, str(name), args)
        return self._function(name, [tree.children[0], *args])

    def _ident_arg(self, tree: Tree) -> tuple[Run, bool]:
        name = _token(tree.children[0])
        args = tree.children[1].children if len(tree.children) == 2 else []
        if name == "has" and len(args) == 1:
            return self._has(args[0])
        if name in ("has", "dyn"):
            raise Unsupported(f"{name}() with {len(args)} arguments")
        return self._function(name, args)

    def _has(self, arg: Tree) -> tuple[Run, bool]:
        while arg.data in _PASS and len(arg.children) == 1:
            arg = arg.children[0]
        if arg.data != "member_dot":  # celpy takes any expression: true unless an error
            inner, total = self.node(arg)
            return (lambda env: FALSE if isinstance(inner(env), CELEvalError) else TRUE), total
        (base, total), name = self.node(arg.children[0]), str(arg.children[1])

        def run(env: Env) -> Any:
            value = base(env)
            if type(value) is MapType:  # a map literal may hold an error: has() of it is false
                found = value.get(StringType(name)) if name in value else None
                return TRUE if name in value and not isinstance(found, CELEvalError) else FALSE
            return FALSE if isinstance(field(value, name, None), CELEvalError) else TRUE

        return run, total

    def _macro(self, tree: Tree, name: str, args: list[Any]) -> tuple[Run, bool]:
        target, _ = self.node(tree.children[0])
        if name == "min":  # celpy's built-in: Python min(), whose TypeError escapes
            return loops.smallest(target, tree), False
        idents = list(args[0].find_data("ident")) if len(args) == 2 else []
        if name == "reduce" or len(idents) != 1:
            raise Unsupported(f"macro {name} with {len(args)} arguments")
        var = str(idents[0].children[0])
        body, body_total = self.node(args[1])
        self.loops, step = True, step_cost(args[1])  # charged per element (cost.py)
        if name in ("all", "exists"):
            combine = self.functions["_||_" if name == "exists" else "_&&_"]
            run = loops.quantifier(target, var, body, body_total, name == "exists", step, combine)
            return run, False
        return loops.collect(target, var, body, name, step), False  # raises an element's error

    def _ident(self, tree: Tree) -> tuple[Run, bool]:
        name = str(tree.children[0])
        if name == "google":  # the environment's protobuf type names
            raise Unsupported("google.protobuf names")
        function = self.functions.get(name, MISSING)  # a bare function name is its value

        def run(env: Env) -> Any:
            value = env.get(name, MISSING)
            if value is not MISSING:
                return value
            return undeclared(name, tree=tree) if function is MISSING else function

        return run, True

    def _literal(self, tree: Tree) -> tuple[Run, bool]:
        try:
            value = Evaluator(tree, Activation()).visit(tree)
        except Exception as error:
            raise Unsupported(f"literal {tree.children}: {error}") from None
        return (lambda env: value), True

    def _list_lit(self, tree: Tree) -> tuple[Run, bool]:
        items, total = self.nodes(tree.children[0].children if tree.children else [])

        def run(env: Env) -> Any:
            values = [item(env) for item in items]
            for value in values:
                if isinstance(value, CELEvalError):
                    return value
            return ListType(values)

        return run, total

    def _map_lit(self, tree: Tree) -> tuple[Run, bool]:
        parts, total = self.nodes(tree.children[0].children if tree.children else [])

        def run(env: Env) -> Any:
            try:  # as Evaluator.primary: the errors of the parts' runs too
                values = [part(env) for part in parts]
                result = MapType()
                for key, value in zip(values[0::2], values[1::2], strict=False):
                    if key in result:
                        raise ValueError(f"Duplicate key {key!r}")
                    result[key] = value
                return result
            except (ValueError, TypeError) as ex:
                return CELEvalError(ex.args[0], ex.__class__, ex.args, tree=tree)

        return run, total


def _token(child: Any) -> Token:
    """A function's name in celpy's tree: always a Token there; anything else is a tree this
    compiler does not know, which the interpreter runs instead."""
    if not isinstance(child, Token):
        raise Unsupported(f"a function named by {type(child).__name__}")
    return child
