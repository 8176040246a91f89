"""The scontrol adapter against a real slurmctld 22.05, authenticated with JWT."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.scontrol_args import NodeState
from reconciler.adapters.slurm.jwt import MintedTokens, mint_token
from reconciler.adapters.slurm.model import SlurmNode, SlurmRestApi
from reconciler.errors import ScontrolError, ScontrolTimeoutError, SlurmArgumentError
from reconciler.wellknown import DRAIN_REASON_PREFIX
from tests.integration.endpoints import SlurmEndpoints
from tests.integration.helpers import FixedToken, unique, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def node(slurm: SlurmEndpoints, scontrol: Scontrol, api: SlurmRestApi) -> Iterator[str]:
    """The last session node, resumed and back to plain IDLE after the test."""
    name = slurm.node_names[-1]
    yield name
    left = api.node(name)
    if left is None or left.drain_requested or left.state == "DOWN":  # None: FUTURE
        scontrol.set_node_state(name, NodeState.RESUME)
    wait_for(lambda: idle_clean(api, name), 30, f"{name} IDLE again")


def idle_clean(api: SlurmRestApi, name: str) -> SlurmNode | None:
    node = api.node(name)
    return node if node and node.state == "IDLE" and not node.flags else None


def test_drain_keeps_the_reason_and_resume_clears_it(
    api: SlurmRestApi, scontrol: Scontrol, node: str
) -> None:
    reason = f"{DRAIN_REASON_PREFIX} it drain {uuid.uuid4().hex[:6]} (nodeset gpu-a)"
    scontrol.drain_node(node, reason)
    drained = api.node(node)
    assert drained is not None and drained.drain_requested
    assert drained.reason == reason
    scontrol.resume_node(node)
    resumed = wait_for(lambda: idle_clean(api, node), 30, "resume")
    assert not resumed.drain_requested


@pytest.mark.parametrize(
    ("nodes", "reason"),
    [
        ("{node}", "x state=resume"),
        ("{node}", "maintenance\nState=RESUME"),
        ("{node}", '"quoted" Weight=5'),
        ("{node} State=DOWN", "reconciler: x"),
        ("{node},weight=5", "reconciler: x"),
    ],
)
def test_injection_attempts_are_refused_and_change_nothing(
    api: SlurmRestApi, scontrol: Scontrol, node: str, nodes: str, reason: str
) -> None:
    before = api.node(node)
    with pytest.raises(SlurmArgumentError):
        scontrol.drain_node(nodes.format(node=node), reason)
    after = api.node(node)
    assert before is not None and after is not None
    assert not after.drain_requested
    assert (after.weight, after.reason) == (before.weight, before.reason)


def test_state_with_an_extra_option_is_refused(scontrol: Scontrol, node: str) -> None:
    with pytest.raises(SlurmArgumentError):
        scontrol.set_node_state(node, "DOWN Weight=5")  # type: ignore[arg-type]


def test_down_then_resume(api: SlurmRestApi, scontrol: Scontrol, node: str) -> None:
    scontrol.set_node_state(node, NodeState.DOWN, f"{DRAIN_REASON_PREFIX} it down")
    down = api.node(node)
    assert down is not None and down.state == "DOWN"
    assert down.reason == f"{DRAIN_REASON_PREFIX} it down"
    scontrol.set_node_state(node, NodeState.RESUME)
    wait_for(lambda: idle_clean(api, node), 30, "resume from DOWN")


def test_future_hides_the_node_and_resume_brings_it_back(
    api: SlurmRestApi, scontrol: Scontrol, node: str
) -> None:
    scontrol.set_node_state(node, NodeState.FUTURE)
    assert api.node(node) is None
    assert node not in {n.name for n in api.nodes().items}
    scontrol.set_node_state(node, NodeState.RESUME)  # its slurmd still runs and re-registers
    wait_for(lambda: idle_clean(api, node), 30, "the node back from FUTURE")


def test_unknown_node_is_a_typed_error(scontrol: Scontrol) -> None:
    with pytest.raises(ScontrolError) as caught:
        scontrol.drain_node(unique("nosuchnode"), "reconciler: x")
    assert caught.value.exit_code == 1
    assert "Invalid node name specified" in caught.value.output


def test_reservation_create_update_delete(
    api: SlurmRestApi, scontrol: Scontrol, slurm: SlurmEndpoints
) -> None:
    name = unique("it-maint")
    scontrol.create_reservation(
        name,
        {"Nodes": slurm.node_names[0], "StartTime": "now+2hours", "Duration": 30,
         "Users": slurm.user, "Flags": ["MAINT"]},
    )  # fmt: skip
    try:
        [created] = [r for r in api.reservations().items if r.name == name]
        assert "MAINT" in created.flags
        assert created.end_time - created.start_time == 30 * 60
        scontrol.update_reservation(name, {"Duration": 90})
        [updated] = [r for r in api.reservations().items if r.name == name]
        assert updated.end_time - updated.start_time == 90 * 60
    finally:
        assert scontrol.delete_reservation(name, missing_ok=True)
    assert name not in {r.name for r in api.reservations().items}
    assert scontrol.delete_reservation(name, missing_ok=True) is False


def test_reservation_slurm_refuses_is_a_typed_error(
    scontrol: Scontrol, slurm: SlurmEndpoints
) -> None:
    # 24.11: "Users/Groups and/or Accounts"; 25.11 on: "Users/Groups, AllowedPartitions, QOS
    # and/or Accounts".
    with pytest.raises(ScontrolError, match=r"Users/Groups.* and/or Accounts must be specified"):
        scontrol.create_reservation(
            unique("it-nouser"), {"Nodes": slurm.node_names[0], "StartTime": "now", "Duration": 5}
        )


def test_foreign_token_is_refused_and_never_shown(slurm: SlurmEndpoints) -> None:
    forged = mint_token(b"not-the-cluster-key-" * 2, slurm.user, now=int(time.time()), lifetime=600)
    foreign = Scontrol(FixedToken(slurm.user, forged), env=slurm.env)
    with pytest.raises(ScontrolError) as caught:
        foreign.drain_node(slurm.node_names[0], "reconciler: must not happen")
    assert caught.value.hint is not None and "JWT" in caught.value.hint
    assert forged not in str(caught.value) and forged not in " ".join(caught.value.command)


def test_slow_scontrol_times_out(slurm: SlurmEndpoints, tokens: MintedTokens) -> None:
    impatient = Scontrol(tokens, env=slurm.env, timeout=0.001)
    with pytest.raises(ScontrolTimeoutError):
        impatient.reconfigure()


def test_reconfigure_keeps_the_cluster_up(
    api: SlurmRestApi, scontrol: Scontrol, slurm: SlurmEndpoints
) -> None:
    scontrol.reconfigure()
    api.ping()
    wait_for(
        lambda: all(idle_clean(api, name) for name in slurm.node_names),
        30,
        "nodes after reconfigure",
    )
