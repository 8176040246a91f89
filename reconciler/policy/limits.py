"""The refusals of expressions over Kubernetes' CEL limits (cost.py has the limits and the
estimate), as typed errors of one line each, naming the file, the policy and the limit.
Pure: no I/O."""

from __future__ import annotations

from typing import Any, Final

from reconciler.config.policy_file import Expression, Policy
from reconciler.errors import PolicyCostError, PolicyLimitError, PolicyNestingError
from reconciler.policy import cost

# Ours: the expressions of one revision, in all. The parser reads about 9,000 characters a
# second at worst (a flat list of small literals), so 200,000 parse in about 20 s; 25 real
# policies (the benchmark's) hold about 11,000.
MAX_REVISION_CODE_POINTS: Final = 200_000


class Refusals:
    """The limit refusals of one compile_policies: the first is raised (saying how many
    more), since each is one line with its own hint."""

    def __init__(self) -> None:
        self.found: list[PolicyLimitError] = []
        self.characters = 0

    def before_parse(self, policy: Policy, expression: Expression) -> bool:
        """Refused (True) if too long or nested too deep to parse, alone or with the
        expressions before it; checked on the text."""
        self.characters += len(expression.text)
        why = cost.too_long(expression.text)
        if why is not None:
            why += " (cel-go's parser limits)"
        elif self.characters > MAX_REVISION_CODE_POINTS:
            why = (
                f"brings the policies' expressions to {self.characters:,} characters in all; "
                f"the limit is {MAX_REVISION_CODE_POINTS:,} (ours, for the parse time)"
            )
        else:
            return False
        self.found.append(
            PolicyNestingError(
                f"policy {policy.name}: the expression {why}",
                where=expression.where,
                hint=f"split it, or name its parts with more validations; nesting beyond "
                f"{cost.MAX_NESTING} or {cost.MAX_CODE_POINTS:,} characters is refused as "
                "Kubernetes refuses it",
            )
        )
        return True

    def after_parse(self, policy: Policy, expression: Expression, ast: Any) -> bool:
        """Refused (True) if nested too deep once parsed (operator chains, ternaries), or
        estimated to cost more than one expression may (Kubernetes' PerCallLimit)."""
        depth = cost.tree_depth(ast)
        if depth > cost.MAX_NESTING:
            self.found.append(
                PolicyNestingError(
                    f"policy {policy.name}: the expression is nested {depth:,} deep; the limit "
                    f"is {cost.MAX_NESTING} (cel-go's parser maxRecursionDepth)",
                    where=expression.where,
                    hint="split a long chain of operators or ternaries into several validations",
                )
            )
            return True
        estimated = cost.estimate(ast)
        if estimated <= cost.PER_CALL_LIMIT:
            return False
        self.found.append(
            PolicyCostError(
                f"policy {policy.name}: the expression's estimated worst-case cost is "
                f"{int(estimated):,}; the limit is {cost.PER_CALL_LIMIT:,} (Kubernetes' "
                "PerCallLimit)",
                where=expression.where,
                hint="iterate over fewer or shorter lists (each nested all/exists/map "
                f"multiplies the cost; a list read from the object counts as "
                f"{cost.UNKNOWN_ITEMS} items)",
            )
        )
        return True

    def raise_first(self) -> None:
        if not self.found:
            return
        first = self.found[0]
        if len(self.found) > 1:
            more = f" (and {len(self.found) - 1} more expressions over a limit)"
            first = type(first)(first.message + more, where=first.where, hint=first.hint)
        raise first
