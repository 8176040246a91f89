"""Pod deletions for vanished jobs are rate-limited per poll interval (one bad answer from
Slurm cannot delete every Pod at once)."""

from __future__ import annotations

from reconciler.scheduler.budget import PassBudget


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_pass_allows_its_budget_and_no_more() -> None:
    clock = Clock()
    budget = PassBudget(3, 5.0, clock)
    assert [budget.take() for _ in range(5)] == [True, True, True, False, False]


def test_the_budget_comes_back_with_time_but_never_piles_up() -> None:
    clock = Clock()
    budget = PassBudget(3, 5.0, clock)
    for _ in range(3):
        budget.take()
    clock.now += 5.0 / 3  # a third of a pass: one more
    assert [budget.take() for _ in range(2)] == [True, False]
    clock.now += 3600.0  # an idle hour still gives one pass's worth
    assert sum(budget.take() for _ in range(10)) == 3


def test_a_clock_that_steps_back_gives_nothing() -> None:
    clock = Clock()
    budget = PassBudget(1, 5.0, clock)
    assert budget.take()
    clock.now -= 50.0
    assert not budget.take()
