"""Defaults that more than one stage reads from the same values: the config's policy subjects,
the compiler's slurm.conf and the scheduler's settings must agree on them. Pure."""

from __future__ import annotations

# Slurm's KillWait default, and that of SUNK's "Slurm Workload Manager" page.
DEFAULT_KILL_WAIT_SECONDS = 30
# The largest real uid or gid, for admission, values and the shipped pod-user-id-allowed:
# Slurm reads 0xfffffffe and 0xffffffff as NO_VAL and INFINITE (and Linux reserves (uid_t)-1).
MAX_UNIX_ID = 0xFFFFFFFD


def default_scheduler_name(namespace: str, release: str) -> str:
    """`<namespace>-<release>-slurm-scheduler`: the name the scheduler uses (its jobs' names,
    its Events, the slurmd Pods it places with power saving) when `scheduler.name` is unset,
    as the older "Schedule Kubernetes Pods with Slurm" text in SUNK's "Run Workloads" gives it.
    It answers to more: `served_scheduler_names`."""
    return f"{namespace}-{release}-slurm-scheduler"


def served_scheduler_names(
    namespace: str, release: str, configured: str | None = None
) -> tuple[str, ...]:
    """Every `spec.schedulerName` the scheduler of `release` in `namespace` (the namespace it
    is deployed in, not the Pod's) answers to, the name it uses first. The one rule, so that a
    Pod written after any of SUNK's pages is scheduled:

    - `configured` (`scheduler.name`, `--scheduler-name`), else ours, below;
    - `<namespace>-<release>-slurm-scheduler`: the older "Schedule Kubernetes Pods with Slurm"
      text in "Run Workloads" ("e.g. `<namespace>-<release>-slurm-scheduler`");
    - `<namespace>-<release>-scheduler`: "Schedule Kubernetes Pods with Slurm" writes its
      example `tenant-slurm-staging-slurm-scheduler`, for a Pod in `tenant-slurm-staging`,
      as "Formatted as `<namespace>-<scheduler-name>`", the scheduler being
      `<release>-scheduler` (release `slurm`, the "Slurm Workload Manager" page's); "Run
      Workloads"' example `tenant-slurm-scheduler` is the same form in namespace `tenant`;
    - `<namespace>-<release>`: "SUNK Pod Scheduler" (and the prose of "Schedule Kubernetes
      Pods with Slurm"): "The default name is `<namespace>-<releaseName>`".

    Every form names the release, so two releases never answer to the same default name (a
    `scheduler.name` of one equal to another's default form is the operator's to avoid)."""
    forms = (
        configured or default_scheduler_name(namespace, release),
        default_scheduler_name(namespace, release),
        f"{namespace}-{release}-scheduler",
        f"{namespace}-{release}",
    )
    return tuple(dict.fromkeys(forms))
