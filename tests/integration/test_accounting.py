"""Slurm accounting declared in git (QOS, accounts, users), end to end on the real local stack
with MariaDB + slurmdbd (the fixture repo's `accounting.enabled`: Pods that `local up` runs),
through the CLI as a user runs it, on a copy of fixtures/config-repo whose slurmConfig sets
PreemptType=preempt/qos.

The tests run in file order and build on each other's state (one stack per module):

  declare QOS, accounts, users -> planned, created with sacctmgr, then no changes
  a `high` QOS preempting `low` -> a --qos=high job preempts (requeues) a running --qos=low job
  remove an account with a job  -> apply refuses, naming the account and the job
  its job gone                  -> ours deleted; one made by hand is only a warning
  a Pod naming its account      -> our scheduler's job is charged to it (scontrol, sacct)
  a Pod naming another account  -> Slurm refuses it; the Pod's Event says why

The repo also sets AccountingStorageEnforce=associations,qos, as a site that means its
accounts to be enforced does: without it Slurm takes an account the user is not in.
"""

from __future__ import annotations

import getpass
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import load_config
from reconciler.local.slurm.cluster import current_user
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.loop import PodScheduler
from reconciler.scheduler.settings import settings_from_values
from tests.integration.helpers import unique, wait_for
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
    assert "    PreemptType=preempt/partition_prio\n" in text
    enforce = "    AccountingStorageEnforce=associations,qos\n"
    values.write_text(text.replace("preempt/partition_prio\n", "preempt/qos\n" + enforce))


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


# ---- Pods through our scheduler, charged to the account they name -----------------------------

NAMESPACE = "slurm"


@pytest.fixture(scope="module")
def scheduler(env: Env, stack_timings: dict[str, float]) -> Iterator[tuple[Kube, PodScheduler]]:
    """Our Pod scheduler in this process, on this module's stack, with the repo's settings."""
    slurm = env.slurm
    kube = Kube.from_kubeconfig(env.running.stack.kube_paths.kubeconfig)
    config = load_config(read_repo(env.repo), read_library())
    settings = settings_from_values(
        config.values, release="slurm", namespace=NAMESPACE, hooks_host="127.0.0.1",
        hooks_port=0, poll_seconds=2.0,
    )  # fmt: skip
    assert settings.accounting is True
    tokens = MintedTokens(slurm.paths.jwt_key, current_user())
    clients = SlurmClients(slurm.rest_url(), tokens, jwt_key=slurm.paths.jwt_key,
                           scontrol=Scontrol(tokens, env=slurm.env()))  # fmt: skip
    running = PodScheduler(kube, clients, settings)
    started = time.monotonic()
    running.start()
    stack_timings["accounting tests: scheduler start"] = time.monotonic() - started
    try:
        yield kube, running
    finally:
        started = time.monotonic()
        running.stop()
        clients.close()
        stack_timings["accounting tests: scheduler stop"] = time.monotonic() - started


def _research_declared(env: Env) -> None:
    """The earlier tests leave USER in account research; run alone, declare it here."""
    if ["research"] not in _sacctmgr(env, "account", "research", "format=Account"):
        (env.repo / ACCOUNTING_FILE).write_text(ACCOUNTING)
        _apply(env)


def _account_pod(kube: Kube, account: str) -> dict[str, Any]:
    name = unique("acct")
    container = {"name": "main", "image": "ubuntu",
                 "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}  # fmt: skip
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE,
                     "annotations": {wk.ANNOTATION_ACCOUNT: account}},
        "spec": {"schedulerName": "slurm-slurm-slurm-scheduler", "containers": [container],
                 "terminationGracePeriodSeconds": 1},
    }  # fmt: skip
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    return kube.request_json("POST", path, body=pod, target=f"Pod {name}")


def _events(kube: Kube, name: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.name={name}"
    return kube.list("v1", "Event", NAMESPACE, field_selector=selector).items


def _delete(env: Env, kube: Kube, name: str) -> None:
    kube.delete("v1", "Pod", name, NAMESPACE, grace_period_seconds=0)
    wait_for(lambda: kube.get("v1", "Pod", name, NAMESPACE) is None, 30, f"Pod {name} gone")
    _wait("jobs gone", lambda: not env.slurm.run("squeue", "-h").strip())


def test_a_pod_naming_its_account_gets_a_job_charged_to_it(
    env: Env, scheduler: tuple[Kube, PodScheduler]
) -> None:
    kube, _ = scheduler
    _research_declared(env)
    name = _account_pod(kube, "research")["metadata"]["name"]
    try:
        pod = wait_for(
            lambda: (p := kube.get("v1", "Pod", name, NAMESPACE)) and p["spec"].get("nodeName")
            and p, 30, f"Pod {name} bound",
        )  # fmt: skip
        job = pod["metadata"]["annotations"][wk.ANNOTATION_JOB_ID]
        show = env.slurm.run("scontrol", "show", "job", job)
        assert re.search(r"\bAccount=research\b", show), show
        charged = wait_for(
            lambda: env.slurm.run("sacct", "-n", "-X", "-P", "-j", job, "-o", "Account").strip(),
            30, f"sacct to record job {job}",
        )  # fmt: skip
        assert charged == "research"
        reasons = {e.get("reason") for e in _events(kube, name)}
        assert wk.EVENT_ACCOUNTING_OFF not in reasons  # accounting is on here
    finally:
        _delete(env, kube, name)


def test_a_pod_naming_an_account_its_user_is_not_in_is_refused_saying_why(
    env: Env, scheduler: tuple[Kube, PodScheduler]
) -> None:
    kube, _ = scheduler
    _research_declared(env)
    if ["ops"] not in _sacctmgr(env, "account", "ops", "format=Account"):
        env.slurm.run("sacctmgr", "-i", "add", "account", "ops", "description=made by hand")
    name = _account_pod(kube, "ops")["metadata"]["name"]
    try:
        refused = wait_for(
            lambda: [e for e in _events(kube, name) if e.get("reason") == wk.EVENT_REJECTED],
            30, f"Pod {name} refused",
        )  # fmt: skip
        message = refused[0]["message"]
        assert "Slurm refused the placeholder job" in message, message
        assert "Invalid account" in message, message
        assert not env.slurm.run("squeue", "-h").strip()  # no job was made
    finally:
        _delete(env, kube, name)
