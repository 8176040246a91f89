"""slurmd's roll in an upgrade: drain, delete once idle, resume once at the new release, a
quarter of the nodes out at a time; a drain someone else set is left to them."""

from __future__ import annotations

from reconciler.plan.upgrade_roll import Roll, RollNode, most_out, roll, upgrade_drain_reason

NEW = ("26.05.3",)
OURS = upgrade_drain_reason(NEW)


def node(name: str, *, current: bool = False, reason: str | None = None, busy: bool = False,
         version: str | None = "24.11.5", exists: bool = True) -> RollNode:  # fmt: skip
    return RollNode(name, exists, current, reason, busy, version)


def test_the_reason_names_the_release_and_is_ours() -> None:
    assert OURS == "reconciler: Slurm upgrade to 26.05.3"


def test_a_quarter_of_the_nodes_at_least_one_go_out_at_a_time() -> None:
    assert [most_out(n) for n in (1, 2, 4, 5, 8, 9)] == [1, 1, 1, 2, 2, 3]
    nodes = [node(f"gpu-{i}") for i in range(8)]
    assert roll(nodes, NEW) == Roll(drain=("gpu-0", "gpu-1"))


def test_idle_nodes_go_out_before_a_node_a_job_holds() -> None:
    nodes = [node("c-0", busy=True), node("c-1"), node("c-2", busy=True), node("c-3")]
    assert roll(nodes, NEW) == Roll(drain=("c-1",))
    nodes = [node("c-0", busy=True), node("c-1", busy=True)]
    assert roll(nodes, NEW) == Roll(drain=("c-0",))


def test_nodes_drained_for_the_upgrade_count_as_out_even_while_their_pod_is_made_anew() -> None:
    nodes = [node("gpu-0", reason=OURS, exists=False), *(node(f"gpu-{i}") for i in range(1, 4))]
    assert roll(nodes, NEW) == Roll()


def test_a_drained_node_is_deleted_only_when_no_job_holds_it() -> None:
    nodes = [node("gpu-0", reason=OURS, busy=True), node("gpu-1", reason=OURS),
             *(node(f"gpu-{i}") for i in range(2, 8))]  # fmt: skip
    assert roll(nodes, NEW) == Roll(delete=("gpu-1",), held=("gpu-0",))


def test_a_new_pod_is_resumed_once_its_slurmd_registered_at_the_new_release() -> None:
    assert roll([node("c-0", current=True, reason=OURS, version=None)], NEW) == Roll()
    assert roll([node("c-0", current=True, reason=OURS, version="24.11.5")], NEW) == Roll()
    assert roll([node("c-0", current=True, reason=OURS, version="26.05.3")], NEW) == Roll(
        resume=("c-0",)
    )
    # A release written as a series is met by every patch of it.
    series = [node("c-0", current=True, reason=upgrade_drain_reason(("26.05",)),
                   version="26.05.3")]  # fmt: skip
    assert roll(series, ("26.05",)) == Roll(resume=("c-0",))


def test_a_drain_someone_else_set_is_restarted_when_idle_and_never_cleared() -> None:
    admin = "bad DIMM, ticket 4411"
    nodes = [node("c-0", reason=admin), node("c-1", reason=admin, busy=True), node("c-2"),
             node("c-3"), node("c-4")]  # fmt: skip
    assert roll(nodes, NEW) == Roll(drain=("c-2", "c-3"), delete=("c-0",))
    assert roll([node("c-0", current=True, reason=admin, version="26.05.3")], NEW) == Roll()


def test_nodes_on_the_new_template_and_not_drained_need_nothing() -> None:
    assert roll([node("c-0", current=True, version="26.05.3")], NEW) == Roll()
    assert not roll([], NEW)
