"""Slurm reservations: desired x live -> changes (pure).

Ours are named `<release>-<name in git>` (reconciler/wellknown.py): only those are updated or
deleted. Any other reservation is reported as a warning and left alone.

Times are compared as Slurm keeps them, in seconds since the epoch, against the moment the live
state was read (`LiveState.now`):
- `startTime: now` matches any start: the reservation began when apply created it;
- a reservation that has begun keeps its start (Slurm refuses to move it), so a start in git
  that has passed matches it too; one whose start has passed is created starting now;
- a recurring one matches when its start is a later repetition of the start in git (Slurm moves
  start and end on by a period after each occurrence).
"""

from __future__ import annotations

import datetime
from typing import Any

import hostlist

from reconciler.compile.desired import DesiredState
from reconciler.compile.reservations import Reservation
from reconciler.config.reservations import RESERVATION_RECURRENCE
from reconciler.plan.fields import field_changes
from reconciler.plan.live import LiveReservation, LiveState
from reconciler.plan.model import (
    SLURM,
    SLURM_RESERVATION,
    STEP_RECREATE,
    Action,
    Change,
    FieldChange,
    ObjectRef,
)
from reconciler.wellknown import reservation_prefix

# scontrol 22.05 refuses `Flags-=` for these ("Error parsing flags -OVERLAP").
UNREMOVABLE_FLAGS = frozenset({"OVERLAP", "NO_HOLD_JOBS_AFTER"})
_WEEKDAYS = {"WEEKDAY": range(5), "WEEKEND": range(5, 7)}

Options = dict[str, Any]  # scontrol reservation options, as apply sends them


def reservation_ref(name: str) -> ObjectRef:
    return ObjectRef(SLURM, SLURM_RESERVATION, "", name)


def reservation_changes(
    state: DesiredState, live: LiveState
) -> tuple[list[Change], int, list[str]]:
    """Creates and updates of ours in name order, then deletions of ours gone from git; and
    the warnings (reservations not ours, ones that ended)."""
    changes: list[Change] = []
    warnings: list[str] = []
    unchanged = 0
    desired = {r.name: r for r in state.reservations}
    for name in sorted(desired):
        want, have = desired[name], live.reservations.get(name)
        if have is None:
            change, warning = _create(want, live.now)
            changes += [change] if change else []
            warnings += [warning] if warning else []
            continue
        before = live_shape(have)
        change = _update(want, have, live.now, before)
        if change is None:
            unchanged += 1
        else:
            changes.append(change)
    prefix = reservation_prefix(state.release)
    for name in sorted(set(live.reservations) - set(desired)):
        if name.startswith(prefix):
            note = f"ours (named {prefix}...) and no longer in git"
            before = live_shape(live.reservations[name])
            changes.append(
                Change(reservation_ref(name), Action.DELETE, before, None, notes=(note,))
            )
        else:
            warnings.append(
                f"Slurm reservation {name} is not in git and not ours (its name does not start "
                f"with {prefix!r}): left alone"
            )
    return changes, unchanged, warnings


# ---- shapes (what the plan shows and compares) --------------------------------------------


def live_shape(have: LiveReservation) -> dict[str, Any]:
    recurring = sorted(have.flags & set(RESERVATION_RECURRENCE))
    return _without_empty(
        {
            "name": have.name,
            "nodes": _hostlist(have.nodes),
            "startTime": iso_time(have.start),
            "endTime": iso_time(have.end),
            "duration": slurm_duration(have.end - have.start),
            "recurring": ",".join(recurring) or None,
            "users": sorted(have.users),
            "accounts": sorted(have.accounts),
            "flags": sorted(have.flags - set(RESERVATION_RECURRENCE)),
        }
    )


def desired_shape(want: Reservation, start: int | None, end: int | None) -> dict[str, Any]:
    if start is not None and end is not None:
        length: int | None = end - start
    else:
        length = None if want.duration_minutes is None else want.duration_minutes * 60
    return _without_empty(
        {
            "name": want.name,
            "nodes": want.hostlist,
            "startTime": "now" if start is None else iso_time(start),
            "endTime": None if end is None else iso_time(end),
            "duration": None if length is None else slurm_duration(length),
            "recurring": want.recurring,
            "users": sorted(want.users),
            "accounts": sorted(want.accounts),
            "flags": list(want.flags),
        }
    )


def _without_empty(shape: dict[str, Any]) -> dict[str, Any]:
    """Unset fields (no recurrence, no accounts, ...) are left out, as scontrol shows (null)."""
    return {key: value for key, value in shape.items() if value not in (None, [])}


def iso_time(seconds: int) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def slurm_duration(seconds: int) -> str:
    """[D-]HH:MM:SS, as scontrol prints a reservation's Duration."""
    days, rest = divmod(max(seconds, 0), 86400)
    hours, rest = divmod(rest, 3600)
    text = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _hostlist(nodes: tuple[str, ...]) -> str:
    return str(hostlist.collect_hostlist(list(nodes))) if nodes else ""


# ---- windows ------------------------------------------------------------------------------


def _window(
    want: Reservation, have: LiveReservation | None, now: int | None
) -> tuple[int | None, int | None]:
    """(start, end) git asks for, comparable with `have`; start None: `now`, not created yet."""
    length = None if want.duration_minutes is None else want.duration_minutes * 60
    if want.start is None:
        start = have.start if have is not None else None
        if want.end is not None:
            return start, want.end
        return start, None if start is None or length is None else start + length
    start = want.start
    end = want.end if want.end is not None else start + (length or 0)
    if have is not None:
        shift = _repetition(want, have.start)
        if shift:
            return start + shift, end + shift
        if now is not None and start <= now and have.start <= now:
            return have.start, end  # both have begun: Slurm keeps the start it has
    return start, end


def _repetition(want: Reservation, live_start: int) -> int:
    """How far `live_start` is past git's start, when it is a later repetition of it."""
    if want.recurring is None or want.start is None:
        return 0
    delta = live_start - want.start
    return delta if delta > 0 and delta % RESERVATION_RECURRENCE[want.recurring] == 0 else 0


def _next_repetition(want: Reservation, start: int, end: int, now: int) -> tuple[int, int]:
    """The first repetition that starts after `now` (WEEKDAY/WEEKEND days judged in UTC)."""
    assert want.recurring is not None
    period = RESERVATION_RECURRENCE[want.recurring]
    steps = (now - start) // period + 1
    start, end = start + steps * period, end + steps * period
    days = _WEEKDAYS.get(want.recurring)
    while (
        days is not None
        and datetime.datetime.fromtimestamp(start, datetime.UTC).weekday() not in days
    ):
        start, end = start + period, end + period
    return start, end


# ---- changes ------------------------------------------------------------------------------


def _create(want: Reservation, now: int | None) -> tuple[Change | None, str | None]:
    options, start, end, notes = create_options(want, now)
    if options is None:
        assert end is not None
        return None, (
            f"reservation {want.name} ({want.where}) ended at {iso_time(end)}: not created; "
            "remove it from git"
        )
    shape = desired_shape(want, None if options["StartTime"] == "now" else start, end)
    ref = reservation_ref(want.name)
    return Change(ref, Action.CREATE, None, shape, notes=notes, desired=options), None


def create_options(
    want: Reservation, now: int | None
) -> tuple[Options | None, int | None, int | None, tuple[str, ...]]:
    """What `scontrol create reservation` gets (None: it has ended), its window and notes."""
    start, end = _window(want, None, now)
    notes: list[str] = []
    options: Options = {"Nodes": want.hostlist}
    if start is None:
        options["StartTime"] = "now"
        if want.end is not None:
            options["EndTime"] = want.end
        else:
            options["Duration"] = want.duration_minutes
    else:
        assert end is not None
        options["StartTime"] = start
        if now is not None and start <= now:
            if want.recurring is not None:
                start, end = _next_repetition(want, start, end, now)
                options["StartTime"] = start
                notes.append(
                    f"its first start has passed: created from the next, {iso_time(start)}"
                )
            elif end <= now:
                return None, start, end, ()
            else:
                options["StartTime"] = "now"
                notes.append("its start has passed: it begins when apply creates it")
        options["EndTime"] = end
    if want.users:
        options["Users"] = list(want.users)
    if want.accounts:
        options["Accounts"] = list(want.accounts)
    flags = [*want.flags, *([want.recurring] if want.recurring else [])]
    if flags:
        options["Flags"] = flags
    return options, start, end, tuple(notes)


def _update(
    want: Reservation,
    have: LiveReservation,
    now: int | None,
    before: dict[str, Any],
) -> Change | None:
    ref = reservation_ref(want.name)
    start, end = _window(want, have, now)
    fixed = want.start is not None and want.recurring is None  # not `now`, not repeating
    if fixed and now is not None and end is not None and end <= now:
        note = f"git says it ended at {iso_time(end)}"
        return Change(ref, Action.DELETE, before, None, notes=(note,))
    after = desired_shape(want, start, end)
    fields: tuple[FieldChange, ...] = tuple(field_changes(before, after))
    if not fields:
        return None
    wanted_flags = {*want.flags, *([want.recurring] if want.recurring else [])}
    added, removed = sorted(wanted_flags - have.flags), sorted(have.flags - wanted_flags)
    reasons = [
        f"Slurm cannot remove flag {flag} from a reservation"
        for flag in removed
        if flag in UNREMOVABLE_FLAGS
    ]
    if start is not None and start != have.start and now is not None and have.start <= now:
        reasons.append("it has begun, and Slurm cannot move the start of one that has begun")
    if reasons:
        create, _, _, create_notes = create_options(want, now)
        notes = (
            *reasons,
            "apply deletes it and creates it again (Slurm refuses while jobs run in it)",
            *create_notes,
        )
        return Change(ref, Action.UPDATE, before, after, fields, notes=notes,
                      desired=create, steps=(STEP_RECREATE,))  # fmt: skip
    options: Options = {}
    if after.get("nodes") != before.get("nodes"):
        options["Nodes"] = want.hostlist
    if start is not None and start != have.start:
        options["StartTime"] = start
    if end is not None and end != have.end:
        options["EndTime"] = end
    if after.get("users") != before.get("users"):
        options["Users"] = list(want.users)  # empty: cleared (accounts then say who may)
    if after.get("accounts") != before.get("accounts"):
        options["Accounts"] = list(want.accounts)
    if added:
        options["Flags"] = added
    if removed:
        options["Flags-"] = removed
    return Change(ref, Action.UPDATE, before, after, fields, desired=options)
