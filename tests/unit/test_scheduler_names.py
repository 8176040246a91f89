"""The schedulerName forms SUNK's pages give, and the scheduler that answers to each: the one
rule (config/defaults.py served_scheduler_names) and what a look-alike Pod is told."""

from __future__ import annotations

from reconciler.config.defaults import served_scheduler_names
from reconciler.scheduler.decide.misnamed_decide import (
    GRACE_SECONDS,
    MAX_EVENTS_PER_SWEEP,
    Waiting,
    field_selector,
    looks_like_ours,
    message,
    to_tell,
    waiting_form,
    waiting_of,
)
from reconciler.scheduler.settings import settings_from_values

# The "Slurm Workload Manager" page's release, in the namespace of the Pod examples of
# "Schedule Kubernetes Pods with Slurm".
NAMESPACE, RELEASE = "tenant-slurm-staging", "slurm"


def test_each_pages_example_is_served() -> None:
    names = settings_from_values({}, release=RELEASE, namespace=NAMESPACE).names
    # "Schedule Kubernetes Pods with Slurm": its Pods' schedulerName,
    # "Formatted as <namespace>-<scheduler-name>".
    assert "tenant-slurm-staging-slurm-scheduler" in names
    # "SUNK Pod Scheduler": "The default name is <namespace>-<releaseName>".
    assert "tenant-slurm-staging-slurm" in names
    # The older text in "Run Workloads": <namespace>-<release>-slurm-scheduler.
    assert "tenant-slurm-staging-slurm-slurm-scheduler" in names
    # "Run Workloads"' example, tenant-slurm-scheduler: the release slurm in namespace tenant.
    assert (
        "tenant-slurm-scheduler"
        in settings_from_values({}, release=RELEASE, namespace="tenant").names
    )


def test_the_rule_own_name_first_and_nothing_else() -> None:
    assert served_scheduler_names(NAMESPACE, RELEASE) == (
        "tenant-slurm-staging-slurm-slurm-scheduler",
        "tenant-slurm-staging-slurm-scheduler",
        "tenant-slurm-staging-slurm",
    )
    configured = settings_from_values(
        {"scheduler": {"name": "gpu-pods"}}, release=RELEASE, namespace=NAMESPACE
    )
    assert configured.name == "gpu-pods"  # jobs and Events still name the configured one
    assert configured.names == ("gpu-pods", *served_scheduler_names(NAMESPACE, RELEASE))
    flag = settings_from_values({"scheduler": {"name": "gpu-pods"}}, release=RELEASE,
                                namespace=NAMESPACE, name="from-flag")  # fmt: skip
    assert flag.names[0] == "from-flag" and "gpu-pods" not in flag.names


def test_two_releases_in_one_namespace_share_no_name() -> None:
    a = set(served_scheduler_names(NAMESPACE, "slurm"))
    b = set(served_scheduler_names(NAMESPACE, "other"))
    assert not a & b


# ---- a look-alike Pod is told which names serve (misnamed_decide) ---------------------------

SERVED = served_scheduler_names(NAMESPACE, RELEASE)
NOW = 1_000_000.0


def _waiting(scheduler_name: str, *, namespace: str = NAMESPACE, age: float = 60.0,
             looked_at: bool = False, uid: str = "u1") -> Waiting:  # fmt: skip
    return Waiting(uid, namespace, "p", scheduler_name, NOW - age, looked_at)


def test_look_alikes_are_told_others_are_not() -> None:
    lookalikes = [
        "tenant-slurm-staging-other-slurm-scheduler",  # another release's, ours' form
        "tenant-slurm-scheduler",  # "Run Workloads"' example, written in another namespace
        "tenant-slurm-staging-slurmx",  # <ns>-<release> of another release
    ]
    for name in lookalikes:
        assert looks_like_ours(name, NAMESPACE, NAMESPACE, SERVED), name
        assert to_tell([_waiting(name)], SERVED, NAMESPACE, frozenset(), NOW), name
    for name in ("default-scheduler", "volcano", "yunikorn", *SERVED, "tenant-slurm-staging-"):
        assert not looks_like_ours(name, NAMESPACE, NAMESPACE, SERVED), name


def test_told_once_not_while_young_nor_when_a_scheduler_looked() -> None:
    name = "tenant-slurm-staging-other"
    assert not to_tell([_waiting(name)], SERVED, NAMESPACE, frozenset({"u1"}), NOW)
    assert not to_tell([_waiting(name, age=GRACE_SECONDS - 1)], SERVED, NAMESPACE,
                       frozenset(), NOW)  # fmt: skip
    assert not to_tell([_waiting(name, looked_at=True)], SERVED, NAMESPACE, frozenset(), NOW)
    many = [_waiting(name, uid=f"u{i}", age=60 + i) for i in range(MAX_EVENTS_PER_SWEEP + 5)]
    told = to_tell(many, SERVED, NAMESPACE, frozenset(), NOW)
    assert len(told) == MAX_EVENTS_PER_SWEEP and told[0].uid == f"u{MAX_EVENTS_PER_SWEEP + 4}"


def test_the_message_names_the_release_and_every_name_served() -> None:
    text = message(_waiting("tenant-slurm-scheduler"), SERVED, RELEASE, NAMESPACE)
    assert "'tenant-slurm-scheduler'" in text and "'slurm'" in text
    assert all(name in text for name in SERVED)


def test_the_listing_is_reduced_and_filtered_by_the_api_server() -> None:
    assert field_selector(SERVED) == (
        "status.phase=Pending,spec.nodeName=,spec.schedulerName!=default-scheduler,"
        + ",".join(f"spec.schedulerName!={n}" for n in SERVED)
    )
    pod = {"metadata": {"name": "p", "namespace": "n", "uid": "u",
                        "creationTimestamp": "2026-01-01T00:00:00Z",
                        "annotations": {"big": "x" * 1000}, "labels": {"a": "b"}},
           "spec": {"schedulerName": "s", "containers": [{"name": "c"}]},
           "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled"}]}}  # fmt: skip
    form = waiting_form(pod)
    assert set(form) == {"uid", "namespace", "name", "schedulerName", "created", "lookedAt"}
    assert waiting_of(form) == Waiting("u", "n", "p", "s", 1767225600.0, True)


def test_events_and_logs_say_every_name_served() -> None:
    settings = settings_from_values({}, release=RELEASE, namespace=NAMESPACE)
    assert settings.served == (
        "scheduler tenant-slurm-staging-slurm-slurm-scheduler (answers to "
        "tenant-slurm-staging-slurm-slurm-scheduler, tenant-slurm-staging-slurm-scheduler, "
        "tenant-slurm-staging-slurm)"
    )
