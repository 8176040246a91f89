"""Carrying out a Slurm upgrade stage by stage, over plain data (plan/upgrade_run.py,
plan/upgrade_parts.py): every transition of the runner, resume from a recorded stage, a failed
check that stops everything after it, and the plan parts each step applies."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reconciler.plan.model import SLURM, SLURM_CONFIG, Action, Change, ObjectRef, Plan
from reconciler.plan.upgrade import UpgradeStage
from reconciler.plan.upgrade_parts import (
    raised_timeouts,
    raising_plan,
    restoring_plan,
    slurm_conf_map,
    stage_plan,
)
from reconciler.plan.upgrade_run import (
    APPLY_STAGE,
    BACK_UP,
    DONE,
    FAILED,
    FINISHED,
    NONE,
    PASSED,
    RAISE_TIMEOUTS,
    RESTORE,
    RUNNING,
    STOP,
    STOPPED,
    WAIT,
    WAITING,
    Check,
    Seen,
    UpgradeRecord,
    judge,
    next_step,
)

COMPONENTS = ("slurmdbd", "slurmctld", "slurmd", "login/slurmrestd")
OBJECTS = (("Deployment slurm/slurm-accounting",), ("Deployment slurm/slurm-controller",),
           ("StatefulSet slurm/slurm-cpu",), ("StatefulSet slurm/slurm-login",))  # fmt: skip
STAGES = tuple(
    UpgradeStage(n, 4, c, ("24.11.5",), ("24.11.6",), OBJECTS[n - 1], f"check of {c}")
    for n, c in enumerate(COMPONENTS, 1)
)


def walk(record: UpgradeRecord | None, key: str = "rev-1", replan: bool = True) -> list[str]:
    """Every step to the end, each check passing at once: the steps' kinds. A plan made
    again shows only the stages whose objects were not applied; apply and the daemon keep
    the one plan they started from (`replan=False`)."""
    kinds = []
    check = None
    for _ in range(30):
        planned = STAGES[record.applied if record and replan else 0 :]
        step = next_step(planned, record, key, check)
        kinds.append(step.kind if step.stage is None else f"{step.kind} {step.stage.number}")
        if step.kind in (NONE, FINISHED, STOP):
            return kinds
        record = step.record
        if step.kind == BACK_UP:
            assert record is not None
            record = replace(record, backup="/backups/x")
        check = Check(step.stage.number, PASSED) if step.kind == WAIT and step.stage else None
    raise AssertionError(kinds)


def test_an_upgrade_walks_backup_timeouts_each_stage_and_its_check_then_restores() -> None:
    assert walk(None) == [
        BACK_UP, RAISE_TIMEOUTS,
        f"{APPLY_STAGE} 1", f"{WAIT} 1", f"{APPLY_STAGE} 2", f"{WAIT} 2",
        f"{APPLY_STAGE} 3", f"{WAIT} 3", f"{APPLY_STAGE} 4", f"{WAIT} 4",
        RESTORE, FINISHED,
    ]  # fmt: skip


def test_the_plan_an_upgrade_was_carried_out_from_ends_it_once_done() -> None:
    """The daemon holds one plan to the end: once restored, it must not begin again (it did,
    backing up and walking every stage a second time)."""
    assert walk(None, replan=False)[-2:] == [RESTORE, FINISHED]


def test_no_stages_is_no_upgrade_and_keeps_what_was_recorded() -> None:
    old = UpgradeRecord("rev-0", STAGES, state=STOPPED, failure="x")
    assert next_step((), None, "rev-1").kind == NONE
    step = next_step((), old, "rev-1")
    assert (step.kind, step.record) == (NONE, old)


def test_a_restarted_daemon_resumes_at_the_recorded_stage_from_the_recorded_stages() -> None:
    """Stage 2's objects were applied before the restart: its check is waited for, then stage
    3 follows, though the new plan no longer shows stages 1 and 2."""
    record = UpgradeRecord("rev-1", STAGES, applied=2, passed=1, backup="b", raised=True)
    record = UpgradeRecord.from_json(record.to_json())  # as read back from the status
    assert record is not None
    replanned = STAGES[2:]
    step = next_step(replanned, record, "rev-1")
    assert (step.kind, step.stage) == (WAIT, STAGES[1])
    step = next_step(replanned, record, "rev-1", Check(2, WAITING, "slurmctld does not answer"))
    assert step.kind == WAIT and "(now: slurmctld does not answer)" in step.line()
    step = next_step(replanned, record, "rev-1", Check(2, PASSED))
    assert (step.kind, step.stage) == (APPLY_STAGE, STAGES[2])
    assert step.record is not None and (step.record.passed, step.record.applied) == (2, 3)


def test_a_record_taken_before_the_backup_or_the_timeouts_takes_them_first() -> None:
    fresh = UpgradeRecord("rev-1", STAGES)
    assert next_step(STAGES, fresh, "rev-1").kind == BACK_UP
    step = next_step(STAGES, replace(fresh, backup="b"), "rev-1")
    assert step.kind == RAISE_TIMEOUTS and step.record is not None and step.record.raised


def test_a_check_of_another_stage_is_no_answer() -> None:
    record = UpgradeRecord("rev-1", STAGES, applied=3, passed=2, backup="b", raised=True)
    assert next_step(STAGES, record, "rev-1", Check(2, PASSED)).kind == WAIT


def test_a_failed_check_stops_the_upgrade_and_nothing_further_for_that_revision() -> None:
    record = UpgradeRecord("rev-1", STAGES, applied=1, passed=0, backup="b", raised=True)
    step = next_step(STAGES, record, "rev-1", Check(1, FAILED, "slurmdbd answers at 24.11.5"))
    assert step.kind == STOP and step.stage == STAGES[0]
    stopped = step.record
    assert stopped is not None and stopped.state == STOPPED
    assert "check of slurmdbd" in stopped.failure and "24.11.5" in stopped.failure
    assert step.line().startswith("upgrade stage 1/4 (slurmdbd): stopped: its check failed")
    # The same revision, planned again (and even a passing check): still stopped.
    for check in (None, Check(1, PASSED)):
        again = next_step(STAGES[1:], stopped, "rev-1", check)
        assert (again.kind, again.record, again.detail) == (STOP, stopped, stopped.failure)
    # A new revision starts over, from its own plan.
    step = next_step(STAGES[1:], stopped, "rev-2")
    assert step.kind == BACK_UP and step.record is not None
    assert (step.record.key, step.record.stages, step.record.state) == (
        "rev-2",
        STAGES[1:],
        RUNNING,
    )


def test_a_done_upgrade_is_finished_and_a_new_one_starts_afresh() -> None:
    done = UpgradeRecord("rev-1", STAGES, applied=4, passed=4, backup="b", raised=True,
                         state=DONE)  # fmt: skip
    assert next_step((), done, "rev-1").kind == FINISHED
    assert next_step(STAGES, done, "rev-1").kind == FINISHED
    # The plan a daemon made when it resumed after a restart, held to the end.
    assert next_step(STAGES[3:], done, "rev-1").kind == FINISHED
    assert next_step(STAGES, done, "rev-2").kind == BACK_UP


def test_the_last_stage_passing_restores() -> None:
    record = UpgradeRecord("rev-1", STAGES, applied=4, passed=3, backup="b", raised=True)
    step = next_step(STAGES, record, "rev-1", Check(4, PASSED))
    assert step.kind == RESTORE and step.record is not None and step.record.state == DONE


def test_judge_passes_waits_and_fails() -> None:
    stage = STAGES[2]
    at = Seen((("n1", "24.11.6"), ("n2", "24.11.6")), rolled_out=True)
    assert judge(stage, at, 1, 60).verdict == PASSED
    restarting = Seen((("n1", "24.11.6"), ("n2", None)), rolled_out=False)
    check = judge(stage, restarting, 1, 60)
    assert (check.verdict, check.detail) == (WAITING, "n2 do not answer")
    old_rolled = Seen((("n1", "24.11.5"), ("n2", "24.11.6")), rolled_out=True)
    check = judge(stage, old_rolled, 1, 60)
    assert check.verdict == FAILED and "n1 answer at 24.11.5" in check.detail
    assert judge(stage, replace(old_rolled, rolled_out=False), 1, 60).verdict == WAITING
    late = judge(stage, restarting, 61, 60)
    assert late.verdict == FAILED and "after 61 s" in late.detail
    assert judge(stage, Seen((), True), 1, 60).verdict == WAITING  # nobody to ask yet
    series = replace(stage, after=("25.11",))
    assert judge(series, Seen((("n1", "25.11.7"),), True), 1, 60).verdict == PASSED


def test_raised_timeouts_raise_keep_larger_and_add_missing() -> None:
    text = "ClusterName=c\nSlurmctldTimeout=60\nSlurmdTimeout=7200\n"
    assert raised_timeouts(text) == "ClusterName=c\nSlurmctldTimeout=1800\nSlurmdTimeout=7200\n"
    assert raised_timeouts("ClusterName=c\n").endswith(
        "SlurmctldTimeout=1800\nSlurmdTimeout=1800\n")  # fmt: skip


def _kube(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1" if kind != "ConfigMap" else "v1", "kind": kind,
            "metadata": {"name": name, "namespace": "slurm"}, **spec}  # fmt: skip


def _change(obj: dict[str, Any]) -> Change:
    ref = ObjectRef("kubernetes", obj["kind"], "slurm", obj["metadata"]["name"])
    return Change(ref, Action.UPDATE, None, None, desired=obj)


def test_the_plan_parts_hold_back_the_stages_and_let_slurmdbd_convert_for_hours() -> None:
    probes = {"livenessProbe": {"tcpSocket": {}},
              "startupProbe": {"tcpSocket": {}, "periodSeconds": 10, "failureThreshold": 30},
              "readinessProbe": {"tcpSocket": {}}}  # fmt: skip
    dbd = _kube("Deployment", "slurm-accounting", spec={"template": {"spec": {"containers": [
        {"name": "slurmdbd", "image": "slurm:24.11.6", **probes},
        {"name": "munged", **probes}]}}})  # fmt: skip
    ctld = _kube("Deployment", "slurm-controller", spec={"replicas": 1})
    conf = _kube("ConfigMap", "slurm-slurm-conf", data={"slurm.conf": "SlurmdTimeout=30\n",
                                                        "gres.conf": ""})  # fmt: skip
    svc = _kube("Service", "slurm-rest")
    conf_change = Change(ObjectRef(SLURM, SLURM_CONFIG, "", "slurm.conf"), Action.UPDATE,
                         "a", "SlurmdTimeout=30\n")  # fmt: skip
    plan = Plan("slurm", "slurm", "p", (_change(dbd), _change(ctld), _change(svc),
                                        _change(conf), conf_change), upgrade=STAGES)  # fmt: skip
    assert slurm_conf_map([svc, conf]) is conf

    raising = raising_plan(plan, STAGES, conf, "SlurmdTimeout=30\n")
    assert [str(c.ref) for c in raising.changes] == [
        "Service slurm/slurm-rest",
        "ConfigMap slurm/slurm-slurm-conf",
        "SlurmConfig slurm.conf",
    ]
    assert raising.changes[1].desired["data"] == {
        "slurm.conf": "SlurmdTimeout=1800\nSlurmctldTimeout=1800\n",
        "gres.conf": "",
    }
    assert raising.changes[2].after == "SlurmdTimeout=1800\nSlurmctldTimeout=1800\n"
    assert raising.upgrade == ()

    first = stage_plan(plan, STAGES[0], conversion=6 * 3600)
    [change] = first.changes
    slurmdbd, munged = change.desired["spec"]["template"]["spec"]["containers"]
    # Six hours of startup before a probe may restart it; liveness waits for startup.
    assert slurmdbd["startupProbe"] == {"tcpSocket": {}, "periodSeconds": 10,
                                        "failureThreshold": 2160}  # fmt: skip
    assert slurmdbd["livenessProbe"] == probes["livenessProbe"]
    assert munged == {"name": "munged", **probes}  # only slurmdbd's probes
    rendered = dbd["spec"]["template"]["spec"]["containers"][0]
    assert rendered["startupProbe"]["failureThreshold"] == 30  # not changed
    assert [str(c.ref) for c in stage_plan(plan, STAGES[1]).changes] == [
        "Deployment slurm/slurm-controller"
    ]

    restoring = restoring_plan(plan, STAGES, [dbd, ctld, svc, conf], conf, "SlurmdTimeout=30\n")
    assert [str(c.ref) for c in restoring.changes] == [
        "ConfigMap slurm/slurm-slurm-conf",
        "SlurmConfig slurm.conf",
        "Deployment slurm/slurm-accounting",
        "Deployment slurm/slurm-controller",
    ]
    assert restoring.changes[1].after == "SlurmdTimeout=30\n"
    assert restoring.changes[2].desired == dbd  # slurmdbd's probes back


def test_the_releases_slurmctld_and_each_slurmd_report_are_read_from_scontrol() -> None:
    from reconciler.adapters.scontrol import config_value, node_versions

    config = "Configuration data as of 2026-01-01T00:00:00\nSLURM_VERSION           = 24.11.5\n"
    assert config_value(config, "SLURM_VERSION") == "24.11.5"
    assert config_value(config, "SlurmdTimeout") is None
    nodes = "\n".join([
        "NodeName=cpu-0 Arch=x86_64 State=IDLE Version=24.11.6 Reason=none",
        "NodeName=cpu-1 State=ALLOCATED+NOT_RESPONDING Version=24.11.5",
        "NodeName=cpu-2 State=DOWN+NOT_RESPONDING Version=(null)",
        "NodeName=spare-0 State=FUTURE Version=(null)",
        "NodeName=gpu-0 State=IDLE+CLOUD+POWERED_DOWN Version=24.11.5",
    ])  # fmt: skip
    assert node_versions(nodes) == {"cpu-0": "24.11.6", "cpu-1": None, "cpu-2": None,
                                    "gpu-0": None}  # fmt: skip
