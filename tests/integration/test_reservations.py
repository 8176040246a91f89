"""Reservations declared in git, end to end on the real local stack (Slurm 22.05 behind
`reconciler local up`), through the CLI as a user runs it, on a copy of fixtures/config-repo.

The tests run in file order and build on each other's state (one stack per module):

  add two reservations in git -> planned, then created from a saved plan
  change duration and users   -> updated in place
  scale the node definition   -> the reservation follows: after new nodes join, before
                                 leaving ones drain
  a reservation made by hand  -> a warning, never a change
  remove them from git        -> ours deleted, the hand-made one left alone
"""

from __future__ import annotations

import datetime
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.local_up import RepoStack, local_up

pytestmark = pytest.mark.integration

FIXTURE_REPO = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"
RESERVATIONS_FILE = "values.d/20-reservations.yaml"
HAND_MADE = "ops-window"
NO_CHANGES = "Plan: 0 to add, 0 to change, 0 to destroy."
# Two days ahead, on the hour: far enough that the test never sees it begin.
START = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=2)).replace(
    minute=0, second=0, microsecond=0
)
START_TEXT = START.strftime("%Y-%m-%dT%H:%M:%SZ")
RESERVATIONS = f"""# Slurm reservations (slurmConfig.reservations); Slurm names them slurm-<name>.
slurmConfig:
  reservations:
    maint:
      nodeDefinition: gpu-small
      startTime: {START_TEXT}
      duration: 60
      users: [root]
      flags: [MAINT]
    k8s-pods:
      nodes: slurm-cpu-0
      startTime: now
      duration: '2:00:00'
      accounts: [root]
"""


Env = RepoStack  # the copied repo, its work dir and the running stack


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-resv-work-"))
    up_repo, repo = work / "up-repo", work / "repo"
    shutil.copytree(FIXTURE_REPO, up_repo)
    shutil.copytree(FIXTURE_REPO, repo)
    try:
        with local_up(
            up_repo, work / "up.log", prefix="sunk-reconciler-resv-", timings=stack_timings,
            label="reservation tests",
        ) as running:  # fmt: skip
            yield Env(repo, work, running)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- the CLI and Slurm --------------------------------------------------------------------


def _output(env: Env, result: subprocess.CompletedProcess[str]) -> str:
    return env.cli_output(result)


def _plan_text(env: Env, *extra: str) -> tuple[int, str]:
    result = env.plan_text(*extra)
    return result.returncode, result.stdout


def _plan(env: Env, *extra: str) -> dict[str, Any]:
    """The JSON plan, without the note on the fixture's switched-off h100-training (these
    tests are about reservations)."""
    plan = env.plan_json(*extra)
    plan["warnings"] = [w for w in plan["warnings"] if "makes no nodes" not in w]
    return plan


def _apply(env: Env, *extra: str) -> tuple[str, str]:
    """`apply --yes`: (stdout, the progress lines on stderr)."""
    result = env.apply(*extra)
    return result.stdout, result.stderr


def _assert_no_changes(env: Env) -> str:
    code, text = _plan_text(env)
    assert code == 0 and NO_CHANGES in text, text
    return text


def _reservations(env: Env) -> dict[str, dict[str, str]]:
    """`scontrol show reservation -o`: name -> its fields."""
    out = env.slurm.run("scontrol", "show", "reservation", "-o")
    found = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+)=(.*?)(?= \w+=|$)", line.strip()))
        if "ReservationName" in fields:
            found[fields["ReservationName"]] = fields
    return found


def _scontrol_time(moment: datetime.datetime) -> str:
    """How scontrol prints a time: local time of its process (this one's environment)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(moment.timestamp()))


def _changes(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in plan["changes"] if c["kind"] == "Reservation"}


def _fields(change: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {f["path"]: (f["before"], f["after"]) for f in change["fields"]}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not in {path} exactly once"
    path.write_text(text.replace(old, new))


# ---- the tests ----------------------------------------------------------------------------


def test_reservations_in_git_are_planned_then_created(env: Env) -> None:
    _assert_no_changes(env)
    (env.repo / RESERVATIONS_FILE).write_text(RESERVATIONS)

    code, text = _plan_text(env)
    assert code == 2
    assert "+ Reservation slurm-maint (create)" in text
    assert "+ Reservation slurm-k8s-pods (create)" in text
    assert f"+startTime: '{START_TEXT}'" in text and "+nodes: slurm-gpu-small-[0-1]" in text
    assert "Plan: 2 to add, 0 to change, 0 to destroy." in text

    saved = env.work / "create.json"
    plan = _plan(env, "--out", str(saved))
    changes = _changes(plan)
    assert {n: c["action"] for n, c in changes.items()} == {
        "slurm-k8s-pods": "create", "slurm-maint": "create",
    }  # fmt: skip
    assert [c["scope"] for c in changes.values()] == ["slurm", "slurm"]
    # Exactly what apply sends: absolute times for a fixed start, `now` + minutes otherwise.
    start = int(START.timestamp())
    assert changes["slurm-maint"]["desired"] == {
        "Nodes": "slurm-gpu-small-[0-1]", "StartTime": start, "EndTime": start + 3600,
        "Users": ["root"], "Flags": ["MAINT"],
    }  # fmt: skip
    assert changes["slurm-k8s-pods"]["desired"] == {
        "Nodes": "slurm-cpu-0", "StartTime": "now", "Duration": 120, "Accounts": ["root"],
    }  # fmt: skip
    assert plan["summary"]["add"] == 2 and plan["warnings"] == []
    assert _reservations(env) == {}

    out, progress = _apply(env, "--plan-file", str(saved))
    assert "apply: created reservation slurm-k8s-pods" in progress
    assert "apply: created reservation slurm-maint" in progress
    assert "Apply complete: 2 added, 0 changed, 0 destroyed." in out

    live = _reservations(env)
    assert sorted(live) == ["slurm-k8s-pods", "slurm-maint"]
    maint = live["slurm-maint"]
    assert maint["Nodes"] == "slurm-gpu-small-[0-1]"
    assert maint["StartTime"] == _scontrol_time(START)
    assert maint["Duration"] == "01:00:00" and maint["State"] == "INACTIVE"
    assert maint["Users"] == "root" and maint["Accounts"] == "(null)"
    assert maint["Flags"] == "MAINT,SPEC_NODES"
    pods = live["slurm-k8s-pods"]
    assert pods["Nodes"] == "slurm-cpu-0" and pods["State"] == "ACTIVE"
    assert pods["Duration"] == "02:00:00" and pods["Accounts"] == "root"
    assert pods["Users"] == "(null)"
    _assert_no_changes(env)


def test_a_change_in_git_updates_the_reservation_in_place(env: Env) -> None:
    path = env.repo / RESERVATIONS_FILE
    _edit(
        path,
        "      duration: 60\n      users: [root]",
        # Not nobody: Slurm 25.11 on refuse that name ("Invalid user id").
        "      duration: 90\n      users: [root, daemon]",
    )
    plan = _plan(env)
    changes = _changes(plan)
    assert list(changes) == ["slurm-maint"] and len(plan["changes"]) == 1
    change = changes["slurm-maint"]
    end = datetime.timedelta(minutes=90) + START
    assert change["action"] == "update" and change["steps"] == []
    assert _fields(change) == {
        "endTime": ((START + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    end.strftime("%Y-%m-%dT%H:%M:%SZ")),
        "duration": ("01:00:00", "01:30:00"),
        "users": (["root"], ["daemon", "root"]),
    }  # fmt: skip
    assert change["desired"] == {"EndTime": int(end.timestamp()), "Users": ["root", "daemon"]}

    out, progress = _apply(env)
    assert "apply: updated reservation slurm-maint" in progress
    assert "Apply complete: 0 added, 1 changed, 0 destroyed." in out
    maint = _reservations(env)["slurm-maint"]
    assert maint["Duration"] == "01:30:00" and maint["Users"] == "root,daemon"
    assert maint["StartTime"] == _scontrol_time(START)  # the start stays
    _assert_no_changes(env)


def test_a_reservation_on_a_node_definition_follows_its_scaling(env: Env) -> None:
    scale = env.repo / "values.d" / "10-gpu-scale.yaml"
    _edit(scale, "replicas: 2", "replicas: 3")
    plan = _plan(env)
    change = _changes(plan)["slurm-maint"]
    assert _fields(change) == {"nodes": ("slurm-gpu-small-[0-1]", "slurm-gpu-small-[0-2]")}
    _, progress = _apply(env)
    lines = progress.splitlines()
    # A reservation takes on a node only once it has joined.
    assert lines.index("apply: joined: slurm-gpu-small-2") < lines.index(
        "apply: updated reservation slurm-maint"
    ), progress
    assert _reservations(env)["slurm-maint"]["Nodes"] == "slurm-gpu-small-[0-2]"
    _assert_no_changes(env)

    _edit(scale, "replicas: 3", "replicas: 2")
    _, progress = _apply(env)
    lines = progress.splitlines()
    # ... and lets go of a node before it is drained and retired.
    assert lines.index("apply: updated reservation slurm-maint") < lines.index(
        "apply: drained slurm-gpu-small-2; waiting for their jobs to finish"
    ), progress
    assert _reservations(env)["slurm-maint"]["Nodes"] == "slurm-gpu-small-[0-1]"
    _assert_no_changes(env)


def test_a_hand_made_reservation_is_reported_never_changed(env: Env) -> None:
    env.slurm.run(
        "scontrol", "create", "reservation", f"ReservationName={HAND_MADE}",
        "Nodes=slurm-gpu-small-1", "StartTime=now+3days", "Duration=30", "Users=root",
    )  # fmt: skip
    before = _reservations(env)[HAND_MADE]
    warning = (
        f"Slurm reservation {HAND_MADE} is not in git and not ours (its name does not start "
        "with 'slurm-'): left alone"
    )
    plan = _plan(env)  # --detailed-exitcode 0: a warning is not a change
    assert plan["changes"] == [] and plan["warnings"] == [warning]
    text = _assert_no_changes(env)
    assert f"warning: {warning}" in text
    assert _reservations(env)[HAND_MADE] == before


def test_ours_removed_from_git_are_deleted_the_hand_made_one_stays(env: Env) -> None:
    hand_made = _reservations(env)[HAND_MADE]
    (env.repo / RESERVATIONS_FILE).unlink()
    plan = _plan(env)
    changes = _changes(plan)
    assert {n: c["action"] for n, c in changes.items()} == {
        "slurm-k8s-pods": "delete", "slurm-maint": "delete",
    }  # fmt: skip
    assert changes["slurm-maint"]["notes"] == ["ours (named slurm-...) and no longer in git"]
    assert HAND_MADE not in changes and plan["summary"]["destroy"] == 2
    assert len(plan["warnings"]) == 1 and HAND_MADE in plan["warnings"][0]

    out, progress = _apply(env)
    assert "apply: deleted reservation slurm-maint" in progress
    assert "apply: deleted reservation slurm-k8s-pods" in progress
    assert "Apply complete: 0 added, 0 changed, 2 destroyed." in out
    assert _reservations(env) == {HAND_MADE: hand_made}
    _assert_no_changes(env)
    env.slurm.run("scontrol", "delete", f"ReservationName={HAND_MADE}")
