"""Integers a Pod's author writes cannot blind the scheduler: each is counted before int()
reads it (CPython refuses more than 4,300 digits with ValueError), held to the range Slurm
takes, and refused with a Problem that names the annotation and the limit, never echoing a
long value; a Pod the scheduler cannot read is skipped where every Pod is read."""

from __future__ import annotations

import logging
import threading
from typing import Any, cast

import pytest

from reconciler import wellknown as wk
from reconciler.kuberules.integers import SHOWN_CHARS, Bounds, Misread, parse_int, shown
from reconciler.kuberules.node_affinity import node_matches, requirement_error
from reconciler.kuberules.problem import Problem
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.counters import Counters
from reconciler.scheduler.decide.admission import admit, run_as_user
from reconciler.scheduler.decide.gang_decide import MAX_GANG_MEMBERS, gang_from_annotations
from reconciler.scheduler.decide.pod_decide import recorded_job_id
from reconciler.scheduler.hook_server import parse_call
from reconciler.scheduler.job_reads_effects import JobReads
from reconciler.scheduler.job_trust import JobTrust
from reconciler.scheduler.settings import settings_from_values
from reconciler.scheduler.state import SchedulerState
from reconciler.scheduler.workqueue import WorkQueue
from tests.unit.test_scheduler_admission import pod

HUGE = "9" * 4301  # one digit past CPython's int-from-str limit
MAX_ID = 0xFFFFFFFD  # Slurm reads 0xfffffffe and 0xffffffff as NO_VAL and INFINITE
INTEGER_ANNOTATIONS = (
    wk.ANNOTATION_USER_ID, wk.ANNOTATION_GROUP_ID, wk.ANNOTATION_TIMEOUT, wk.ANNOTATION_PRIORITY
)  # fmt: skip

# ---- the parser ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0), (str(MAX_ID), MAX_ID), ("007", 7), ("-0", 0),
        (str(MAX_ID + 1), Misread.ABOVE), (HUGE, Misread.ABOVE), ("0" * 5000 + "5", 5),
        ("-1", Misread.BELOW), ("-" + HUGE, Misread.BELOW),
        ("\u00b2", Misread.NOT_AN_INTEGER), ("\u0661\u0662", Misread.NOT_AN_INTEGER),
        ("+5", Misread.NOT_AN_INTEGER), (" 5", Misread.NOT_AN_INTEGER),
        ("", Misread.NOT_AN_INTEGER), ("1_000", Misread.NOT_AN_INTEGER),
        ("5\n", Misread.NOT_AN_INTEGER), ("-", Misread.NOT_AN_INTEGER),
    ],
)  # fmt: skip
def test_parse_int_counts_digits_before_reading_them(text: str, expected: int | Misread) -> None:
    assert parse_int(text, 0, MAX_ID) == expected


def test_parse_int_takes_a_plus_sign_only_when_asked_and_signed_bounds() -> None:
    assert parse_int("+5", 0, 9, plus=True) == 5
    assert parse_int("-9223372036854775808", -(2**63), 2**63 - 1) == -(2**63)
    assert parse_int("-9223372036854775809", -(2**63), 2**63 - 1) is Misread.BELOW
    assert parse_int("-" + HUGE, -(2**63), 2**63 - 1, plus=True) is Misread.BELOW


def test_bounds_strip_whitespace_and_name_the_field_and_limit_not_a_long_value() -> None:
    bounds = Bounds(1, 10, above=" (why)")
    assert bounds.read("f", " 7\t") == 7
    assert bounds.read("f", "") == Problem("f", "must be an integer, got ''")
    assert bounds.read("f", "0") == Problem("f", "must be 1 or more, got '0'")
    too_big = bounds.read("f", HUGE)
    assert isinstance(too_big, Problem)
    assert too_big.message.startswith("must be 10 or less (why), got a value of 4,301 characters")
    assert len(too_big.message) < 100
    assert shown("x" * SHOWN_CHARS) == repr("x" * SHOWN_CHARS)


# ---- admission -------------------------------------------------------------------------------


@pytest.mark.parametrize("key", INTEGER_ANNOTATIONS)
def test_a_4301_digit_integer_annotation_is_refused_naming_it_and_its_length(key: str) -> None:
    found = admit(pod(annotations={key: HUGE}), kill_wait_seconds=30)
    assert not hasattr(found, "cpus"), found
    message = found.message()  # type: ignore[union-attr]
    assert key in message and "4,301 characters" in message and "4294967293 or less" in message
    assert "9" * 40 not in message


@pytest.mark.parametrize("key", [wk.ANNOTATION_TIMEOUT, wk.ANNOTATION_PRIORITY])
def test_timeout_and_priority_stop_below_slurms_no_val(key: str) -> None:
    """Slurm's time limit and priority are uint32 with NO_VAL and INFINITE reserved."""
    assert not hasattr(admit(pod(annotations={key: str(MAX_ID + 1)}), kill_wait_seconds=30),
                       "cpus")  # fmt: skip
    assert hasattr(admit(pod(annotations={key: str(MAX_ID)}), kill_wait_seconds=30), "cpus")


def test_the_user_a_pod_runs_as_is_none_for_a_4301_digit_user_id() -> None:
    assert run_as_user(pod(annotations={wk.ANNOTATION_USER_ID: HUGE}), 1000) is None


# ---- the readers of all Pods -----------------------------------------------------------------


class _Slurm22:
    """What JobTrust.ownership reads of the Slurm clients on 22.05 (v0.0.38): no admin
    comments, so each key's users come from its Pods."""

    submits_as_user = False
    operator_user = "root"


def _trust(state: SchedulerState) -> JobTrust:
    settings = settings_from_values({}, release="r", namespace="n")
    return JobTrust(state, cast(SlurmClients, _Slurm22()), settings, WorkQueue(), Counters())


def _state_pod(uid: str, annotations: dict[str, str]) -> dict[str, Any]:
    found = pod(annotations=annotations)
    found["metadata"].update(uid=uid, namespace="ns", name=uid)
    return found


def test_ownership_survives_a_poisoned_pod_in_state() -> None:
    """On 22.05 every job poll and hook asks ownership(), which reads every Pod's user-id."""
    state = SchedulerState()
    state.on_pod("ADDED", _state_pod("bad", {wk.ANNOTATION_USER_ID: HUGE}))
    state.on_pod("ADDED", _state_pod("good", {wk.ANNOTATION_USER_ID: "1001"}))
    owner = _trust(state).ownership()
    assert owner.users == {"good": frozenset({"1001"})}


def test_ownership_skips_a_pod_it_cannot_read_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = SchedulerState()
    state.on_pod("ADDED", _state_pod("good", {wk.ANNOTATION_USER_ID: "1001"}))
    broken = _state_pod("broken", {wk.ANNOTATION_USER_ID: "1002"})
    state.pods["broken"] = {**broken, "metadata": {"name": "broken", "annotations": {
        wk.ANNOTATION_USER_ID: "1002"}}}  # no uid: a Pod no read of ours expects  # fmt: skip
    trust = _trust(state)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert trust.ownership().users == {"good": frozenset({"1001"})}
    skipped = [r for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(skipped) == 1 and skipped[0].exc_info is None, caplog.text


def test_a_4301_digit_job_id_annotation_records_no_job() -> None:
    assert recorded_job_id(_state_pod("p", {wk.ANNOTATION_JOB_ID: HUGE})) is None
    assert recorded_job_id(_state_pod("p", {wk.ANNOTATION_JOB_ID: "42"})) == 42


def test_a_4301_digit_job_in_a_hook_call_is_no_call() -> None:
    assert parse_call(f"/hooks/v1/pods/u/started?job={HUGE}&node=n1") is None


@pytest.mark.parametrize("raw", [HUGE, str(MAX_GANG_MEMBERS + 1)])
def test_a_gang_size_past_the_limit_is_a_problem_naming_it(raw: str) -> None:
    member = _state_pod("a", {wk.ANNOTATION_POD_GROUP: "g",
                              wk.ANNOTATION_POD_GROUP_MIN_MEMBER: raw})  # fmt: skip
    found = gang_from_annotations("ns", "g", [member], "restart")
    assert isinstance(found, Problem), found
    assert wk.ANNOTATION_POD_GROUP_MIN_MEMBER in found.field
    assert f"{MAX_GANG_MEMBERS} or less" in found.message and "9" * 40 not in found.message


def test_members_disagreeing_on_4301_digit_sizes_are_not_echoed() -> None:
    members = [
        _state_pod(n, {wk.ANNOTATION_POD_GROUP: "g", wk.ANNOTATION_POD_GROUP_MIN_MEMBER: size})
        for n, size in (("a", HUGE), ("b", HUGE + "8"))
    ]
    found = gang_from_annotations("ns", "g", members, "restart")
    assert isinstance(found, Problem) and "9" * 40 not in found.message, found


def test_a_4301_digit_gt_value_is_no_integer_to_node_affinity() -> None:
    requirement = {"key": "k", "operator": "Gt", "values": [HUGE]}
    assert requirement_error(requirement) == (
        "for 'Gt', 'Lt' operators, the value must be an integer"
    )
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [requirement]}]}}}  # fmt: skip
    assert not node_matches({"spec": {"affinity": affinity}}, {"k": "5"})


# ---- the poll --------------------------------------------------------------------------------


def test_the_poll_survives_any_exception_from_one_poll(caplog: pytest.LogCaptureFixture) -> None:
    reads = JobReads(
        SchedulerState(), cast(SlurmClients, None), cast(JobTrust, None), WorkQueue(),
        Counters(), poll_seconds=0.01, repack=threading.Event(),
    )  # fmt: skip
    stopping, calls = threading.Event(), []

    def poll() -> None:
        calls.append(1)
        if len(calls) >= 3:
            stopping.set()
        raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")

    with caplog.at_level(logging.WARNING):
        reads.poll_forever(stopping, poll)
    assert len(calls) == 3
    assert "polling Slurm jobs failed" in caplog.text
