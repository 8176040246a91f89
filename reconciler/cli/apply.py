"""`reconciler plan` (live or --offline) and `reconciler apply`."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from reconciler.apply.executor import apply_plan
from reconciler.apply.kube_objects import with_value_secret_data
from reconciler.apply.live_reader import read_live
from reconciler.apply.target import ApplyError, ApplyOptions, Target
from reconciler.cli.compile import load, repo_args
from reconciler.cli.plan_output import exit_code, output_args, show
from reconciler.cli.where import connect, target_args
from reconciler.compile.desired import compile_shape
from reconciler.config.repo import Config
from reconciler.daemon.upgrade_status import StatusRecords
from reconciler.pipeline.clients import Clients
from reconciler.pipeline.plans import Planned, plan_config, plan_offline, plan_passes
from reconciler.pipeline.upgrades import upgrade_first, values_key
from reconciler.plan.jsonout import plan_from_dict, plan_to_dict
from reconciler.plan.model import Plan


def register(sub: argparse._SubParsersAction) -> None:
    plan_cmd = sub.add_parser("plan", help="show exactly what apply would change")
    repo_args(plan_cmd)
    plan_cmd.add_argument(
        "--offline", action="store_true", help="compare with an empty cluster (no connections)"
    )
    target_args(plan_cmd)
    output_args(plan_cmd)
    plan_cmd.add_argument("--out", type=Path, metavar="FILE", help="save the plan for apply")
    plan_cmd.set_defaults(func=run_plan)

    apply_cmd = sub.add_parser("apply", help="make the cluster match the config repo")
    repo_args(apply_cmd)
    target_args(apply_cmd)
    apply_cmd.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    apply_cmd.add_argument(
        "--plan-file", type=Path, metavar="FILE",
        help="apply exactly this saved plan (refused if the live state changed since)",
    )  # fmt: skip
    apply_cmd.add_argument("--drain-timeout", type=float, default=600.0, metavar="SECONDS")
    apply_cmd.add_argument(
        "--on-drain-timeout", choices=("fail", "requeue"), default="fail",
        help="when jobs outlive the drain timeout: stop (default) or requeue them",
    )  # fmt: skip
    apply_cmd.add_argument("--register-timeout", type=float, default=60.0, metavar="SECONDS")
    apply_cmd.set_defaults(func=run_apply)


# ---- commands ---------------------------------------------------------------------------


def run_plan(args: argparse.Namespace) -> int:
    target: Target | None = None
    if args.offline:
        plan = plan_offline(load(args))
    else:
        config = load(args)
        planned = plan_config(config, connect(args))
        plan, target = planned.plan, planned.target
    if args.revision:
        plan = replace(plan, revision=args.revision)
    if args.out:
        args.out.write_text(json.dumps(plan_to_dict(plan), indent=2) + "\n")
        print(f"plan saved to {args.out}", file=sys.stderr)
    show(plan, args, target)
    return exit_code(plan, args)


def run_apply(args: argparse.Namespace) -> int:
    options = ApplyOptions(
        drain_timeout=args.drain_timeout,
        on_drain_timeout=args.on_drain_timeout,
        register_timeout=args.register_timeout,
    )
    if args.plan_file:
        plan = plan_from_dict(json.loads(args.plan_file.read_text()))
        if plan.upgrade:
            raise ApplyError(
                "a saved plan of a Slurm upgrade cannot be applied: each stage is applied "
                "against the cluster as its check left it",
                hint="apply without --plan-file (plan shows the stages first); nothing was changed",
            )
        config = load(args)
        plan = with_value_secret_data(plan, compile_shape(config))
        target = connect(args).target(config.settings.namespace, config.settings.release)
        _apply_one(plan, target, options, args)
        return 0
    config = load(args)
    clients = connect(args)
    settings = config.settings
    records = StatusRecords.of_command(clients.kube, settings.namespace, settings.release)
    for planned in plan_passes(config, clients):
        show(planned.plan, args)
        planned = _upgraded(planned, records, config, clients, options, args)
        if not _apply_one(planned.plan, planned.target, options, args):
            break
    return 0


def _upgraded(
    planned: Planned, records: StatusRecords, config: Config, clients: Clients,
    options: ApplyOptions, args: argparse.Namespace,
) -> Planned:  # fmt: skip
    """A Slurm upgrade (or the rest of one recorded) carried out stage by stage, each
    stage's progress said; then the plan of what is left."""
    if planned.plan.upgrade:
        _confirm(args)
        _refuse_stale(planned.plan, planned.target)
    if not upgrade_first(planned, records, values_key(config), options, _say):
        return planned
    again = plan_config(config, clients)
    show(again.plan, args)
    return again


def _apply_one(plan: Plan, target: Target, options: ApplyOptions, args: argparse.Namespace) -> bool:
    """Apply one plan after confirmation; whether it had changes."""
    if plan.offline:
        raise ApplyError("an offline plan cannot be applied", hint="plan against the cluster")
    if not plan.has_changes:
        print("No changes. The cluster matches the config repo.")
        return False
    _confirm(args)
    _refuse_stale(plan, target)
    apply_plan(plan, target, options, _say)
    summary = plan.summary()
    print(f"Apply complete: {summary.add} added, {summary.change} changed, "
          f"{summary.destroy} destroyed.")  # fmt: skip
    return True


def _refuse_stale(plan: Plan, target: Target) -> None:
    live = read_live(target.kube, target.slurm, plan.release, plan.namespace, target.sacctmgr)
    if live.fingerprint() != plan.fingerprint:
        raise ApplyError(
            "the plan is stale: the cluster or Slurm changed since it was made",
            hint="run plan again and review it (nothing was changed)",
        )


def _confirm(args: argparse.Namespace) -> None:
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise ApplyError("apply needs confirmation", hint="pass --yes when not on a terminal")
    answer = input("Apply these changes? Only 'yes' is accepted: ")
    if answer.strip() != "yes":
        raise ApplyError("apply cancelled; nothing was changed")


def _say(text: str) -> None:
    print(f"apply: {text}", file=sys.stderr, flush=True)
