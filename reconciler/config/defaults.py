"""Defaults that more than one stage reads from the same values: the config's policy subjects,
the compiler's slurm.conf and the scheduler's settings must agree on them. Pure."""

from __future__ import annotations

# Slurm's KillWait default, and that of SUNK's "Slurm Workload Manager" page.
DEFAULT_KILL_WAIT_SECONDS = 30
# The largest real uid or gid, for admission, values and the shipped pod-user-id-allowed:
# Slurm reads 0xfffffffe and 0xffffffff as NO_VAL and INFINITE (and Linux reserves (uid_t)-1).
MAX_UNIX_ID = 0xFFFFFFFD


def default_scheduler_name(namespace: str, release: str) -> str:
    """`<namespace>-<release>-slurm-scheduler`, as SUNK's older "Schedule Kubernetes Pods with
    Slurm" text (in "Run Workloads") gives it; it is also what the examples of SUNK's "Schedule
    Kubernetes Pods with Slurm" and "SUNK Pod Scheduler" pages show
    (tenant-slurm-staging-slurm-scheduler)."""
    return f"{namespace}-{release}-slurm-scheduler"
