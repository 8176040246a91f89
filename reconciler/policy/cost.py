"""What a CEL expression may cost: its size and nesting, checked before it is parsed and
before it is compiled, and its cost, estimated at compile time and counted at run time, in
Kubernetes' units (pure: no I/O).

The limits and the units are Kubernetes' (docs/security.md, "CEL policies", gives each
upstream source):
- an expression longer than 100,000 code points, or nested deeper than 250, is refused before
  it is parsed or compiled (cel-go's parser: `expressionSizeCodePointLimit` and
  `maxRecursionDepth`, their defaults in parser/parser.go `NewParser`);
- an expression whose estimated worst-case cost exceeds 1,000,000 is refused at compile time
  (`PerCallLimit`, k8s.io/apiserver/pkg/apis/cel/config.go); the estimate follows cel-go's
  checker/cost.go: a select or an identifier costs 1, a constant 0, a call or operator 1
  plus its arguments, a list literal 10 and a map literal 30 plus their items, a string
  traversal 0.1 a character, a regex 0.25 a character of the pattern, and a comprehension its
  range, plus per element its loop condition and step (macros expand as in cel-go's
  parser/macro.go);
- at run time every iteration of a comprehension charges its step's cost (the body, with
  nested comprehensions charging their own iterations), and the expression stops with
  `CostLimitExceeded` past 1,000,000 (`PerCallLimit`), the expressions of one policy on one
  object past 10,000,000 together (`RuntimeCELCostBudget`).

Where this differs from Kubernetes: our policies have no OpenAPI schema, so the size of a
list, map or string read from the object is not bounded by `maxItems`/`maxLength` or by the
3 MiB request as the API server's estimator bounds it; the estimate assumes `UNKNOWN_ITEMS`
elements and `UNKNOWN_CHARS` characters for such a value, and the run-time counter bounds the
real one. The run-time charge of an iteration is the estimate of its step, not the cost of what
ran (cel-go's interpreter/runtimecost.go counts each call as it runs); nothing outside a
comprehension is charged, since without one an expression's work is bounded by its length.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from lark import Token, Tree

# cel-go parser/parser.go NewParser defaults.
MAX_CODE_POINTS: Final = 100_000
MAX_NESTING: Final = 250
# k8s.io/apiserver/pkg/apis/cel/config.go.
PER_CALL_LIMIT: Final = 1_000_000
RUNTIME_BUDGET: Final = 10_000_000
# cel-go common/cost.go.
SELECT_AND_IDENT: Final = 1
CONST: Final = 0
LIST_CREATE: Final = 10
MAP_CREATE: Final = 30
STRING_TRAVERSAL: Final = 0.1
REGEX_LENGTH: Final = 0.25
# Ours: the size assumed for a value read from the object (see the module docstring): 100
# items, and 253 characters, the longest Kubernetes name (a DNS subdomain).
UNKNOWN_ITEMS: Final = 100
UNKNOWN_CHARS: Final = 253

# Rules of one child that pass its value on (as cel_compiled._PASS).
_PASS: Final = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication",
     "unary", "member", "primary", "paren_expr"}
)  # fmt: skip
_WRAPPERS: Final = frozenset({"exprlist", "mapinits", "fieldinits", "literal", "ident"})
_OPERATOR_WRAPPERS: Final = ("relation_", "addition_", "multiplication_", "unary_")
_OPENERS: Final = {"(": ")", "[": "]", "{": "}"}
# Functions whose cost grows with their receiver's length (k8s library cost.go, cel-go ext).
_TRAVERSE: Final = frozenset(
    {"lowerAscii", "upperAscii", "trim", "split", "substring",
     "charAt", "indexOf", "lastIndexOf", "join", "string", "isSorted", "sum", "min", "max"}
)  # fmt: skip
_REGEX: Final = frozenset({"matches", "find", "findAll"})


class CostLimitExceeded(Exception):
    """Raised through the compiled closures (no CEL operator absorbs it), caught by the
    engine: the expression failed, as cel-go's "actual cost limit exceeded"."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


class Budget:
    """The run-time counter of one expression's run (`spent`, against PER_CALL_LIMIT),
    inside the budget of its policy on one object (`total`, against RUNTIME_BUDGET)."""

    __slots__ = ("spent", "total")
    KEY: Final = "\x00budget"  # its place in the compiled closures' environment

    def __init__(self, total: list[float] | None = None):
        self.spent = 0.0
        self.total = [0.0] if total is None else total

    def stop(self) -> None:
        """Past PER_CALL_LIMIT: the run ends. (The compiled loops add to `spent` and compare
        inline, since a call per element would cost 5% of a simple all().)"""
        raise CostLimitExceeded(
            f"cost limit exceeded: stopped at cost {int(self.spent):,}, over the "
            f"per-expression limit of {PER_CALL_LIMIT:,} (Kubernetes' PerCallLimit)"
        )

    def charge(self, cost: float) -> None:
        """Adds `cost`, stopping the run past PER_CALL_LIMIT (for charges off the per-element
        path, such as the length of a long concatenation)."""
        self.spent += cost
        if self.spent > PER_CALL_LIMIT:
            self.stop()

    def close(self) -> None:
        """Adds this run to its policy's total; refuses past the policy's budget."""
        self.total[0] += self.spent
        if self.total[0] > RUNTIME_BUDGET:
            raise CostLimitExceeded(
                f"cost limit exceeded: the policy's expressions cost {int(self.total[0]):,} "
                f"on this object, over {RUNTIME_BUDGET:,} (Kubernetes' RuntimeCELCostBudget)"
            )


def too_long(text: str) -> str | None:
    """Why `text` may not be parsed (before the parser sees it), or None."""
    if len(text) > MAX_CODE_POINTS:
        return f"is {len(text):,} characters long; the limit is {MAX_CODE_POINTS:,}"
    depth = _lexical_depth(text)
    if depth > MAX_NESTING:
        return f"is nested {depth:,} deep; the limit is {MAX_NESTING}"
    return None


def _lexical_depth(text: str) -> int:
    """The deepest nesting of brackets, or the longest run of unary `!`/`-`, outside string
    literals; a cheap bound taken before parsing."""
    deepest = depth = run = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            i = _string_end(text, i)
            run = 0
            continue
        if c in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        elif c in ")]}":
            depth = max(0, depth - 1)
        if c in "!-":
            run += 1
            deepest = max(deepest, run)
        elif not c.isspace():
            run = 0
        i += 1
    return deepest


def _string_end(text: str, start: int) -> int:
    """The index after the string literal opened at `start` (an escape skips a character;
    a raw string's backslash too, which at worst ends the scan a character late)."""
    quote = text[start] * 3 if text.startswith(text[start] * 3, start) else text[start]
    i = start + len(quote)
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote)
        i += 1
    return i


def tree_depth(tree: Tree) -> int:
    """The nesting of a parse tree in CEL operations (an operator, call, select, index,
    literal list or map, ternary): the rules that only pass a value on, the operator and
    argument-list wrappers and the leaves do not count. Walked without recursion, so that any
    tree can be measured."""
    deepest = 0
    stack: list[tuple[Tree, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if _counts(node):
            depth += 1
            deepest = max(deepest, depth)
        stack.extend((child, depth) for child in node.children if isinstance(child, Tree))
    return deepest


def _counts(node: Tree) -> bool:
    kind = str(node.data)
    if kind in _PASS and len(node.children) == 1:
        return False
    return kind not in _WRAPPERS and not kind.startswith(_OPERATOR_WRAPPERS)


@dataclass(frozen=True)
class Shape:
    """What the estimate knows of a value: its size (characters, items), its items'."""

    size: float | None = None  # None: unknown (read from the object)
    item: Shape | None = None

    def items(self) -> float:
        return UNKNOWN_ITEMS if self.size is None else self.size

    def chars(self) -> float:
        return UNKNOWN_CHARS if self.size is None else self.size


_UNKNOWN: Final = Shape()
_SCALAR: Final = Shape(0.0)


def _union(a: Shape, b: Shape) -> Shape:
    if a.size is None or b.size is None:
        return _UNKNOWN
    item = a.item if b.item is None else b.item if a.item is None else _union(a.item, b.item)
    return Shape(max(a.size, b.size), item)


def estimate(tree: Tree, sizes: Mapping[str, Shape] | None = None) -> float:
    """The worst-case cost of an expression (its tree no deeper than MAX_NESTING); `sizes`
    the shapes of variables, where known (tests: cel-go's size hints)."""
    return _Estimator(flat=False).cost(tree, dict(sizes or {}))[0]


def step_cost(body: Tree, bound: dict[str, Shape] | None = None) -> float:
    """What one iteration of a comprehension charges at run time: its body, with nested
    comprehensions counted without their elements (they charge their own), plus the
    expanded macro's loop condition and step."""
    return _Estimator(flat=True).cost(body, bound or {})[0] + 3


class _Estimator:
    def __init__(self, *, flat: bool):
        self.flat = flat  # nested comprehensions: their fixed part only

    def cost(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        while tree.data in _PASS and len(tree.children) == 1:
            tree = tree.children[0]
        kind = str(tree.data)
        method = getattr(self, "_" + kind, None)
        if method is None:  # message literals, leading-dot names: 1 plus their parts
            return 1 + self._sum(tree, bound), _UNKNOWN
        return method(tree, bound)

    def _sum(self, tree: Tree, bound: dict[str, Shape]) -> float:
        return sum(self.cost(t, bound)[0] for t in _subtrees(tree))

    def _literal(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        token = tree.children[0]
        if isinstance(token, Token) and token.type.endswith(("STRING_LIT", "BYTES_LIT")):
            text = str(token).lstrip("rRbB")  # its prefix, then its quotes (escapes counted)
            quotes = 3 if text[:3] in ("'''", '"""') else 1
            return CONST, Shape(float(max(0, len(text) - 2 * quotes)))
        return CONST, _SCALAR

    def _ident(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        return SELECT_AND_IDENT, bound.get(str(tree.children[0]), _UNKNOWN)

    def _member_dot(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        return self.cost(tree.children[0], bound)[0] + SELECT_AND_IDENT, _UNKNOWN

    def _member_index(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        base, shape = self.cost(tree.children[0], bound)
        index, _ = self.cost(tree.children[1], bound)
        return base + index + 1, shape.item or _UNKNOWN

    def _list_lit(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        items = [self.cost(t, bound) for t in _subtrees(tree)]
        shape = Shape(float(len(items)), _union_all(s for _, s in items))
        return LIST_CREATE + sum(c for c, _ in items), shape

    def _map_lit(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        parts = [self.cost(t, bound) for t in _subtrees(tree)]
        keys = _union_all(s for _, s in parts[0::2])
        return MAP_CREATE + sum(c for c, _ in parts), Shape(float(len(parts) // 2), keys)

    def _unary(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        return self.cost(tree.children[1], bound)[0] + 1, _SCALAR

    def _expr(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        (c, _), (x, a), (y, b) = (self.cost(t, bound) for t in tree.children)
        return c + max(x, y), _union(a, b)

    def _conditionalor(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        return self._sum(tree, bound), _SCALAR  # cel-go: both sides at worst, no own cost

    _conditionaland = _conditionalor

    def _relation(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        op, right = tree.children
        left_cost, left = self.cost(op.children[0], bound)
        right_cost, container = self.cost(right, bound)
        if op.data == "relation_in":  # cel-go: O(n) in the container
            return left_cost + right_cost + container.items(), _SCALAR
        smallest = min(left.chars(), container.chars())  # strings: a traversal
        own = max(1.0, math.ceil(STRING_TRAVERSAL * smallest)) if left.size else 1.0
        return left_cost + right_cost + own, _SCALAR

    def _addition(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        op, right = tree.children
        left_cost, left = self.cost(op.children[0], bound)
        right_cost, other = self.cost(right, bound)
        if op.data == "addition_add" and (left.size or other.size):  # a concatenation
            size = left.chars() + other.chars()
            if left.item or other.item:  # lists: O(1) in cel-go's estimate
                return left_cost + right_cost + 1, Shape(size, left.item or other.item)
            own = max(1.0, math.ceil(STRING_TRAVERSAL * size))  # strings: a traversal
            return left_cost + right_cost + own, Shape(size)
        return left_cost + right_cost + 1, _SCALAR

    _multiplication = _addition

    def _ident_arg(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        name = str(tree.children[0])
        args = _args(tree.children[1] if len(tree.children) == 2 else None)
        if name == "has":  # Kubernetes: PresenceTestHasCost(false), the select is free
            return sum(self.cost(_unselect(a), bound)[0] for a in args), _SCALAR
        if name == "dyn":
            return self.cost(args[0], bound) if args else (CONST, _UNKNOWN)
        return self._call(name, [self.cost(a, bound) for a in args])

    def _member_dot_arg(self, tree: Tree, bound: dict[str, Shape]) -> tuple[float, Shape]:
        name = str(tree.children[1])
        args = _args(tree.children[2] if len(tree.children) == 3 else None)
        if name in ("all", "exists", "exists_one", "map", "filter") and len(args) == 2:
            return self._comprehension(name, tree.children[0], args, bound)
        return self._call(name, [self.cost(tree.children[0], bound)]
                          + [self.cost(a, bound) for a in args])  # fmt: skip

    def _call(self, name: str, args: list[tuple[float, Shape]]) -> tuple[float, Shape]:
        spent = sum(c for c, _ in args)
        shapes = [s for _, s in args] or [_UNKNOWN]
        receiver = shapes[0]
        if name in _REGEX and len(shapes) >= 2:  # cel-go: O(n * m)
            text = math.ceil(STRING_TRAVERSAL * receiver.chars())
            pattern = math.ceil(REGEX_LENGTH * shapes[1].chars())
            return spent + max(1, text * pattern), Shape(receiver.size, receiver)
        if name == "contains" and len(shapes) >= 2:
            text = math.ceil(STRING_TRAVERSAL * receiver.chars())
            return spent + max(1, text * math.ceil(STRING_TRAVERSAL * shapes[1].chars())), _SCALAR
        if name == "replace" and len(shapes) >= 3:  # the result may grow by the replacement
            size = receiver.chars() * max(1.0, shapes[2].chars())
            return spent + math.ceil(STRING_TRAVERSAL * (receiver.chars() + size)), Shape(size)
        if name in ("startsWith", "endsWith") and len(shapes) >= 2:  # the prefix's length
            return spent + max(1, math.ceil(STRING_TRAVERSAL * shapes[1].chars())), _SCALAR
        if name in _TRAVERSE:
            size = receiver.chars() if receiver.item is None else receiver.items()
            return spent + max(1, math.ceil(STRING_TRAVERSAL * size)), _UNKNOWN
        return spent + 1, _SCALAR if name == "size" else _UNKNOWN

    def _comprehension(
        self, name: str, target: Tree, args: list[Tree], bound: dict[str, Shape]
    ) -> tuple[float, Shape]:
        range_cost, shape = self.cost(target, bound)
        var = _variable(args[0])
        inner = {**bound, var: shape.item or _UNKNOWN} if var else bound
        body, result = self.cost(args[1], inner)
        # cel-go parser/macro.go expansions: all/exists step `r && p`, condition
        # `@not_strictly_false(r)`, result `r`; exists_one `p ? r + 1 : r`, result `r == 1`;
        # map `r + [f]`, filter `p ? r + [x] : r`, with an empty list as the accumulator.
        fixed, step = {"all": (1, 3), "exists": (1, 3), "exists_one": (2, 2),
                       "map": (11, 12), "filter": (11, 13)}[name]  # fmt: skip
        out = Shape(shape.size, result if name == "map" else shape.item)
        out = out if name in ("map", "filter") else _SCALAR
        if self.flat:
            return range_cost + fixed, out
        return range_cost + fixed + shape.items() * (body + step), out


def _subtrees(tree: Tree) -> Iterator[Tree]:
    """The expressions of a list or map literal (through its exprlist or mapinits)."""
    for child in tree.children:
        if isinstance(child, Tree) and child.data in ("exprlist", "mapinits"):
            yield from (c for c in child.children if isinstance(c, Tree))
        elif isinstance(child, Tree):
            yield child


def _args(exprlist: Tree | None) -> list[Tree]:
    if exprlist is None:
        return []
    return [c for c in exprlist.children if isinstance(c, Tree)]


def _unselect(arg: Tree) -> Tree:
    while arg.data in _PASS and len(arg.children) == 1:
        arg = arg.children[0]
    return arg.children[0] if arg.data == "member_dot" else arg


def _variable(arg: Tree) -> str | None:
    idents = list(arg.find_data("ident"))
    return str(idents[0].children[0]) if len(idents) == 1 else None


def _union_all(shapes: Iterator[Shape]) -> Shape | None:
    found: Shape | None = None
    for shape in shapes:
        found = shape if found is None else _union(found, shape)
    return found
