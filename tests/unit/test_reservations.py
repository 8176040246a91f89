"""Reservations in git: parsing and validation (file:line errors), and the plan over plain live
data: create / update / recreate / delete ours, warn about the others."""

from __future__ import annotations

import dataclasses
import datetime
import json

import pytest

from reconciler.adapters.scontrol_args import reservation_args
from reconciler.adapters.slurm.model import SlurmReservation
from reconciler.apply.executor import apply_plan
from reconciler.apply.live_reader import live_reservation
from reconciler.apply.target import ApplyError, ApplyOptions, Target
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.config.reservations import reservation_minutes
from reconciler.errors import CompileError, ConfigTypeError, SlurmArgumentError
from reconciler.plan.diff import plan_changes
from reconciler.plan.jsonout import plan_from_dict, plan_to_dict
from reconciler.plan.live import LiveReservation, LiveState
from reconciler.plan.model import STEP_RECREATE, Action, Change, Plan
from reconciler.plan.text import render_text
from tests.unit.conftest import config_from

NODES = """
compute:
  nodes:
    gpu:
      definitions: [rtx4000, cu117, las1]
      replicas: 2
      maxReplicas: 3
    cpu:
      definitions: [cpu-epyc, las1]
      replicas: 1
    retired:
      enabled: false
      definitions: [cpu-epyc, las1]
"""
START = "2030-01-01T08:00:00Z"
T0 = int(datetime.datetime(2030, 1, 1, 8, tzinfo=datetime.UTC).timestamp())
HOUR, DAY = 3600, 86400


def _values(reservations: str) -> str:
    # defMemPerCPU fits both shapes (4096 x their CPUs is more than they have: a plan warning).
    return NODES + "slurmConfig:\n  defMemPerCPU: 1024\n  reservations:\n" + reservations


def _state(reservations: str, files: dict[str, str] | None = None) -> DesiredState:
    return compile_desired_state(config_from(_values(reservations), files))


MAINT = f"""
    maint:
      nodeDefinition: gpu
      startTime: {START}
      duration: 120
      users: [root]
      flags: [MAINT, IGNORE_JOBS]
"""


# ---- parsing ------------------------------------------------------------------------------


def test_a_reservation_compiles_to_slurm_names_nodes_and_times() -> None:
    state = _state(
        MAINT
        + """
    weekly:
      nodes: slurm-cpu-0,slurm-gpu-[1-2]
      startTime: "2030-01-01T10:00:00+02:00"
      endTime: 2030-01-01T12:30:00+02:00
      recurring: weekly
      accounts: research,ops
      flags: overlap
"""
    )
    maint, weekly = state.reservations
    assert maint.name == "slurm-maint" and maint.key == "maint"
    assert maint.nodes == ("slurm-gpu-0", "slurm-gpu-1") and maint.hostlist == "slurm-gpu-[0-1]"
    assert (maint.start, maint.end, maint.duration_minutes) == (T0, None, 120)
    assert maint.users == ("root",) and maint.accounts == ()
    assert maint.flags == ("IGNORE_JOBS", "MAINT") and maint.recurring is None
    assert maint.where.startswith("values.yaml:")
    # A spare (slurm-gpu-2, FUTURE) may be reserved too; times with an offset are UTC inside.
    assert weekly.nodes == ("slurm-cpu-0", "slurm-gpu-1", "slurm-gpu-2")
    assert (weekly.start, weekly.end) == (T0, T0 + 2 * HOUR + 1800)
    assert weekly.recurring == "WEEKLY" and weekly.flags == ("OVERLAP",)
    assert weekly.accounts == ("research", "ops")


def test_unquoted_yaml_times_become_text_again_in_values() -> None:
    config = config_from(_values(MAINT))
    assert config.values["slurmConfig"]["reservations"]["maint"]["startTime"] == (
        "2030-01-01T08:00:00+00:00"
    )


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        (90, 90),
        ("90", 90),
        ("1:30:00", 90),
        ("30:30", 31),  # minutes:seconds, rounded up as Slurm does
        ("2-00:00:00", 2880),
        ("1-12", 2160),
        ("UNLIMITED", 365 * 24 * 60),
    ],
)
def test_durations_read_as_slurm_reads_them(text: object, minutes: int) -> None:
    assert reservation_minutes(text) == minutes


def test_values_d_adds_to_and_removes_reservations() -> None:
    state = _state(
        MAINT.replace("      users: [root]\n", "")
        + "    gone:\n      nodes: slurm-cpu-0\n      startTime: now\n      duration: 5\n"
        "      users: root\n",
        {
            "values.d/20-resv.yaml": """
                slurmConfig:
                  reservations:
                    maint: {accounts: [ops]}
                    gone: null
                """
        },
    )
    [maint] = state.reservations
    assert maint.accounts == ("ops",) and maint.users == ()


def _error(reservations: str, files: dict[str, str] | None = None) -> str:
    with pytest.raises((ConfigTypeError, CompileError)) as caught:
        _state(reservations, files)
    return str(caught.value)


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_unknown_flag_names_file_line_and_the_closest_flag() -> None:
    text = _error(MAINT.replace("[MAINT, IGNORE_JOBS]", "[MAINTT]"))
    line = _line_of(_values(MAINT), "flags:")
    assert text.startswith(f"values.yaml:{line} (slurmConfig.reservations.maint.flags): ")
    assert "unknown reservation flag 'MAINTT'; did you mean 'MAINT'?" in text
    assert "hint: flags are FLEX, IGNORE_JOBS, MAGNETIC, MAINT," in text


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("DAILY", "hint: write `recurring: DAILY`"),
        ("PURGE_COMP", "slurmrestd 22.05 does not report it"),
        ("SPEC_NODES", "Slurm sets it itself"),
    ],
)
def test_flags_we_cannot_keep_say_why(flag: str, message: str) -> None:
    assert message in _error(MAINT.replace("[MAINT, IGNORE_JOBS]", f"[{flag}]"))


def test_missing_users_and_accounts_is_an_error_at_the_reservation() -> None:
    text = _error(MAINT.replace("      users: [root]\n", ""))
    line = _line_of(_values(MAINT), "maint:")
    assert text.startswith(f"values.yaml:{line} (slurmConfig.reservations.maint): ")
    assert "names no users and no accounts; Slurm requires one of them" in text
    assert "hint: add `users: [alice]` or `accounts: [research]`" in text


def test_nodes_and_node_definition_together_point_at_the_later_one() -> None:
    text = _error(
        MAINT,
        {"values.d/30-x.yaml": "slurmConfig:\n  reservations:\n    maint:\n      nodes: x[1-2]\n"},
    )
    assert text.startswith("values.d/30-x.yaml:4 (slurmConfig.reservations.maint.nodes): ")
    assert "gives both nodes and nodeDefinition" in text and "hint: keep one" in text


@pytest.mark.parametrize(
    ("start", "message"),
    [
        ('"2030-13-01T08:00:00Z"', "'2030-13-01T08:00:00Z' is not an ISO 8601 time"),
        ("2030-01-01T08:00:00", "2030-01-01T08:00:00 has no time zone"),
        ("2030-01-01", "2030-01-01 is a date without a time"),
        ("tomorrow", "'tomorrow' is not an ISO 8601 time"),
    ],
)
def test_bad_times_are_errors_with_the_fix(start: str, message: str) -> None:
    text = _error(MAINT.replace(START, start))
    line = _line_of(_values(MAINT), "startTime:")
    assert text.startswith(f"values.yaml:{line} (slurmConfig.reservations.maint.startTime): ")
    assert message in text and "hint:" in text


def test_unquoted_hms_duration_is_refused_because_yaml_reads_base_60() -> None:
    text = _error(MAINT.replace("duration: 120", "duration: 1:30:00"))
    assert "YAML reads an unquoted H:MM:SS as a number in base 60 (5400)" in text
    assert "hint: quote it: duration: '1:30:00'" in text


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("duration: 120", "endTime: 2030-01-01T07:00:00Z"), "ends (2030-01-01T07:00:00+00:00)"),
        (("duration: 120", "duration: 120\n      endTime: 2030-01-02T00:00:00Z"), "got both"),
        (("      duration: 120\n", ""), "needs exactly one of duration and endTime, got neither"),
        ((f"      startTime: {START}\n", ""), "has no startTime"),
        (("users:", "user:"), "unknown reservation key 'user'; did you mean 'users'?"),
        (("nodeDefinition: gpu", "nodeDefinition: gpus"), "'gpus' is not a compute.nodes entry"),
        (("nodeDefinition: gpu", "nodeDefinition: retired"), "is disabled (enabled: false)"),
        (("nodeDefinition: gpu", "nodes: slurm-gpu-[0-5]"), "does not declare: slurm-gpu-3,"),
        (("nodeDefinition: gpu", "nodes: slurm-gpu-[0-"), "is not a Slurm hostlist"),
        (("users: [root]", "users: [-root]"), "'-root' is not a Slurm user or account name"),
        (("duration: 120", "duration: 0"), "duration must be more than 0 minutes"),
        (("duration: 120", "duration: soon"), "'soon' is not a Slurm duration"),
        (("      users", "      recurring: monthly\n      users"), "recurring must be one of"),
    ],
)
def test_invalid_reservations_are_typed_errors(edit: tuple[str, str], message: str) -> None:
    text = _error(MAINT.replace(*edit))
    assert text.startswith("values.yaml:") and message in text, text


def test_invalid_reservation_name_is_refused() -> None:
    text = _error(MAINT.replace("maint:", "-maint:"))
    assert "reservation name '-maint' cannot name a Slurm reservation" in text


# ---- plan ---------------------------------------------------------------------------------


def _live(*reservations: LiveReservation, now: int = T0 - DAY) -> LiveState:
    return LiveState(reservations={r.name: r for r in reservations}, now=now)


def _maint(**changes: object) -> LiveReservation:
    fields: dict = dict(
        name="slurm-maint", nodes=("slurm-gpu-0", "slurm-gpu-1"), start=T0, end=T0 + 2 * HOUR,
        flags=frozenset({"MAINT", "IGNORE_JOBS"}), users=("root",),
    )  # fmt: skip
    fields.update(changes)
    return LiveReservation(**fields)


def _resv_changes(plan: Plan) -> list[Change]:
    return [c for c in plan.changes if c.ref.kind == "Reservation"]


def _plan(reservations: str, live: LiveState) -> tuple[Plan, list[Change]]:
    state = _state(reservations)
    plan = plan_changes(state, _with_slurm(state, live))
    # `retired` (disabled) has a warning of its own; these tests read the reservations' ones.
    kept = tuple(w for w in plan.warnings if "node definition 'retired' makes no nodes" not in w)
    plan = dataclasses.replace(plan, warnings=kept)
    return plan, _resv_changes(plan)


def _with_slurm(state: DesiredState, live: LiveState) -> LiveState:
    """Live Slurm config equal to the desired one, so only reservations differ."""
    return LiveState(
        slurm_conf=state.slurm_conf,
        gres_conf=state.gres_conf,
        reservations=live.reservations,
        now=live.now,
    )


def test_offline_plan_creates_with_the_exact_scontrol_options() -> None:
    state = _state(MAINT)
    [change] = _resv_changes(plan_changes(state, None, offline=True))
    assert change.action is Action.CREATE and str(change.ref) == "Reservation slurm-maint"
    assert change.desired == {
        "Nodes": "slurm-gpu-[0-1]", "StartTime": T0, "EndTime": T0 + 2 * HOUR,
        "Users": ["root"], "Flags": ["IGNORE_JOBS", "MAINT"],
    }  # fmt: skip
    assert change.after == {
        "name": "slurm-maint", "nodes": "slurm-gpu-[0-1]", "startTime": START,
        "endTime": "2030-01-01T10:00:00Z", "duration": "02:00:00", "users": ["root"],
        "flags": ["IGNORE_JOBS", "MAINT"],
    }  # fmt: skip
    # What apply sends is what scontrol accepts: times as Unix timestamps (uts...).
    args = reservation_args("create", change.ref.name, change.desired)
    assert f"StartTime=uts{T0}" in args and "Flags=IGNORE_JOBS,MAINT" in args


def test_live_equal_to_git_is_unchanged() -> None:
    plan, changes = _plan(MAINT, _live(_maint()))
    assert changes == [] and plan.warnings == ()
    assert "Reservation" not in render_text(plan)


def test_a_change_is_an_update_of_only_what_differs() -> None:
    edited = MAINT.replace("duration: 120", "duration: 180").replace(
        "users: [root]", "accounts: [ops]"
    )
    edited = edited.replace("[MAINT, IGNORE_JOBS]", "[MAINT, FLEX]\n      recurring: DAILY")
    plan, [change] = _plan(edited, _live(_maint()))
    assert change.action is Action.UPDATE and change.steps == ()
    assert change.desired == {
        "EndTime": T0 + 3 * HOUR, "Users": [], "Accounts": ["ops"],
        "Flags": ["DAILY", "FLEX"], "Flags-": ["IGNORE_JOBS"],
    }  # fmt: skip
    assert {f.path for f in change.fields} == {
        "endTime", "duration", "users", "accounts", "flags", "recurring",
    }  # fmt: skip
    assert plan.summary().change == 1
    text = render_text(plan)
    assert "~ Reservation slurm-maint (update)" in text
    assert "-duration: 02:00:00" in text and "+duration: 03:00:00" in text


def test_removing_a_flag_slurm_keeps_for_good_recreates_it() -> None:
    live = _maint(flags=frozenset({"MAINT", "IGNORE_JOBS", "OVERLAP"}))
    _, [change] = _plan(MAINT, _live(live))
    assert change.action is Action.UPDATE and change.steps == (STEP_RECREATE,)
    assert "Slurm cannot remove flag OVERLAP from a reservation" in change.notes
    assert change.desired is not None and change.desired["StartTime"] == T0  # create options


def test_start_now_matches_whatever_start_slurm_gave_it() -> None:
    now_resv = "    pods:\n      nodes: slurm-cpu-0\n      startTime: now\n      duration: 60\n"
    now_resv += "      users: root\n"
    began = T0 - 30 * 60
    live = LiveReservation("slurm-pods", ("slurm-cpu-0",), began, began + HOUR, frozenset(),
                           ("root",))  # fmt: skip
    _, changes = _plan(now_resv, _live(live, now=T0))
    assert changes == []
    _, [change] = _plan(now_resv.replace("60", "90"), _live(live, now=T0))
    assert change.desired == {"EndTime": began + 90 * 60}
    # Not created yet: it starts when apply creates it.
    _, [create] = _plan(now_resv, _live(now=T0))
    assert create.desired == {
        "Nodes": "slurm-cpu-0", "StartTime": "now", "Duration": 60, "Users": ["root"],
    }  # fmt: skip
    assert create.after is not None and create.after["startTime"] == "now"


def test_a_later_repetition_of_a_recurring_reservation_is_unchanged() -> None:
    daily = MAINT.replace("[MAINT, IGNORE_JOBS]", "[MAINT, IGNORE_JOBS]\n      recurring: DAILY")
    three_days = 3 * DAY
    live = _maint(start=T0 + three_days, end=T0 + three_days + 2 * HOUR,
                  flags=frozenset({"MAINT", "IGNORE_JOBS", "DAILY"}))  # fmt: skip
    _, changes = _plan(daily, _live(live, now=T0 + three_days - HOUR))
    assert changes == []
    # Created after its first start: from the next repetition, not shifted to "now".
    _, [create] = _plan(daily, _live(now=T0 + three_days - HOUR))
    assert create.desired is not None and create.desired["StartTime"] == T0 + three_days
    assert "its first start has passed" in create.notes[0]


def test_a_start_that_has_passed() -> None:
    # Not created yet, still to end: created now, ending when git says.
    _, [create] = _plan(MAINT, _live(now=T0 + HOUR))
    assert create.desired is not None
    assert (create.desired["StartTime"], create.desired["EndTime"]) == ("now", T0 + 2 * HOUR)
    # Created then, so Slurm's start is later than git's: both have begun, so it matches.
    _, changes = _plan(MAINT, _live(_maint(start=T0 + HOUR), now=T0 + HOUR + 60))
    assert changes == []
    # Ended: not created, and said so.
    plan, changes = _plan(MAINT, _live(now=T0 + 3 * HOUR))
    assert changes == [] and "ended at 2030-01-01T10:00:00Z: not created" in plan.warnings[0]
    # Moved into the future while it runs: Slurm cannot move its start, so it is recreated.
    later = MAINT.replace(START, "2030-01-02T08:00:00Z")
    _, [change] = _plan(later, _live(_maint(), now=T0 + 60))
    assert change.steps == (STEP_RECREATE,)
    # Git says it is over while Slurm still has it: deleted.
    over = MAINT.replace("duration: 120", "duration: 30")
    _, [change] = _plan(over, _live(_maint(), now=T0 + HOUR))
    assert change.action is Action.DELETE and "git says it ended" in change.notes[0]


def test_ours_gone_from_git_are_deleted_others_only_reported() -> None:
    handmade = LiveReservation(
        "ops-window", ("slurm-cpu-0",), T0, T0 + HOUR, frozenset(), ("root",)
    )
    plan, [change] = _plan(MAINT, _live(_maint(), _maint(name="slurm-old"), handmade))
    assert change.action is Action.DELETE and change.ref.name == "slurm-old"
    assert "ours (named slurm-...) and no longer in git" in change.notes
    assert plan.warnings == (
        "Slurm reservation ops-window is not in git and not ours (its name does not start "
        "with 'slurm-'): left alone",
    )
    assert plan.summary().destroy == 1
    text = render_text(plan)
    assert "- Reservation slurm-old (delete)" in text
    assert "warning: Slurm reservation ops-window is not in git and not ours" in text
    assert "ops-window" not in [c.ref.name for c in plan.changes]


def test_reservation_changes_survive_a_saved_plan() -> None:
    state = _state(MAINT)
    plan = plan_changes(state, _with_slurm(state, _live(_maint(users=("alice",)))))
    again = plan_from_dict(json.loads(json.dumps(plan_to_dict(plan))))
    assert again.changes == plan.changes
    [change] = [c for c in plan_to_dict(plan)["changes"] if c["kind"] == "Reservation"]
    assert (change["scope"], change["kind"], change["action"]) == ("slurm", "Reservation", "update")
    assert change["desired"] == {"Users": ["root"]}


def test_apply_refuses_a_plan_that_touches_a_reservation_not_ours() -> None:
    state = _state(MAINT)
    plan = plan_changes(state, _with_slurm(state, _live(_maint(), _maint(name="slurm-old"))))
    saved = plan_to_dict(plan)
    [delete] = [c for c in saved["changes"] if c["kind"] == "Reservation"]
    assert (delete["action"], delete["name"]) == ("delete", "slurm-old")
    delete["name"] = "ops-window"  # a hand-edited plan file
    # No adapters at all: touching any of them would fail with AttributeError, not ApplyError.
    target = Target(kube=None, slurm=None, scontrol=None, namespace="slurm")  # type: ignore[arg-type]
    said: list[str] = []
    with pytest.raises(ApplyError, match="reservations that are not ours: ops-window"):
        apply_plan(plan_from_dict(saved), target, ApplyOptions(), said.append)
    assert said == []


def test_fingerprint_follows_reservations_not_the_clock() -> None:
    live = _live(_maint())
    assert LiveState(reservations=live.reservations, now=1).fingerprint() == (
        LiveState(reservations=live.reservations, now=2).fingerprint()
    )
    assert live.fingerprint() != _live(_maint(end=T0 + 3 * HOUR)).fingerprint()
    assert live.fingerprint() != _live(_maint(), _maint(name="x")).fingerprint()


# ---- reading and writing Slurm ------------------------------------------------------------


def test_live_flags_are_spelled_as_scontrol_takes_them() -> None:
    resv = SlurmReservation(
        name="r", node_list="slurm-gpu-[0-1]", node_count=2, start_time=T0, end_time=T0 + 60,
        flags=frozenset({"STATIC", "NO_HOLD_JOBS_AFTER_END", "SPEC_NODES", "MAINT"}),
        users=("root",), accounts=(), partition="", features="", core_count=8,
    )  # fmt: skip
    live = live_reservation(resv)
    assert live.flags == {"STATIC_ALLOC", "NO_HOLD_JOBS_AFTER", "MAINT"}
    assert live.nodes == ("slurm-gpu-0", "slurm-gpu-1")


def test_scontrol_update_arguments_for_reservations() -> None:
    args = reservation_args(
        "update", "slurm-maint",
        {"EndTime": T0, "Users": [], "Accounts": ["ops"], "Flags": ["FLEX"], "Flags-": ["MAINT"]},
    )  # fmt: skip
    assert args == [
        "update", "ReservationName=slurm-maint", f"EndTime=uts{T0}", "Users=",
        "Accounts=ops", "Flags=FLEX", "Flags-=MAINT",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "options",
    [{"StartTime": True}, {"StartTime": -1}, {"Users": ""}, {"Flags-": ["MAINT x=1"]}],
)
def test_bad_reservation_update_values_are_refused(options: dict) -> None:
    with pytest.raises(SlurmArgumentError):
        reservation_args("update", "slurm-maint", options)
