"""`reconciler plan` (live or --offline) and `reconciler apply`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.sacctmgr import Sacctmgr
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm_client import connect_lazily
from reconciler.adapters.slurm_jwt import MintedTokens, ProvidedToken, TokenSource
from reconciler.adapters.slurm_rest import SlurmRestApi
from reconciler.apply.controller import DeploymentRestarter
from reconciler.apply.executor import apply_plan
from reconciler.apply.live_reader import read_live, server_views
from reconciler.apply.target import ApplyError, ApplyOptions, Target
from reconciler.cli.compile import load, print_warnings, repo_args
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.profile import Profile
from reconciler.config.files import read_shipped_policies
from reconciler.config.repo import Config
from reconciler.errors import ReconcilerError
from reconciler.plan.diff import plan_changes
from reconciler.plan.jsonout import plan_from_dict, plan_to_dict, render_json
from reconciler.plan.live import LiveState
from reconciler.plan.model import Plan
from reconciler.plan.text import render_text
from reconciler.policy.engine import CompiledPolicy, compile_policies, effective_policies
from reconciler.policy.loader import policies_for, shipped_documents
from reconciler.policy.subjects import evaluate_state, params_of
from reconciler.scheduler.pod_policies import PodPolicies

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    plan_cmd = sub.add_parser("plan", help="show exactly what apply would change")
    repo_args(plan_cmd)
    plan_cmd.add_argument(
        "--offline", action="store_true", help="compare with an empty cluster (no connections)"
    )
    target_args(plan_cmd)
    plan_cmd.add_argument("-o", "--output", choices=("text", "json"), default="text")
    plan_cmd.add_argument("--color", action="store_true", help="color even when not on a TTY")
    plan_cmd.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help="exit 2 when there are changes, 0 when there are none (as terraform does)",
    )
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


def target_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("where (a local stack, or a cluster)")
    group.add_argument("--local", action="store_true", help="the stack of `reconciler local up`")
    group.add_argument("--name", default="default", help="local stack name (default: default)")
    group.add_argument("--runtime-dir", type=Path, help="local stack runtime directory")
    group.add_argument(
        "--kubeconfig", type=Path,
        help="default: $KUBECONFIG, ~/.kube/config, else the Pod's service account",
    )  # fmt: skip
    group.add_argument(
        "--slurm-url",
        help="slurmrestd base URL, e.g. http://slurm-rest:6820 (with --local: instead of the "
        "stack's own)",
    )
    group.add_argument("--slurm-user", default="root", help="Slurm user of the JWT (root)")
    group.add_argument("--slurm-jwt-key", type=Path, help="HS256 key to mint tokens with")
    group.add_argument(
        "--slurm-token-file", type=Path, help="a JWT to use (default: $SLURM_JWT if set)"
    )
    group.add_argument("--slurm-conf", type=Path, help="slurm.conf for scontrol (SLURM_CONF)")


# ---- targets ----------------------------------------------------------------------------


def resolve_target(
    args: argparse.Namespace, namespace: str, nodes: Sequence[str] = (), release: str = ""
) -> tuple[Target, Profile]:
    """Where to plan and apply, and the profile to compile for; `nodes` are the Slurm nodes
    the config declares (the local stack gives new ones a port of their own); with `release`,
    a controller Deployment of that release is what apply restarts when NodeName lines
    change (a slurmctld outside Kubernetes is never restarted)."""
    if args.local or args.runtime_dir:
        from reconciler.local.stack import default_runtime_dir
        from reconciler.local.target import local_profile_of, local_target, open_stack

        stack = open_stack(args.runtime_dir or default_runtime_dir(args.name))
        target = local_target(
            stack, namespace, release, kubeconfig=getattr(args, "kubeconfig", None),
            slurm_url=getattr(args, "slurm_url", None),
        )  # fmt: skip
        return target, local_profile_of(stack, nodes)
    if not args.slurm_url:
        raise ReconcilerError(
            "plan needs a cluster: --local for the local stack, or --slurm-url (with "
            "--kubeconfig) for a cluster",
            hint="or `--offline` to plan against an empty cluster",
        )
    tokens = tokens_from_args(args)
    env = {"SLURM_CONF": str(args.slurm_conf)} if args.slurm_conf else {}
    kube = Kube.from_kubeconfig(kubeconfig_of(args))
    slurm = connect_lazily(args.slurm_url, tokens)
    target = Target(
        kube=kube,
        slurm=slurm,
        restarter=DeploymentRestarter.if_ours(kube, namespace, release, answers(slurm))
        if release
        else None,
        scontrol=Scontrol(tokens, env=env),
        namespace=namespace,
        # slurmConfig.accounting is read and applied with sacctmgr, given the cluster's
        # slurm.conf (without one, sacctmgr searches for a config for a minute before failing).
        sacctmgr=Sacctmgr(env=env, tokens=tokens) if args.slurm_conf else None,
    )
    return target, Profile()


def answers(slurm: SlurmRestApi) -> Callable[[], bool]:
    """slurmctld answers a ping through slurmrestd."""

    def ping() -> bool:
        try:
            slurm.ping()
        except ReconcilerError:
            return False
        return True

    return ping


def kubeconfig_of(args: argparse.Namespace) -> Path | None:
    """--kubeconfig if given (with --local too: the local stack's Slurm under another
    identity); else the local stack's with --local/--runtime-dir; else $KUBECONFIG, then
    ~/.kube/config; None in a Pod that has neither (its service account)."""
    if getattr(args, "kubeconfig", None):  # a Namespace built in code may not carry it
        return Path(args.kubeconfig)
    if args.local or args.runtime_dir:
        from reconciler.local.stack import default_runtime_dir
        from reconciler.local.target import open_stack

        stack = open_stack(args.runtime_dir or default_runtime_dir(args.name))
        return stack.kube_paths.kubeconfig
    if os.environ.get("KUBECONFIG"):
        return Path(os.environ["KUBECONFIG"])
    home = Path.home() / ".kube/config"
    return None if os.environ.get(wk.ENV_IN_CLUSTER) and not home.exists() else home


def tokens_from_args(args: argparse.Namespace) -> TokenSource:
    if args.slurm_jwt_key:
        return MintedTokens(args.slurm_jwt_key, args.slurm_user)
    if args.slurm_token_file:
        return ProvidedToken.from_file(args.slurm_token_file, user=args.slurm_user)
    if os.environ.get("SLURM_JWT"):
        return ProvidedToken.from_env("SLURM_JWT", user=args.slurm_user)
    raise ReconcilerError(
        "no Slurm credentials", hint="pass --slurm-jwt-key, --slurm-token-file, or set SLURM_JWT"
    )


def live_plan(args: argparse.Namespace) -> tuple[Plan, Target, DesiredState]:
    return plan_config(load(args), args)


def passes(
    config: Config, args: argparse.Namespace, policies: tuple[CompiledPolicy, ...] | None = None
) -> Iterator[tuple[Plan, Target]]:
    """The plans that bring the cluster to `config`, each made after the caller applied the
    one before: one plan; or, when it was a bootstrap plan (our control plane was down, and
    applying it brought it up), a second one for what needed Slurm."""
    for _ in range(2):
        plan, target, _ = plan_config(config, args, policies)
        yield plan, target
        if not (plan.bootstrap and plan.has_changes):
            return


def plan_config(
    config: Config,
    args: argparse.Namespace,
    policies: tuple[CompiledPolicy, ...] | None = None,
) -> tuple[Plan, Target, DesiredState]:
    """The plan for a loaded config against the target the args name (CLI and daemon);
    `policies` already compiled for this revision, else compiled here."""
    shape = compile_desired_state(config)  # the declared nodes do not depend on the profile
    declared = [n.name for n in (*shape.slurm_nodes, *shape.spare_nodes)]
    target, profile = resolve_target(
        args, config.settings.namespace, declared, config.settings.release
    )
    state = compile_desired_state(config, profile)
    print_warnings(state.warnings)
    live = read_live(target.kube, target.slurm, state.release, state.namespace, target.sacctmgr,
                     secret_names=[s.name for s in state.secrets])  # fmt: skip
    plan = with_policies(plan_against(state, live, target), config, state, policies)
    return plan, target, state


def with_policies(
    plan: Plan,
    config: Config,
    state: DesiredState,
    policies: tuple[CompiledPolicy, ...] | None = None,
) -> Plan:
    """The plan with the findings of the revision's policies: Deny ones stop it from being
    applied, Warn ones are shown, Audit ones are logged."""
    if policies is None:
        policies = revision_policies(config)
    findings = evaluate_state(policies, config, state, params_of(config))
    for finding in findings:
        if "Audit" in finding.actions:
            log.info("policy audit: %s", finding)
    return replace(
        plan,
        warnings=(*plan.warnings, *(str(f) for f in findings if f.warns)),
        denials=tuple(str(f) for f in findings if f.denies),
    )


def plan_against(state: DesiredState, live: LiveState, target: Target) -> Plan:
    has_namespace = target.kube.get("v1", "Namespace", state.namespace) is not None
    # Without the namespace a dry-run cannot run; the objects are all new then anyway.
    views = server_views(target.kube, state, live) if has_namespace else {}
    return plan_changes(state, live, server_view=views)


def revision_policies(config: Config) -> tuple[CompiledPolicy, ...]:
    """Shipped policies and the repo's, compiled (the shipped files are read here)."""
    return policies_for(config, read_shipped_policies())


def shipped_policies() -> tuple[CompiledPolicy, ...]:
    """The shipped policies alone, compiled (no repo, or a repo whose own do not compile)."""
    return compile_policies(effective_policies(shipped_documents(read_shipped_policies()), ()))


def startup_pod_policies(config: Config) -> PodPolicies:
    """The pod policies to start the scheduler with, before any revision is converged. If
    the repo's own do not compile, the shipped ones (the converger records the error)."""
    try:
        policies = revision_policies(config)
    except ReconcilerError as error:
        log.warning("policies of the first revision: %s; starting with the shipped ones", error)
        policies = shipped_policies()
    pods = tuple(p for p in policies if p.policy.target == "pod")
    return PodPolicies(pods, params_of(config))


# ---- commands ---------------------------------------------------------------------------


def run_plan(args: argparse.Namespace) -> int:
    if args.offline:
        config = load(args)
        state = compile_desired_state(config)
        print_warnings(state.warnings)
        plan = with_policies(plan_changes(state, None, offline=True), config, state)
    else:
        plan, _, _ = live_plan(args)
    if args.out:
        args.out.write_text(json.dumps(plan_to_dict(plan), indent=2) + "\n")
        print(f"plan saved to {args.out}", file=sys.stderr)
    _show(plan, args)
    if plan.denials:
        return 1
    return 2 if args.detailed_exitcode and plan.has_changes else 0


def _show(plan: Plan, args: argparse.Namespace) -> None:
    if getattr(args, "output", "text") == "json":
        sys.stdout.write(render_json(plan))
        return
    color = getattr(args, "color", False) or (sys.stdout.isatty() and "NO_COLOR" not in os.environ)
    sys.stdout.write(render_text(plan, color=color))


def run_apply(args: argparse.Namespace) -> int:
    options = ApplyOptions(
        drain_timeout=args.drain_timeout,
        on_drain_timeout=args.on_drain_timeout,
        register_timeout=args.register_timeout,
    )
    if args.plan_file:
        plan = plan_from_dict(json.loads(args.plan_file.read_text()))
        config = load(args)
        target, _ = resolve_target(args, config.settings.namespace, release=config.settings.release)
        _apply_one(plan, target, options, args)
        return 0
    for plan, target in passes(load(args), args):
        _show(plan, args)
        if not _apply_one(plan, target, options, args):
            break
    return 0


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
