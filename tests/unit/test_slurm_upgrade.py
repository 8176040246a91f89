"""A change of the Slurm release: the stages in Slurm's order, and every refusal, over release
tables (plan/upgrade.py, plan/upgrade_window.py, plan/upgrade_workloads.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.sacctmgr import parse_slurmdbd_release
from reconciler.compile.desired import compile_desired_state
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import load_config
from reconciler.errors import SlurmUpgradeRefusedError
from reconciler.plan.diff import kube_ref
from reconciler.plan.jsonout import plan_from_dict, plan_to_dict
from reconciler.plan.model import Plan
from reconciler.plan.text import render_text
from reconciler.plan.upgrade import (
    LOGIN,
    SLURMCTLD,
    SLURMD,
    SLURMDBD,
    SLURMRESTD,
    UpgradeStage,
    Workload,
    clients_behind,
    plan_upgrade,
)
from reconciler.plan.upgrade_window import RELEASES, accepted_from, path_between
from reconciler.plan.upgrade_workloads import upgrade_workloads
from reconciler.slurm_release import parse_release

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"
DAEMONS = (SLURMDBD, SLURMCTLD, SLURMD, SLURMD, LOGIN, SLURMRESTD)


def cluster(live: str | Mapping[str, str], desired: str | Mapping[str, str]) -> list[Workload]:
    """The fixture's six daemons; a release for all, or by daemon (the rest at `default`)."""

    def at(releases: str | Mapping[str, str], daemon: str, default: str | None) -> Any:
        text = releases if isinstance(releases, str) else releases.get(daemon, default)
        return parse_release(text) if text else None

    base = live if isinstance(live, str) else live.get("*", "")
    workloads = []
    for number, daemon in enumerate(DAEMONS):
        was = at(live, daemon, base)
        workloads.append(Workload(daemon, f"Deployment slurm/{daemon}-{number}", was,
                                  at(desired, daemon, str(was) if was else None)))  # fmt: skip
    return workloads


def refusal(live: str | Mapping[str, str], desired: str | Mapping[str, str]) -> str:
    with pytest.raises(SlurmUpgradeRefusedError) as caught:
        plan_upgrade(cluster(live, desired))
    text = str(caught.value)
    assert "\n" not in text, text  # one line: the rule and its source
    assert text.startswith("Slurm upgrade refused: ")
    assert "doc/html/upgrades.shtml" in text
    return text


# ---- the window: data --------------------------------------------------------------------


def test_the_window_is_two_releases_before_24_11_and_three_since() -> None:
    assert [r.series for r in RELEASES][3:] == [
        "22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05", "26.11",
    ]  # fmt: skip
    assert accepted_from(parse_release("24.05")) == ("23.11", "23.02")
    assert accepted_from(parse_release("24.11")) == ("24.05", "23.11", "23.02")
    assert accepted_from(parse_release("25.11")) == ("25.05", "24.11", "24.05")
    assert accepted_from(parse_release("26.05")) == ("25.11", "25.05", "24.11")
    assert all("upgrades.shtml" in r.source for r in RELEASES)
    assert "RELEASE_NOTES of 26.05" in RELEASES[-2].source


def test_a_refused_jump_names_the_releases_to_go_through() -> None:
    path = path_between(parse_release("22.05.8"), parse_release("26.05.3"))
    assert path == ("23.11", "25.05")
    assert path_between(parse_release("24.11"), parse_release("26.11")) == ("26.05",)


# ---- stages --------------------------------------------------------------------------------


def test_24_11_to_26_05_is_four_stages_in_slurms_order() -> None:
    stages = plan_upgrade(cluster("24.11.5", "26.05.3"))
    assert [s.line() for s in stages] == [
        "upgrade stage 1/4: slurmdbd 24.11.5 -> 26.05.3: Deployment slurm/slurmdbd-0 "
        "(sacctmgr show configuration reports SLURMDBD_VERSION 26.05.3; its first start "
        "converts the database: nothing may time it out)",
        "upgrade stage 2/4: slurmctld 24.11.5 -> 26.05.3: Deployment slurm/slurmctld-1 "
        "(scontrol show config reports SLURM_VERSION 26.05.3)",
        "upgrade stage 3/4: slurmd 24.11.5 -> 26.05.3: Deployment slurm/slurmd-2, "
        "Deployment slurm/slurmd-3 (each node, drained and restarted once no job holds it, "
        "responds at 26.05.3)",
        "upgrade stage 4/4: login/slurmrestd 24.11.5 -> 26.05.3: Deployment slurm/login-4, "
        "Deployment slurm/slurmrestd-5 (slurmrestd answers at 26.05.3; the upgrade is done)",
    ]


@pytest.mark.parametrize(
    ("live", "desired"),
    [("22.05.8", "23.11.10"), ("23.02.7", "24.11.5"), ("23.11.10", "24.11.5"),
     ("24.05.8", "25.11.7"), ("24.11.5", "26.05.3"), ("25.11.7", "26.11.1")],
)  # fmt: skip
def test_a_jump_within_the_window_is_allowed(live: str, desired: str) -> None:
    stages = plan_upgrade(cluster(live, desired))
    assert [s.component for s in stages] == [SLURMDBD, SLURMCTLD, SLURMD, "login/slurmrestd"]


def test_the_same_release_is_no_upgrade() -> None:
    assert plan_upgrade(cluster("24.11.5", "24.11.5")) == ()
    # A series agrees with every release of it: "25.11" is what runs, 25.11.7.
    assert plan_upgrade(cluster("25.11.7", "25.11")) == ()
    # Nothing known: nothing planned, nothing refused.
    assert plan_upgrade(cluster("", {})) == ()


def test_a_patch_release_is_staged_in_the_same_order() -> None:
    """SchedMD's upgrade guide gives the order for every upgrade: a patch release keeps it."""
    stages = plan_upgrade(cluster("24.11.5", "24.11.6"))
    assert [(s.component, s.before, s.after) for s in stages] == [
        (c, ("24.11.5",), ("24.11.6",)) for c in (SLURMDBD, SLURMCTLD, SLURMD, "login/slurmrestd")
    ]


def test_only_the_components_that_move_are_stages() -> None:
    stages = plan_upgrade(cluster("24.11.5", {SLURMDBD: "25.11.7", SLURMCTLD: "25.11.7"}))
    assert [s.line().split(":")[0] for s in stages] == ["upgrade stage 1/2", "upgrade stage 2/2"]


def test_an_image_the_repo_does_not_change_is_no_upgrade() -> None:
    """The local stack runs every Pod as the daemon it installed, whatever the image says."""
    same = [Workload(w.daemon, w.ref, parse_release("22.05.8"), w.desired, changed=False)
            for w in cluster("24.11.5", "24.11.5")]  # fmt: skip
    assert plan_upgrade(same) == ()


# ---- refusals ------------------------------------------------------------------------------


def test_a_downgrade_is_refused() -> None:
    text = refusal("24.11.5", "22.05.8")
    assert "slurmdbd (Deployment slurm/slurmdbd-0) 24.11.5 -> 22.05.8 is a downgrade" in text


def test_a_patch_downgrade_is_refused_too() -> None:
    assert "24.11.6 -> 24.11.5 is a downgrade" in refusal("24.11.6", "24.11.5")


@pytest.mark.parametrize(
    ("live", "desired", "accepted"),
    [("22.05.8", "24.11.5", "24.05, 23.11, 23.02"), ("22.05.8", "26.05.3", "25.11, 25.05, 24.11"),
     ("24.11.5", "26.11.1", "26.05, 25.11, 25.05"), ("22.05.8", "24.05.8", "23.11, 23.02")],
)  # fmt: skip
def test_a_jump_past_the_window_is_refused(live: str, desired: str, accepted: str) -> None:
    text = refusal(live, desired)
    assert f"{live} -> {desired} jumps past the upgrade window" in text
    assert f"{desired[:5]} upgrades only from {accepted}" in text


def test_a_refused_jump_says_the_way_through() -> None:
    assert "upgrade through 23.11, then 25.05 first" in refusal("22.05.8", "26.05.3")
    assert "RELEASE_NOTES of 26.05" in refusal("22.05.8", "26.05.3")


def test_a_release_past_the_table_is_refused() -> None:
    assert "Slurm 27.05 is not a major release this build knows" in refusal("26.05.3", "27.05.1")


def test_slurmdbd_older_than_slurmctld_is_refused() -> None:
    text = refusal("24.11.5", {SLURMDBD: "25.05.4", SLURMCTLD: "25.11.7", SLURMD: "25.11.7"})
    assert "slurmdbd (Deployment slurm/slurmdbd-0) 25.05.4 would be older than slurmctld " \
           "25.11.7" in text  # fmt: skip


def test_a_slurmd_newer_than_slurmctld_is_refused() -> None:
    text = refusal("24.11.5", {SLURMD: "25.11.7"})
    assert "slurmd (Deployment slurm/slurmd-2) 25.11.7 would be newer than slurmctld 24.11.5" \
        in text  # fmt: skip


def test_a_repo_mixing_releases_beyond_the_window_is_refused() -> None:
    # What the repo runs after the change: slurmd left on 24.05 beside a 26.05 slurmctld.
    text = refusal({"*": "25.05.4", SLURMD: "24.05.8"}, {SLURMDBD: "26.05.3", SLURMCTLD: "26.05.3"})
    assert "the repo mixes slurmd (Deployment slurm/slurmd-2) 24.05.8 with slurmctld 26.05.3" \
        in text  # fmt: skip
    assert "26.05 reads only 25.11, 25.05, 24.11" in text
    # Offline (nothing live): the repo alone.
    assert "beyond the window" in refusal("", {SLURMCTLD: "24.11.5", SLURMDBD: "24.11.5",
                                              SLURMD: "22.05.8"})  # fmt: skip


def test_a_stage_that_would_leave_slurmd_beyond_the_window_is_refused() -> None:
    """Each slurmd within the window of its end, but not of the slurmctld stage 1 brings."""
    text = refusal({"*": "24.11.5", SLURMD: "24.05.8"}, {SLURMCTLD: "26.05.3", SLURMDBD: "26.05.3",
                                                         SLURMD: "25.05.4"})  # fmt: skip
    assert "24.05.8 with slurmctld 26.05.3 after stage 2 (slurmctld)" in text


# ---- the workloads of a repo, and the plan's outputs ----------------------------------------


def fixture_state(*extra: tuple[str, str]) -> Any:
    files = read_repo(FIXTURE)
    files.update(dict(extra))
    return compile_desired_state(load_config(files, read_library()))


def test_the_fixture_with_a_new_image_tag_plans_the_four_stages() -> None:
    live = {kube_ref(o): o for o in fixture_state().kube_objects}
    wanted = fixture_state(("values.d/90-tag.yaml", 'image:\n  tag: "26.05.3"\n'))
    workloads = upgrade_workloads(wanted.kube_objects, live, slurmctld=parse_release("24.11.5"))
    stages = plan_upgrade(workloads)
    assert [s.line().split(": ")[1] for s in stages] == [
        "slurmdbd 24.11.5 -> 26.05.3", "slurmctld 24.11.5 -> 26.05.3",
        "slurmd 24.11.5 -> 26.05.3", "login/slurmrestd 24.11.5 -> 26.05.3",
    ]  # fmt: skip
    assert stages[2].objects == ("StatefulSet slurm/slurm-cpu", "StatefulSet slurm/slurm-gpu-small")
    # What runs is what slurmctld says, not the live image's tag (the 22.05 local stack).
    on_22 = upgrade_workloads(wanted.kube_objects, live, slurmctld=parse_release("22.05.8"))
    with pytest.raises(SlurmUpgradeRefusedError, match=r"22\.05\.8 -> 26\.05\.3 jumps past"):
        plan_upgrade(on_22)
    # Unchanged images: nothing, whatever runs.
    same = upgrade_workloads(fixture_state().kube_objects, live, slurmctld=parse_release("22.05.8"))
    assert plan_upgrade(same) == ()


def test_the_stages_are_in_the_text_and_json_plans() -> None:
    stages = plan_upgrade(cluster("24.11.5", "26.05.3"))
    plan = Plan("slurm", "slurm", "default", (), upgrade=stages)
    text = render_text(plan)
    assert [line for line in text.splitlines() if line.startswith("upgrade stage")] == [
        s.line() for s in stages
    ]
    data = plan_to_dict(plan)
    assert data["upgrade"][0] == {
        "stage": 1, "of": 4, "component": "slurmdbd", "from": ["24.11.5"], "to": ["26.05.3"],
        "objects": ["Deployment slurm/slurmdbd-0"], "check": stages[0].check,
    }  # fmt: skip
    assert plan_from_dict(data).upgrade == stages


def test_slurmdbd_release_is_read_from_its_part_of_sacctmgr_show_configuration() -> None:
    text = ("Configuration data as of 2026-11-28T10:00:00\n"
            "SLURM_VERSION            = 26.05.3\n"
            "SlurmDBD configuration:\n"
            "SLURMDBD_CONF            = /etc/slurm/slurmdbd.conf\n"
            "SLURMDBD_VERSION         = 24.11.5\n")  # fmt: skip
    assert parse_slurmdbd_release(text) == parse_release("24.11.5")
    assert parse_slurmdbd_release("SLURM_VERSION = 26.05.3\n") is None


def test_a_reconciler_whose_clients_cannot_read_the_rendered_slurm_conf_is_warned() -> None:
    """Our image's scontrol is 24.11's; a slurm.conf for 25.11 has keys it refuses."""
    stage = UpgradeStage(1, 1, "slurmctld", ("24.11.5",), ("26.05.3",), ("Deployment a/b",), "c")
    at = parse_release
    after = clients_behind(at("24.11.5"), at("24.11.5"), [stage])
    assert after is not None and "Slurm 26.05.3 once the upgrade is done" in after
    assert "image whose Slurm clients are 26.05 or later" in after
    now = clients_behind(at("24.11.5"), at("25.11.7"), [])
    assert now is not None and "Slurm 25.11.7 now" in now
    assert clients_behind(at("26.05.3"), at("25.11.7"), [stage]) is None
    assert clients_behind(at("25.11.1"), at("25.11.7"), []) is None  # a patch reads its series
    assert clients_behind(None, at("25.11.7"), [stage]) is None
    assert clients_behind(at("24.11.5"), None, []) is None
