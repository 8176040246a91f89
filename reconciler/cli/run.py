"""`reconciler run`: the GitOps daemon."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.adapters.kube import Kube
from reconciler.adapters.node_control import NodeControl
from reconciler.adapters.slurmctld_metrics import SlurmctldMetrics
from reconciler.cli.run_flags import WEBHOOK_SECRET_ENV, add_run_arguments
from reconciler.cli.schedule import connect_scheduler
from reconciler.cli.settings import describe_environment, log_format_arg
from reconciler.cli.where import connect, kubeconfig_of, target_args
from reconciler.compile.control_plane import controller_name
from reconciler.compile.profile import Profile
from reconciler.daemon.converge import Converger
from reconciler.daemon.heap import limit_arenas
from reconciler.daemon.lease import LeaderElector, LeaseTimings
from reconciler.daemon.run import Daemon, RunSettings
from reconciler.daemon.scheduler_slot import SettingsFollower
from reconciler.daemon.startup import HooksFlags, Prepared, Startup, preparer, scheduler_settings
from reconciler.errors import ReconcilerError, SlurmUnavailableError
from reconciler.pipeline.clients import Clients
from reconciler.scheduler.loop import PodScheduler
from reconciler.scheduler.settings import DEFAULT_HOOKS_PORT, SchedulerSettings
from reconciler.slurm_metrics.reader import SlurmMetricsReader
from reconciler.sources import Revision, Source
from reconciler.sources.directory import DirectorySource
from reconciler.sources.flux import FluxArtifactSource
from reconciler.sources.git import GitSource
from reconciler.sync.node_health_decide import NodeSyncSettings
from reconciler.sync.node_health_effects import NodeSync

log = logging.getLogger("reconciler.run")


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        help="the daemon: converge the cluster to the config repo, and schedule Pods",
        description=(
            "Fetch the config repo on an interval, compile, plan and apply each new revision "
            "(a failed one is recorded and the last good one stays applied), re-plan the "
            "applied revision on a longer interval to revert changes made by hand, and run "
            "the Pod scheduler in the same process. /healthz, /readyz and /metrics are served "
            "on --listen."
        ),
    )
    add_run_arguments(run)
    run.add_argument("--config", type=Path, help="a YAML file of settings (see below)")
    log_format_arg(run)
    target_args(run)
    run.epilog = describe_environment(run)
    run.set_defaults(func=run_daemon)


def run_daemon(args: argparse.Namespace) -> int:
    limit_arenas()  # before any thread: each keeps the arena it is given (daemon/heap.py)
    kube = _kube(args)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sunk-reconciler-run-"))
    # The clients plans and applies go through: connected once, at the first convergence.
    converger = Converger(lambda: connect(args), kube, release=args.release,
                          namespace=args.namespace)  # fmt: skip
    # A git head must descend from what the status says was applied last.
    source = _source(args, kube, workdir, converger.applied)
    daemon = Daemon(source, converger, _run_settings(args))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.leader_elect:  # a replica without its elector yet is not the lone one: not leading
        daemon.lead_with(lambda: False)
    daemon.serve()  # health while the first usable revision is looked for
    prepare = preparer(converger.loader.load, _hooks_flags(args))
    startup = Startup(source, prepare, converger, kube, release=args.release,
                      namespace=args.namespace)  # fmt: skip
    start = startup.first(stop, args.interval, lambda why: setattr(daemon, "waiting", why))
    if start is None:  # stopped while waiting
        daemon.stop()
        return 0
    settings = start.prepared.config.settings
    release, namespace = settings.release, settings.namespace
    make_scheduler = _scheduler(args, start.prepared)
    scheduler = None
    if make_scheduler is not None:
        try:
            scheduler = make_scheduler()
        except SlurmUnavailableError:  # a cluster being brought up: converge first
            daemon.scheduler.make_later(make_scheduler, args.interval)
    node_sync = _node_sync(args, namespace, release)
    daemon.attach(scheduler=scheduler, node_sync=node_sync,
                  slurm_metrics=_slurm_metrics(args, namespace, release),
                  initial=start.revision if start.fallback else None)  # fmt: skip
    if scheduler is not None:  # bind latency and Slurm requests on /metrics
        scheduler.observe(bind=daemon.metrics.observe_bind, slurm=daemon.metrics.observe_slurm)
    if node_sync is not None:
        node_sync.observe(daemon.metrics.observe_node_sync)
    daemon.scheduler.follow(_follower(args, converger), start.prepared.scheduler)
    elector = _elect(args, namespace, release, daemon) if args.leader_elect else None
    if elector is None:
        daemon.start()
    log.info(
        "reconciler run: %s -> %s/%s; health and metrics on port %d%s",
        getattr(source, "origin", source), namespace, release, daemon.port,
        "" if scheduler is None else f"; scheduling Pods as {scheduler.settings.served}",
    )  # fmt: skip
    stop.wait()
    daemon.stop()  # our writers stop before the lease is given up
    if elector is not None:
        elector.stop(release=True)
    return 0


def _run_settings(args: argparse.Namespace) -> RunSettings:
    host, _, port = args.listen.rpartition(":")
    return RunSettings(
        args.interval,
        args.resync,
        host or "127.0.0.1",
        int(port),
        webhook_secret=_webhook_secret(args),
        branch=args.git_branch,
        node_sync_seconds=args.node_sync_interval,
        slurm_metrics_seconds=args.slurm_metrics_interval,
    )


def _hooks_flags(args: argparse.Namespace) -> HooksFlags:
    host, _, port = args.hooks_api_bind_address.rpartition(":")
    return HooksFlags(host or "0.0.0.0", int(port or DEFAULT_HOOKS_PORT), args.hooks_url,
                      scheduler=not args.no_scheduler)  # fmt: skip


def _scheduler(args: argparse.Namespace, prepared: Prepared) -> Callable[[], PodScheduler] | None:
    """How to make the scheduler (it needs slurmrestd: SchedulerSlot.make_later)."""
    if prepared.scheduler is None:
        return None
    settings = prepared.scheduler

    def connected() -> PodScheduler:
        scheduler = connect_scheduler(args, settings)
        scheduler.set_policies(prepared.pod_policies)
        return scheduler

    return connected


def _follower(args: argparse.Namespace, converger: Converger) -> SettingsFollower:
    """A revision's scheduler settings (the converger's loader has it loaded already)."""
    hooks = _hooks_flags(args)

    def settings_of(revision: Revision) -> SchedulerSettings | None:
        return scheduler_settings(converger.loader.load(revision.id, revision.path), hooks)

    def connect(settings: SchedulerSettings) -> Callable[[], PodScheduler]:
        return lambda: connect_scheduler(args, settings)

    return SettingsFollower(settings_of, connect, args.interval)


def _elect(args: argparse.Namespace, namespace: str, release: str, daemon: Daemon) -> LeaderElector:
    identity = args.identity or f"{socket.gethostname()}-{os.getpid()}"
    timings = LeaseTimings.for_duration(args.lease_duration)
    # A client of its own: its requests never queue behind the scheduler's in a shared pool,
    # and one that hangs gives up well within the renew deadline.
    kube = _kube(args)
    kube.timeout = timings.renew_deadline / 2
    elector = LeaderElector(kube, namespace, f"{release}-reconciler", identity, timings=timings)

    def lost() -> None:
        # Another replica may be acting already: not one more write from this one.
        log.error("reconciler run: %s is no longer the leader; exiting", identity)
        logging.shutdown()
        os._exit(1)

    daemon.lead_with(elector.leading)
    elector.start(daemon.start, lost)
    log.info(
        "reconciler run: %s waits for the lease %s/%s-reconciler", identity, namespace, release
    )
    return elector


def _node_sync(args: argparse.Namespace, namespace: str, release: str) -> NodeSync | None:
    found = _slurm_target(
        args, "--node-sync-interval", args.node_sync_interval,
        "the node health sync", "the sync",
    )  # fmt: skip
    if found is None:
        return None
    settings = NodeSyncSettings(
        drain_on_conditions=frozenset(_words(args.drain_on_condition, "--drain-on-condition")),
        drain_on_taints=frozenset(_words(args.drain_on_taint, "--drain-on-taint")),
        cordon_when_slurm_down=args.cordon_when_slurm_down,
    )
    return NodeSync(
        found.kube, found.slurm, NodeControl(found.slurm, found.scontrol), namespace=namespace,
        release=release, settings=settings,
    )  # fmt: skip


def _slurm_metrics(
    args: argparse.Namespace, namespace: str, release: str
) -> SlurmMetricsReader | None:
    """A reader of Slurm for /metrics, on a client of its own: a read of every job never
    queues behind the node sync's or the scheduler's requests."""
    found = _slurm_target(
        args, "--slurm-metrics-interval", args.slurm_metrics_interval,
        "the Slurm metrics reader", "it",
    )  # fmt: skip
    if found is None:
        return None
    url = slurmctld_metrics_url(args, namespace, release, found.profile_of(lambda: ()))
    openmetrics = SlurmctldMetrics(url) if url else None
    return SlurmMetricsReader(
        found.slurm, openmetrics=openmetrics, job_detail_limit=args.slurm_metrics_job_detail_limit
    )


def slurmctld_metrics_url(
    args: argparse.Namespace, namespace: str, release: str, profile: Profile
) -> str:
    """--slurmctld-metrics-url, else slurmctld's port where the rendered config puts it: the
    local stack's on loopback, or the controller Service's in the cluster ("" for 'off')."""
    given = (getattr(args, "slurmctld_metrics_url", None) or "").strip()
    if given:
        return "" if given == "off" else given
    if args.local or args.runtime_dir:
        return f"http://127.0.0.1:{profile.slurmctld_port}"
    return f"http://{controller_name(release)}.{namespace}.svc:{profile.slurmctld_port}"


def _slurm_target(
    args: argparse.Namespace, option: str, seconds: float, what: str, it: str
) -> Clients | None:
    """Clients of its own for WHAT, run every SECONDS (OPTION), to read Slurm through; None
    when OPTION is 0."""
    if seconds < 0:
        raise ReconcilerError(
            f"{option} {seconds:g}: expected seconds >= 0", hint=f"0 turns {what} off"
        )
    if seconds == 0:
        return None
    try:
        return connect(args)
    except ReconcilerError as error:
        raise ReconcilerError(
            f"{what} needs Slurm: {error.message}",
            hint=f"--local, or --slurm-url with Slurm credentials; {option} 0 turns {it} off",
        ) from None


def _words(values: list[str], option: str) -> list[str]:
    """Repeated flags, or comma lists from the environment and config file."""
    words = [w.strip() for value in values for w in value.split(",")]
    if any(not w for w in words):
        raise ReconcilerError(f"{option}: an empty value", hint=f"{option} NAME, once per name")
    return words


def _webhook_secret(args: argparse.Namespace) -> bytes | None:
    if args.webhook_secret_file:
        try:
            secret = args.webhook_secret_file.read_bytes().strip()
        except OSError as error:
            raise ReconcilerError(
                f"cannot read --webhook-secret-file {args.webhook_secret_file}: {error.strerror}"
            ) from None
        if not secret:  # an HMAC under an empty key is one anyone can compute: no auth at all
            raise ReconcilerError(
                f"--webhook-secret-file {args.webhook_secret_file} is empty",
                hint="put the secret the forge signs with in it (e.g. openssl rand -hex 32), "
                "or drop the flag to serve no /webhook",
            )
        return secret
    value = os.environ.get(WEBHOOK_SECRET_ENV, "").strip()
    return value.encode() if value else None


def _kube(args: argparse.Namespace) -> Kube:
    return Kube.from_kubeconfig(kubeconfig_of(args))


def _source(
    args: argparse.Namespace,
    kube: Kube,
    workdir: Path,
    applied: Callable[[], tuple[str, str]] | None = None,
) -> Source:
    """The one source the flags name; `applied()`: the last revision applied, and where from."""
    chosen: list[Any] = [x for x in (args.git_url, args.source_dir, args.flux_git_repository) if x]
    if len(chosen) != 1:
        raise ReconcilerError(
            "run needs exactly one source",
            hint="--git-url URL, --source-dir DIR or --flux-git-repository NS/NAME",
        )
    if args.git_url:
        return GitSource(
            args.git_url, args.git_branch, workdir / "git", subdir=args.git_subdir,
            verify_signatures=args.verify_signatures, trusted_keys=args.trusted_keys,
            timeout=args.git_timeout, applied=applied,
            allow_non_descendant=args.allow_non_descendant,
        )  # fmt: skip
    if args.verify_signatures or args.trusted_keys or args.allow_non_descendant:
        raise ReconcilerError(
            "--verify-signatures, --trusted-keys and --allow-non-descendant work with "
            "--git-url only",
            hint="a --source-dir or Flux source is verified by what fetches it "
            "(Flux: the GitRepository's spec.verify)",
        )
    if args.source_dir:
        return DirectorySource(args.source_dir)
    namespace, _, name = str(args.flux_git_repository).partition("/")
    if not namespace or not name:
        raise ReconcilerError(
            f"--flux-git-repository {args.flux_git_repository!r}: expected NAMESPACE/NAME"
        )
    return FluxArtifactSource(kube, namespace, name, workdir / "flux")
