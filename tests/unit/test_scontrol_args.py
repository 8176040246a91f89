"""scontrol argument validation: every value is checked, nothing can smuggle in an option."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters.client_env import child_env
from reconciler.adapters.sacctmgr import ACCOUNT_OPTIONS, QOS_OPTIONS, USER_OPTIONS
from reconciler.adapters.sacctmgr import check_name as sacctmgr_check_name
from reconciler.adapters.scontrol import error_summary
from reconciler.adapters.scontrol_args import (
    RESERVATION_OPTIONS,
    NodeState,
    check_hostlist,
    check_name,
    check_text,
    node_state_args,
    node_weight_args,
    reservation_args,
)
from reconciler.errors import ScontrolError, SlurmArgumentError

INJECTIONS = [
    "x state=resume",  # a second key=value inside one value
    "x\nstate=resume",  # newline: scontrol keeps it, humans reading sinfo don't
    "x\tweight=5",
    '"quoted" more',  # scontrol strips a leading quote and keeps the rest
    "'single'",
    "a=b",
    "back\\slash",
    "semi`tick`",
    "$(reboot)",
    "",
    " leading",
    "trailing ",
    "x" * 256,
    "caf\u00e9",  # non-ASCII
]


def test_drain_builds_one_argv_element_per_option() -> None:
    assert node_state_args("node[1-2]", NodeState.DRAIN, "reconciler: shrink gpu-a (rev 1f2e)") == [
        "update", "NodeName=node[1-2]", "State=DRAIN", "Reason=reconciler: shrink gpu-a (rev 1f2e)",
    ]  # fmt: skip


def test_resume_needs_no_reason() -> None:
    assert node_state_args("node1", NodeState.RESUME) == [
        "update",
        "NodeName=node1",
        "State=RESUME",
    ]


@pytest.mark.parametrize("state", [NodeState.DRAIN, NodeState.DOWN, NodeState.FAIL])
def test_states_scontrol_refuses_without_reason_are_refused_here(state: NodeState) -> None:
    with pytest.raises(SlurmArgumentError, match="reason"):
        node_state_args("node1", state)


def test_state_must_be_a_known_state() -> None:
    with pytest.raises(SlurmArgumentError):
        node_state_args("node1", "IDLE weight=1")  # type: ignore[arg-type]


@pytest.mark.parametrize("reason", INJECTIONS)
def test_reason_injections_are_refused(reason: str) -> None:
    with pytest.raises(SlurmArgumentError):
        node_state_args("node1", NodeState.DRAIN, reason)


@pytest.mark.parametrize(
    "nodes",
    ["node1 State=RESUME", "node1\n", "-v", "node[1-2", "node]1[", "node1,,node2", "a=b", ""],
)
def test_bad_hostlists_are_refused(nodes: str) -> None:
    with pytest.raises(SlurmArgumentError):
        check_hostlist("node", nodes)


@pytest.mark.parametrize("nodes", ["node1", "node[1-4]", "node[1-2,7],gpu01", "n.example-1"])
def test_good_hostlists_pass(nodes: str) -> None:
    assert check_hostlist("node", nodes) == nodes


@pytest.mark.parametrize("name", ["-p", "a b", "a=b", "a,b", "a/b", "", "x" * 129, None, 5])
def test_bad_names_are_refused(name: object) -> None:
    with pytest.raises(SlurmArgumentError):
        check_name("partition", name)


def test_free_text_keeps_punctuation_people_use() -> None:
    text = "reconciler: node health check failed; see #42 @ops [gpu-a] (disk/nvme0) +1"
    assert check_text("reason", text) == text


def test_error_names_the_argument_and_truncates_the_value() -> None:
    with pytest.raises(SlurmArgumentError) as caught:
        check_text("reason", "=" * 300)
    assert caught.value.argument == "reason"
    assert len(str(caught.value)) < 200


def test_reservation_options() -> None:
    args = reservation_args(
        "create", "maint-1",
        {"Nodes": "node[1-2]", "StartTime": "now+1hour", "Duration": "1-00:00:00",
         "Users": "root", "Flags": ["maint", "ignore_jobs"]},
    )  # fmt: skip
    assert args == [
        "create", "ReservationName=maint-1", "Nodes=node[1-2]", "StartTime=now+1hour",
        "Duration=1-00:00:00", "Users=root", "Flags=MAINT,IGNORE_JOBS",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "options",
    [
        {"StartTime": "tomorrow; rm"},
        {"StartTime": "now Users=evil"},
        {"Flags": "MAINT,BOGUS"},
        {"TRES": "cpu=4"},  # contains '=': not offered
        {"Users": "root,-x"},
        {"Duration": "60 Flags=MAINT"},
    ],
)
def test_bad_reservation_options_are_refused(options: dict) -> None:
    with pytest.raises(SlurmArgumentError):
        reservation_args("create", "maint-1", options)


def test_child_env_drops_inherited_slurm_vars_and_adds_the_token() -> None:
    env = child_env(
        {"PATH": "/bin", "SLURM_CONF": "/etc/other.conf", "SLURM_JWT": "old"},
        {"SLURM_CONF": "/tmp/x/slurm.conf"},
        "tok",
    )
    assert env == {"PATH": "/bin", "SLURM_CONF": "/tmp/x/slurm.conf", "SLURM_JWT": "tok"}


def test_error_summary_drops_noise_lines() -> None:
    stderr = (
        "scontrol: error: Update of this parameter is not supported: Bogus=1\n\n"
        "scontrol: error: Request aborted\nslurm_update error: No error\n"
    )
    assert error_summary(stderr) == "Update of this parameter is not supported: Bogus=1"


def test_scontrol_error_text_has_command_and_exit_code() -> None:
    error = ScontrolError(["update", "NodeName=x"], exit_code=1, message="Invalid node name")
    assert str(error) == "scontrol update NodeName=x: Invalid node name (exit 1)"
    assert error.output == "Invalid node name"


def test_node_weight_is_a_positive_integer_slurm_can_hold() -> None:
    assert node_weight_args("gpu-[0-3]", 7) == ["update", "NodeName=gpu-[0-3]", "Weight=7"]
    for bad in (0, -1, 2**32 - 1, True, "7"):
        with pytest.raises(SlurmArgumentError, match="node weight"):
            node_weight_args("gpu-0", bad)  # type: ignore[arg-type]


# No value from git can add a line: whatever a value's kind, a control character (or a line
# separator) in it is refused before scontrol or sacctmgr starts; every grammar is matched whole.
_CHECKERS = [
    *(("scontrol reservation", k, c) for k, c in RESERVATION_OPTIONS.items()),
    *(("sacctmgr qos", k, c) for k, c in QOS_OPTIONS.items()),
    *(("sacctmgr account", k, c) for k, c in ACCOUNT_OPTIONS.items()),
    *(("sacctmgr user", k, c) for k, c in USER_OPTIONS.items()),
    ("scontrol", "name", check_name),
    ("scontrol", "hostlist", check_hostlist),
    ("scontrol", "text", check_text),
    ("sacctmgr", "name", sacctmgr_check_name),
]
_GOOD = ["now", "2030-01-01T10:00:00", "10", "1-00:00:00", "UNLIMITED", "node[1-2]", "a,b",
         "YES", "UP", "MAINT", "OFF", "cpu=8", "requeue", "x", "reconciler: drain"]  # fmt: skip
_CONTROL = ["\n", "\r", "\t", "\x00", "\x0b", "\x1b", "\x7f", "\x85", "\u2028"]


def _accepts(checker: Any, value: str) -> bool:
    try:
        checker("value", value)
    except SlurmArgumentError:
        return False
    return True


@pytest.mark.parametrize("checker", _CHECKERS, ids=lambda c: f"{c[0]} {c[1]}")
def test_no_argument_checker_lets_a_control_character_through(checker: tuple) -> None:
    """Each value the checker accepts, with a control character at its start, its end or
    inside, is refused (checkers that take only integers accept none of these strings)."""
    for good in (g for g in _GOOD if _accepts(checker[2], g)):
        for control in _CONTROL:
            for value in (control + good, good + control, good[:1] + control + good[1:]):
                assert not _accepts(checker[2], value), (good, value)
