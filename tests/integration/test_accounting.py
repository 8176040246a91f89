"""Slurm accounting declared in git (QOS, accounts, users), end to end on the real local stack
with MariaDB + slurmdbd (the fixture repo's `accounting.enabled`: Pods that `local up` runs),
through the CLI as a user runs it, on a copy of fixtures/config-repo whose slurmConfig sets
PreemptType=preempt/qos.

The tests run in file order and build on each other's state (one stack per module):

  declare QOS, accounts, users -> planned, created with sacctmgr, then no changes
  a `high` QOS preempting `low` -> a --qos=high job preempts (requeues) a running --qos=low job
  remove an account with a job  -> apply refuses, naming the account and the job
  its job gone                  -> ours deleted; one made by hand is only a warning
"""

from __future__ import annotations

import getpass
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
ACCOUNTING_FILE = "values.d/30-accounting.yaml"
NO_CHANGES = "Plan: 0 to add, 0 to change, 0 to destroy."
USER = getpass.getuser()
MARK = "(reconciler slurm)"
ACCOUNTING = f"""# Slurm accounting (slurmConfig.accounting), applied with sacctmgr.
slurmConfig:
  accounting:
    qos:
      low: {{priority: 10, description: Preemptible}}
      high: {{priority: 100, preempt: [low], preemptMode: requeue, maxWall: '2:00:00'}}
    accounts:
      research: {{description: Research Team, organization: ACME, qos: [normal, low, high]}}
      ml: {{parent: research}}
    users:
      alice: {{accounts: [ml]}}
      {USER}: {{accounts: [research, ml], defaultAccount: research}}
"""
# A node with nothing else on it: the low job takes all of it, so the high one must preempt.
NODE = "slurm-cpu-0"


Env = RepoStack  # the copied repo, its work dir and the running stack


def _preempt_qos(repo: Path) -> None:
    values = repo / "values.yaml"
    text = values.read_text()
    assert "PreemptType=preempt/partition_prio" in text
    values.write_text(text.replace("preempt/partition_prio", "preempt/qos"))


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-acct-work-"))
    up_repo, repo = work / "up-repo", work / "repo"
    shutil.copytree(FIXTURE_REPO, up_repo)
    shutil.copytree(FIXTURE_REPO, repo)
    _preempt_qos(up_repo)
    _preempt_qos(repo)
    try:
        with local_up(
            up_repo, work / "up.log", prefix="sunk-reconciler-acct-", timings=stack_timings,
            label="accounting tests",
        ) as running:  # fmt: skip
            yield Env(repo, work, running)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- the CLI and Slurm --------------------------------------------------------------------


def _output(env: Env, result: subprocess.CompletedProcess[str]) -> str:
    return env.cli_output(result)


def _plan(env: Env) -> dict[str, Any]:
    return env.plan_json()


def _plan_text(env: Env) -> tuple[int, str]:
    result = env.plan_text()
    return result.returncode, result.stdout + result.stderr


def _apply(env: Env, *, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return env.apply(ok=ok)


def _accounting(plan: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {
        (c["kind"], c["name"]): c["action"]
        for c in plan["changes"]
        if c["kind"] in ("Qos", "Account", "User")
    }


def _sacctmgr(env: Env, *args: str) -> list[list[str]]:
    out = env.slurm.run("sacctmgr", "-n", "-P", "show", *args)
    return [line.split("|") for line in out.splitlines() if line.strip()]


def _job_state(env: Env, job: str) -> str:
    return env.slurm.run("squeue", "-h", "-j", job, "-o", "%T", check=False).strip()


def _wait(what: str, check: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


def _submit(env: Env, *args: str) -> str:
    return env.slurm.run(
        "sbatch", "--parsable", "-N1", "-w", NODE, "--exclusive", "-o", "/dev/null", *args,
        "--wrap", "sleep 600",
    ).strip()  # fmt: skip


# ---- the tests ----------------------------------------------------------------------------


def test_accounting_in_git_is_planned_then_created_with_sacctmgr(env: Env) -> None:
    code, text = _plan_text(env)
    assert code == 0 and NO_CHANGES in text, text
    (env.repo / ACCOUNTING_FILE).write_text(ACCOUNTING)

    plan = _plan(env)
    assert _accounting(plan) == {
        ("Qos", "high"): "create", ("Qos", "low"): "create",
        ("Account", "research"): "create", ("Account", "ml"): "create",
        ("User", "alice"): "create",
        ("User", USER): "update" if USER == "root" else "create",
    }  # fmt: skip
    assert [c["scope"] for c in plan["changes"]] == ["slurm"] * len(plan["changes"])
    code, text = _plan_text(env)
    assert code == 2 and "+ Qos high (create)" in text and "+ Account research (create)" in text

    progress = _apply(env).stderr
    assert "apply: created QOS high" in progress
    assert "apply: QOS high preempts low" in progress
    assert "apply: created account ml" in progress

    rows = _sacctmgr(env, "qos", "format=Name,Priority,Preempt,MaxWall,Description")
    qos = {row[0]: row for row in rows}
    assert qos["high"] == ["high", "100", "low", "02:00:00", f"high {MARK}"]
    assert qos["low"][4] == f"preemptible {MARK}"
    accounts = {row[0]: row for row in _sacctmgr(env, "account", "format=Account,Descr,Org")}
    assert accounts["research"] == ["research", f"research team {MARK}", "acme"]
    assoc = {
        (row[0], row[1]): row
        for row in _sacctmgr(env, "association", "format=Account,User,ParentName,QOS")
    }
    assert assoc[("ml", "")][2] == "research"
    assert ("ml", "alice") in assoc and ("research", USER) in assoc
    users = {row[0]: row[1] for row in _sacctmgr(env, "user", "format=User,DefaultAccount")}
    assert users["alice"] == "ml" and users[USER] == "research"

    code, text = _plan_text(env)
    assert code == 0 and NO_CHANGES in text, text


def test_a_high_qos_job_preempts_a_running_low_qos_job(env: Env) -> None:
    low = _submit(env, "-A", "research", "--qos=low")
    _wait(f"low job {low} RUNNING", lambda: _job_state(env, low) == "RUNNING")
    high = _submit(env, "-A", "research", "--qos=high")
    try:
        _wait(f"high job {high} RUNNING", lambda: _job_state(env, high) == "RUNNING", 60)
        show = env.slurm.run("scontrol", "show", "job", low)
        assert "Restarts=1" in show, show  # requeued by preemption (PreemptMode=requeue)
        assert _job_state(env, low) in ("PENDING", "REQUEUED", "REQUEUE_HOLD"), show
    finally:
        env.slurm.run("scancel", low, high, check=False)
    _wait("jobs gone", lambda: not env.slurm.run("squeue", "-h").strip())


def test_an_account_with_jobs_is_not_deleted_then_ours_go_and_others_stay(env: Env) -> None:
    env.slurm.run("sacctmgr", "-i", "add", "account", "ops", "description=made by hand")
    job = _submit(env, "-A", "ml")
    _wait(f"job {job} RUNNING", lambda: _job_state(env, job) == "RUNNING")
    (env.repo / ACCOUNTING_FILE).write_text(
        ACCOUNTING.replace("      ml: {parent: research}\n", "")
        .replace("      alice: {accounts: [ml]}\n", "")
        .replace("[research, ml]", "[research]")
    )
    try:
        plan = _plan(env)
        changes = _accounting(plan)
        assert changes[("Account", "ml")] == "delete"
        assert changes[("User", "alice")] == "delete"
        assert any("account ops is not in git and not ours" in w for w in plan["warnings"])
        refused = _apply(env, ok=False)
        assert f"account ml has jobs {job}" in refused.stdout + refused.stderr
        assert [row[0] for row in _sacctmgr(env, "account", "ml", "format=Account")] == ["ml"]
    finally:
        env.slurm.run("scancel", job, check=False)
    _wait("job gone", lambda: not env.slurm.run("squeue", "-h").strip())

    progress = _apply(env).stderr
    assert "apply: deleted account ml" in progress and "apply: deleted user alice" in progress
    accounts = {row[0] for row in _sacctmgr(env, "account", "format=Account")}
    assert "ml" not in accounts and {"ops", "research"} <= accounts
    code, text = _plan_text(env)
    assert code == 0 and NO_CHANGES in text, text
    assert "account ops is not in git and not ours" in text
