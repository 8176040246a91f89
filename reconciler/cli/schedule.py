"""`reconciler schedule`: the Pod-to-Slurm scheduler on its own (the daemon runs it in-process)."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.cli.compile import load
from reconciler.cli.durations import duration_seconds
from reconciler.cli.settings import log_format_arg
from reconciler.cli.where import is_local, kubeconfig_of, local_stack, target_args, tokens_from_args
from reconciler.daemon.heap import limit_arenas
from reconciler.errors import ReconcilerError
from reconciler.local.stack import LocalStack
from reconciler.local.target_parts import client_env, scheduler_endpoints
from reconciler.policy.loader import shipped_policies
from reconciler.policy.subjects import default_params
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.loop import PodScheduler
from reconciler.scheduler.pod_policies import PodPolicies, startup_pod_policies
from reconciler.scheduler.settings import (
    DEFAULT_HOOKS_PORT,
    DEFAULT_WORKERS,
    SchedulerSettings,
    settings_from_values,
)

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser(
        "schedule",
        help="run the Pod scheduler: Pods become placeholder Slurm jobs, bound where Slurm runs",
        description=(
            "Watch Pods whose spec.schedulerName is ours, submit one placeholder Slurm job per "
            "Pod, and bind each Pod to the Kubernetes Node of the Slurm node Slurm gives it. "
            "Settings come from the config repo's `scheduler:` values; flags override them."
        ),
    )
    cmd.add_argument("repo", nargs="?", help="config repo for scheduler.* and KillWait")
    cmd.add_argument("--release", help="release name (default: reconciler.yaml, else 'slurm')")
    cmd.add_argument("--namespace", help="namespace of the slurmd Pods (default: 'slurm')")
    cmd.add_argument("--scheduler-name", help="default: <namespace>-<release>-slurm-scheduler")
    cmd.add_argument(
        "--watch-namespace", action="append", metavar="NS",
        help="namespace to watch (repeatable); default: scheduler.scope, else --namespace",
    )  # fmt: skip
    cmd.add_argument("--all-namespaces", action="store_true", help="watch the whole cluster")
    cmd.add_argument(
        "--slurm-kill-wait", type=duration_seconds, metavar="DURATION",
        help="Slurm's KillWait: seconds (30) or a duration (30s, 1m30s), as SUNK's scheduler",
    )  # fmt: skip
    cmd.add_argument(
        "--hooks-api-bind-address", default=f"0.0.0.0:{DEFAULT_HOOKS_PORT}", metavar="HOST:PORT",
        help="where placeholder jobs call in (port 0: any free port)",
    )  # fmt: skip
    cmd.add_argument("--hooks-url", help="URL jobs use to reach it (default: http://<bind>)")
    cmd.add_argument("--poll-interval", type=float, metavar="SECONDS", help="safety-net poll")
    cmd.add_argument(
        "--workers", type=int, help=f"Pods handled in parallel (default {DEFAULT_WORKERS})"
    )
    target_args(cmd)
    log_format_arg(cmd)
    cmd.set_defaults(func=run_schedule)


def scheduler_settings(args: argparse.Namespace) -> SchedulerSettings:
    values: dict[str, Any] = {}
    release, namespace = args.release or "slurm", args.namespace or "slurm"
    if args.repo:
        config = load(args)
        values = config.values
        release, namespace = config.settings.release, config.settings.namespace
    host, _, port = args.hooks_api_bind_address.rpartition(":")
    settings = settings_from_values(
        values,
        release=release,
        namespace=namespace,
        name=args.scheduler_name,
        kill_wait_seconds=args.slurm_kill_wait,
        hooks_host=host or "0.0.0.0",
        hooks_port=int(port),
        hooks_url=args.hooks_url,
        poll_seconds=args.poll_interval,
        workers=args.workers,
    )
    if not args.repo:
        settings = replace(settings, accounting=None)  # no values: slurm.conf is not known
    if args.all_namespaces:
        settings = replace(settings, watch_namespaces=None)
    elif args.watch_namespace:
        settings = replace(settings, watch_namespaces=tuple(args.watch_namespace))
    return settings


def connect_scheduler(args: argparse.Namespace, settings: SchedulerSettings) -> PodScheduler:
    if is_local(args):
        return local_scheduler(
            local_stack(args), settings, kubeconfig=args.kubeconfig,
            slurm_url=getattr(args, "slurm_url", None),
        )  # fmt: skip
    if not args.slurm_url:
        raise ReconcilerError(
            "schedule needs a cluster: --local for the local stack, or --slurm-url (with "
            "--kubeconfig) for a cluster"
        )
    kube = Kube.from_kubeconfig(kubeconfig_of(args), field_manager=wk.SCHEDULER_FIELD_MANAGER)
    tokens = tokens_from_args(args)
    env = {"SLURM_CONF": str(args.slurm_conf)} if getattr(args, "slurm_conf", None) else {}
    clients = SlurmClients(
        args.slurm_url, tokens, jwt_key=args.slurm_jwt_key, scontrol=Scontrol(tokens, env=env)
    )
    return PodScheduler(kube, clients, settings)


def local_scheduler(
    stack: LocalStack,
    settings: SchedulerSettings,
    *,
    kubeconfig: Path | None = None,
    slurm_url: str | None = None,
) -> PodScheduler:
    """A scheduler on the local stack (`schedule --local`, `run --local`, `local up`)."""
    default_kubeconfig, url, key, user = scheduler_endpoints(stack, slurm_url)
    kube = Kube.from_kubeconfig(
        kubeconfig or default_kubeconfig, field_manager=wk.SCHEDULER_FIELD_MANAGER
    )
    tokens = MintedTokens(key, user)
    scontrol = Scontrol(tokens, env=client_env(stack, kube)) if stack.slurm else None
    clients = SlurmClients(url, tokens, jwt_key=key, scontrol=scontrol)
    return PodScheduler(kube, clients, settings)


def _pod_policies(args: argparse.Namespace, settings: SchedulerSettings) -> PodPolicies:
    """The repo's pod policies with its settings; without a repo, the shipped ones."""
    if args.repo:
        return startup_pod_policies(load(args))
    pods = tuple(p for p in shipped_policies() if p.policy.target == "pod")
    params = {**default_params(), "killWait": settings.kill_wait_seconds,
              "schedulerName": settings.name}  # fmt: skip
    return PodPolicies(pods, params)


def run_schedule(args: argparse.Namespace) -> int:
    limit_arenas()  # a daemon too: before any thread (daemon/heap.py)
    settings = scheduler_settings(args)
    scheduler = connect_scheduler(args, settings)
    scheduler.set_policies(_pod_policies(args, settings))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    scheduler.start()
    log.info(
        "scheduling Pods with schedulerName %s (hooks on port %s); Ctrl-C stops",
        " or ".join(settings.names), scheduler.hooks.port if scheduler.hooks else "?",
    )  # fmt: skip
    stop.wait()
    scheduler.stop()
    return 0
