"""Accounting in git (QOS, accounts, users): parsing and validation (file:line errors), the plan
over plain live data (create / update / delete ours, warn about the others), sacctmgr argument
checks and output parsing, and the apply order against a recording fake."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from reconciler.adapters.sacctmgr import (
    add_args,
    delete_args,
    modify_args,
    parse_accounts,
    parse_qos,
)
from reconciler.apply.accounting import (
    AccountingApplyError,
    accounting_changes_of,
    apply_accounting,
    refuse_busy_accounts,
)
from reconciler.compile.accounting import Account, Qos, User
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.config.accounting import tres_limits, wall_minutes
from reconciler.errors import CompileError, ConfigTypeError, SlurmArgumentError
from reconciler.plan.diff import plan_changes
from reconciler.plan.jsonout import plan_from_dict, plan_to_dict
from reconciler.plan.live import LiveAccounting, LiveState
from reconciler.plan.model import Action, Change, Plan
from reconciler.plan.text import render_text
from tests.unit.conftest import config_from

MARK = "(reconciler slurm)"
ACCOUNTING = """
compute:
  nodes: {}
slurmConfig:
  accounting:
    qos:
      low: {priority: 10}
      high:
        priority: 100
        preempt: [low]
        preemptMode: requeue
        maxWall: '4:00:00'
        grpTRES: cpu=8,mem=2G
    accounts:
      research: {description: Research Team, organization: ACME, qos: [normal, low, high]}
      ml: {parent: research}
    users:
      alice: {accounts: [research, ml], defaultAccount: ml}
"""


def _state(values: str = ACCOUNTING, files: dict[str, str] | None = None) -> DesiredState:
    return compile_desired_state(config_from(values, files))


def _error(values: str, files: dict[str, str] | None = None) -> str:
    with pytest.raises((ConfigTypeError, CompileError)) as info:
        _state(values, files)
    return str(info.value) + "\n" + str(getattr(info.value, "hint", ""))


# ---- parsing ------------------------------------------------------------------------------


def test_accounting_compiles_lowercase_with_our_marker_parents_first() -> None:
    acct = _state().accounting
    assert [q.name for q in acct.qos] == ["high", "low"]
    high = acct.qos[0]
    assert high.preempt == ("low",) and high.preempt_mode == "requeue"
    assert high.max_wall_minutes == 240
    assert high.grp_tres == (("cpu", 8), ("mem", 2048))
    assert high.description == f"high {MARK}"
    assert [a.name for a in acct.accounts] == ["research", "ml"]  # parent before child
    research = acct.accounts[0]
    assert research.description == f"research team {MARK}"
    assert research.organization == "acme"
    assert research.qos == ("high", "low", "normal")
    assert acct.users == (User("alice", ("ml", "research"), "ml", "values.yaml:18"),)


def test_values_d_adds_to_and_removes_entries() -> None:
    files = {
        "values.d/10.yaml": """
        slurmConfig:
          accounting:
            users:
              alice: null
            qos:
              low: {priority: 20}
        """
    }
    acct = _state(ACCOUNTING, files).accounting
    assert acct.users == ()
    assert {q.name: q.priority for q in acct.qos} == {"high": 100, "low": 20}


@pytest.mark.parametrize(
    ("text", "minutes"), [(90, 90), ("90", 90), ("1:30", 90), ("1:30:00", 90), ("1-00:00:00", 1440)]
)
def test_max_wall_reads_as_slurm_writes_it(text: object, minutes: int) -> None:
    assert wall_minutes(text) == minutes


def test_tres_limits_are_canonical() -> None:
    assert tres_limits("mem=1T,cpu=4,gres/gpu=2") == (
        ("cpu", 4),
        ("gres/gpu", 2),
        ("mem", 1024 * 1024),
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("preemptMode: requeue", "preemptMode: sometimes"), "preemptMode must be one of"),
        (("grpTRES: cpu=8,mem=2G", "grpTRES: cpus=8"), "'cpus=8' is not a TRES limit"),
        (("maxWall: '4:00:00'", "maxWall: soon"), "'soon' is not a time limit"),
        (("priority: 100", "priorty: 100"), "unknown QOS key 'priorty'; did you mean 'priority'?"),
        (("ml: {parent: research}", "ML: {parent: research}"), "write 'ml'"),
        (("organization: ACME", "organization: 'a=b'"), "not a description"),
        (("    users:", "    user:"), "unknown accounting section 'user'"),
    ],
)
def test_invalid_entries_name_the_file_and_line(edit: tuple[str, str], message: str) -> None:
    text = _error(ACCOUNTING.replace(*edit))
    assert message in text
    assert "values.yaml:" in text


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("preempt: [low]", "preempt: [lo]"), "QOS 'high' preempts QOS 'lo', which git does not"),
        (("preempt: [low]", "preempt: [high]"), "QOS 'high' preempts itself"),
        (("ml: {parent: research}", "ml: {parent: nobody}"), "has parent account 'nobody'"),
        (("defaultAccount: ml", "defaultAccount: root"), "'root' is not one of its accounts"),
        (("accounts: [research, ml], defaultAccount: ml", "accounts: [research, ml]"),
         "defaultAccount is needed"),
        (("{parent: research}", "{parent: research, qos: [low], defaultQos: high}"),
         "defaultQos 'high' is not one of its qos"),
    ],
)  # fmt: skip
def test_merged_values_are_checked_when_compiled(edit: tuple[str, str], message: str) -> None:
    assert message in _error(ACCOUNTING.replace(*edit))


def test_parent_cycle_is_refused() -> None:
    values = ACCOUNTING.replace(
        "research: {description: Research Team, organization: ACME, qos: [normal, low, high]}",
        "research: {parent: ml}",
    )
    assert "account parents form a cycle" in _error(values)


# ---- plan ---------------------------------------------------------------------------------


def _live_of(state: DesiredState, accounting: LiveAccounting | None, now: int = 1) -> LiveState:
    return LiveState(
        slurm_conf=state.slurm_conf, gres_conf=state.gres_conf, now=now, accounting=accounting
    )


def _as_live(state: DesiredState) -> LiveAccounting:
    acct = state.accounting
    return LiveAccounting(
        {q.name: replace(q, where="") for q in acct.qos},
        {a.name: replace(a, where="") for a in acct.accounts},
        {u.name: replace(u, where="") for u in acct.users},
    )


def _changes(plan: Plan) -> list[tuple[str, str, str]]:
    return [(c.action.value, c.ref.kind, c.ref.name) for c in accounting_changes_of(plan)]


def test_offline_plan_creates_qos_then_accounts_parents_first_then_users() -> None:
    state = _state()
    plan = plan_changes(state, None, offline=True)
    assert _changes(plan) == [
        ("create", "Qos", "high"),
        ("create", "Qos", "low"),
        ("create", "Account", "research"),
        ("create", "Account", "ml"),
        ("create", "User", "alice"),
    ]
    high = accounting_changes_of(plan)[0]
    assert high.desired == {
        "Description": f"high {MARK}",
        "Priority": 100,
        "Preempt": ["low"],
        "PreemptMode": "requeue",
        "MaxWall": 240,
        "GrpTRES": "cpu=8,mem=2048",
    }
    assert high.after["grpTRES"] == "cpu=8,mem=2048M"
    text = render_text(plan)
    assert "+ Qos high (create)" in text and "+ User alice (create)" in text


def test_live_equal_to_git_is_unchanged_and_survives_a_saved_plan() -> None:
    state = _state()
    plan = plan_changes(state, _live_of(state, _as_live(state)))
    assert _changes(plan) == []
    plan = plan_changes(state, _live_of(state, LiveAccounting()))
    again = plan_from_dict(plan_to_dict(plan))
    assert _changes(again) == _changes(plan)
    assert [c.desired for c in accounting_changes_of(again)] == [
        c.desired for c in accounting_changes_of(plan)
    ]


def test_updates_send_only_what_differs_and_clear_removed_limits() -> None:
    state = _state()
    live = _as_live(state)
    high = live.qos["high"]
    live = replace(
        live,
        qos={**live.qos, "high": replace(high, priority=5, max_wall_minutes=None,
                                         grp_tres=(("cpu", 8), ("node", 2)))},
    )  # fmt: skip
    plan = plan_changes(state, _live_of(state, live))
    [change] = accounting_changes_of(plan)
    assert change.action is Action.UPDATE
    assert change.desired == {"Priority": 100, "MaxWall": 240, "GrpTRES": "cpu=8,mem=2048,node=-1"}
    assert {f.path for f in change.fields} == {"priority", "maxWall", "grpTRES"}


def test_user_associations_are_added_removed_only_with_accounts_of_ours() -> None:
    state = _state()
    live = _as_live(state)
    live = replace(
        live,
        accounts={**live.accounts, "old": Account("old", f"old {MARK}", "old", "root"),
                  "ops": Account("ops", "made by hand", "ops", "root")},
        users={"alice": User("alice", ("old", "ops", "research"), "research")},
    )  # fmt: skip
    plan = plan_changes(state, _live_of(state, live))
    changes = {(c.ref.kind, c.ref.name): c for c in accounting_changes_of(plan)}
    alice = changes[("User", "alice")]
    assert alice.desired == {"Add": ["ml"], "DefaultAccount": "ml", "Remove": ["old"]}
    assert any("ops (not ours, not in git) is left alone" in n for n in alice.notes)
    assert changes[("Account", "old")].action is Action.DELETE
    assert ("Account", "ops") not in changes
    assert any("account ops is not in git and not ours" in w for w in plan.warnings)


def test_ours_gone_from_git_are_deleted_users_then_children_then_qos() -> None:
    state = _state()
    live = _as_live(state)
    empty = _state("compute: {nodes: {}}\n")
    plan = plan_changes(empty, _live_of(empty, replace(
        live,
        qos={**live.qos, "normal": Qos("normal", "normal qos default"),
             "theirs": Qos("theirs", "someone else's")},
        users={**live.users, "root": User("root", ("root",), "root"),
               "bob": User("bob", ("ops",), "ops")},
    )))  # fmt: skip
    assert _changes(plan) == [
        ("delete", "User", "alice"),
        ("delete", "Account", "ml"),
        ("delete", "Account", "research"),
        ("delete", "Qos", "high"),
        ("delete", "Qos", "low"),
    ]
    assert plan.warnings == (
        "Slurm user bob is not in git and not ours (it has associations with accounts not of "
        "ours): left alone",
        "Slurm QOS theirs is not in git and not ours (its description does not end with "
        "'(reconciler slurm)'): left alone",
    )


def test_a_live_plan_without_slurmdbd_warns_and_plans_no_accounting() -> None:
    state = _state()
    plan = plan_changes(state, _live_of(state, None))
    assert _changes(plan) == []
    assert any("no slurmdbd answers" in w for w in plan.warnings)


def test_accounting_is_part_of_the_fingerprint() -> None:
    state = _state()
    live = _as_live(state)
    one = _live_of(state, live).fingerprint()
    bumped = replace(live, qos={**live.qos, "low": replace(live.qos["low"], priority=11)})
    assert _live_of(state, bumped).fingerprint() != one
    assert _live_of(state, live, now=99).fingerprint() == one


# ---- sacctmgr -----------------------------------------------------------------------------


def test_sacctmgr_arguments() -> None:
    assert add_args("qos", "high", {"Priority": 100, "Preempt": ["low"], "MaxWall": 240}) == [
        "add", "qos", "high", "Priority=100", "Preempt=low", "MaxWall=240",
    ]  # fmt: skip
    assert modify_args("qos", "high", {"Preempt": [], "GrpTRES": "cpu=-1"}) == [
        "modify", "qos", "where", "name=high", "set", "Preempt=", "GrpTRES=cpu=-1",
    ]  # fmt: skip
    assert delete_args("user", "alice", account="ml") == [
        "delete", "user", "where", "name=alice", "account=ml",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "name", "options"),
    [
        ("qos", "High", {}),
        ("qos", "high", {"Priority": "1 Flags=x"}),
        ("qos", "high", {"Description": "a=b"}),
        ("qos", "high", {"GrpTRES": "cpu=8 mem=1"}),
        ("qos", "high", {"Preempt": ["low", "-x"]}),
        ("qos", "high", {"Nonsense": 1}),
        ("account", "ml", {"Parent": "Root"}),
        ("account", "ml", {"Description": "line\nbreak"}),
    ],
)
def test_sacctmgr_refuses_what_could_inject(kind: str, name: str, options: dict) -> None:
    with pytest.raises(SlurmArgumentError):
        add_args(kind, name, options)


def test_sacctmgr_output_is_parsed_into_plan_shapes() -> None:
    qos = parse_qos(
        "normal|Normal QOS default|0||cluster||||||\n"
        f"high|high {MARK}|100|low|requeue|04:00:00|||cpu=8,mem=2G||\n"
    )
    assert qos["high"] == Qos("high", f"high {MARK}", 100, ("low",), "requeue", 240,
                              (("cpu", 8), ("mem", 2048)))  # fmt: skip
    accounts, users = parse_accounts(
        f"research|research team {MARK}|acme\nroot|default root account|root\n",
        "root|||normal|\nroot|root||normal|\nresearch||root|high,low,normal|normal\n"
        "research|alice||high,low,normal|normal\n",
        "alice|research\nroot|root\n",
    )
    assert accounts["research"] == Account("research", f"research team {MARK}", "acme", "root",
                                           ("high", "low", "normal"), "normal")  # fmt: skip
    assert users["alice"] == User("alice", ("research",), "research")


# ---- apply --------------------------------------------------------------------------------


class FakeSacctmgr:
    def __init__(self, jobs: dict[str, list[str]] | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.jobs = jobs or {}

    def jobs_of_account(self, account: str) -> list[str]:
        return self.jobs.get(account, [])

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kw: self.calls.append((name, *args, *sorted(kw.items()))) or True


def test_apply_creates_qos_then_sets_preempt_then_accounts_then_users() -> None:
    plan = plan_changes(_state(), None, offline=True)
    fake = FakeSacctmgr()
    said: list[str] = []
    apply_accounting(accounting_changes_of(plan), fake, said.append)  # type: ignore[arg-type]
    assert [c[:2] for c in fake.calls] == [
        ("add_qos", "high"),
        ("add_qos", "low"),
        ("modify_qos", "high"),
        ("add_account", "research"),
        ("add_account", "ml"),
        ("add_user", "alice"),
    ]
    assert "Preempt" not in fake.calls[0][2]
    assert fake.calls[2][2] == {"Preempt": ["low"]}
    assert "QOS high preempts low" in said


def test_apply_refuses_to_delete_an_account_with_jobs_before_any_change() -> None:
    state = _state()
    empty = _state("compute: {nodes: {}}\n")
    plan = plan_changes(empty, _live_of(empty, _as_live(state)))
    fake = FakeSacctmgr(jobs={"ml": ["17", "18"]})
    with pytest.raises(AccountingApplyError, match="account ml has jobs 17, 18"):
        refuse_busy_accounts(accounting_changes_of(plan), fake)  # type: ignore[arg-type]
    assert fake.calls == []
    changes: list[Change] = accounting_changes_of(plan)
    with pytest.raises(AccountingApplyError, match="no sacctmgr"):
        refuse_busy_accounts(changes, None)
