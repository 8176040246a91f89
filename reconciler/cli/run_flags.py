"""`reconciler run`'s flags: what the daemon takes, apart from how `cli/run.py` wires it."""

from __future__ import annotations

import argparse
from pathlib import Path

from reconciler.scheduler.settings import DEFAULT_HOOKS_PORT
from reconciler.slurm_metrics.reader import JOB_DETAIL_LIMIT
from reconciler.sources.git import GIT_TIMEOUT_SECONDS

WEBHOOK_SECRET_ENV = "RECONCILER_WEBHOOK_SECRET"


def add_run_arguments(run: argparse.ArgumentParser) -> None:
    source = run.add_argument_group("source (one)")
    source.add_argument("--git-url", help="a git remote to clone and fetch")
    source.add_argument("--git-branch", default="main", help="its branch (default: main)")
    source.add_argument("--git-subdir", default="", help="the config repo's folder in it")
    source.add_argument(
        "--git-timeout", type=float, default=GIT_TIMEOUT_SECONDS, metavar="SECONDS",
        help=f"give up a git fetch after N s ({GIT_TIMEOUT_SECONDS:g}; the next fetch retries)",
    )  # fmt: skip
    source.add_argument("--source-dir", type=Path, help="a directory kept fresh by a sidecar")
    source.add_argument(
        "--flux-git-repository", metavar="NS/NAME", help="a Flux GitRepository's artifact"
    )
    source.add_argument(
        "--verify-signatures", action="store_true",
        help="refuse a git head that is not signed by a key in --trusted-keys",
    )  # fmt: skip
    source.add_argument(
        "--trusted-keys", type=Path, metavar="FILE",
        help="the public keys allowed to sign (gpg --export --armor KEYID... > FILE)",
    )  # fmt: skip
    source.add_argument(
        "--allow-non-descendant", action="store_true",
        help="apply a git head that does not descend from the last revision applied (a "
        "force push back, another branch's commit); refused without it",
    )  # fmt: skip
    run.add_argument("--workdir", type=Path, help="where clones and artifacts go (a temp dir)")
    run.add_argument("--interval", type=float, default=30.0, help="fetch every N s (30)")
    run.add_argument("--resync", type=float, default=300.0, help="re-plan every N s (300)")
    run.add_argument("--listen", default="127.0.0.1:8080", help="health/metrics HOST:PORT")
    run.add_argument(
        "--webhook-secret-file", type=Path,
        help=f"serve POST /webhook for GitHub/Gitea/GitLab pushes (or ${WEBHOOK_SECRET_ENV})",
    )  # fmt: skip
    run.add_argument("--release", help="release name (default: reconciler.yaml, else 'slurm')")
    run.add_argument("--namespace", help="namespace (default: reconciler.yaml, else 'slurm')")
    run.add_argument("--no-scheduler", action="store_true", help="do not schedule Pods")
    run.add_argument(
        "--leader-elect", action="store_true",
        help="several replicas, one active: hold the Lease <release>-reconciler to act",
    )  # fmt: skip
    run.add_argument(
        "--lease-duration", type=float, default=15.0, metavar="SECONDS",
        help="a follower takes over a lease unchanged this long (15); the leader renews every "
        "2/15 of it and stops leading 2/3 of it after its last renewal, as client-go does",
    )  # fmt: skip
    run.add_argument("--identity", help="this replica's name in the Lease (host name and PID)")
    run.add_argument(
        "--hooks-api-bind-address", default=f"0.0.0.0:{DEFAULT_HOOKS_PORT}", metavar="HOST:PORT"
    )
    run.add_argument("--hooks-url", help="URL placeholder jobs use to reach the hooks API")
    health = run.add_argument_group("node health, both ways (Kubernetes Nodes <-> Slurm nodes)")
    health.add_argument(
        "--node-sync-interval", type=float, default=10.0, metavar="SECONDS",
        help="compare Nodes, slurmd Pods and Slurm nodes every N s (10; 0 turns it off)",
    )  # fmt: skip
    health.add_argument(
        "--drain-on-condition", action="append", default=[], metavar="TYPE",
        help="drain the Slurm nodes of a Node whose condition TYPE is True (repeatable; e.g. "
        "Node Problem Detector's KernelDeadlock)",
    )  # fmt: skip
    health.add_argument(
        "--drain-on-taint", action="append", default=[], metavar="KEY",
        help="drain the Slurm nodes of a Node with a NoSchedule/NoExecute taint KEY "
        "(repeatable; cordoned and NotReady Nodes drain without it)",
    )  # fmt: skip
    health.add_argument(
        "--cordon-when-slurm-down", action="store_true",
        help="cordon a Node whose Slurm nodes are all down or failing, and uncordon it when "
        "they are back (the daemon's RBAC then needs `patch` on nodes)",
    )  # fmt: skip
    run.add_argument(
        "--slurm-metrics-interval", type=float, default=30.0, metavar="SECONDS",
        help="read Slurm's nodes, jobs and scheduler statistics for /metrics every N s (30; "
        "0 turns the slurm_* series off); a scrape serves the last read",
    )  # fmt: skip
    run.add_argument(
        "--slurm-metrics-job-detail-limit", type=_count, default=JOB_DETAIL_LIMIT, metavar="N",
        help=f"through slurmrestd, read Slurm's whole job list (slurm_jobs per partition, "
        f"slurm_jobs_pending, slurm_jobs_held) only while it holds at most N jobs "
        f"({JOB_DETAIL_LIMIT}); above it, jobs are counted per state from GET /jobs/state/",
    )  # fmt: skip
    run.add_argument(
        "--slurmctld-metrics-url", metavar="URL",
        help="slurmctld's OpenMetrics (Slurm 25.11+, MetricsType=metrics/openmetrics), read "
        "for the slurm_* series instead of slurmrestd while it answers (default: the "
        "controller Service's SlurmctldPort, or the local stack's; 'off': slurmrestd only)",
    )  # fmt: skip


def _count(value: str) -> int:
    """A whole number of at least 0, for argparse (which names the flag in its error)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"{number} is below 0")
    return number
