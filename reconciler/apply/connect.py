"""The target that the where-flags of plan, apply, run and schedule name (`--local`, or
`--kubeconfig` with `--slurm-url` and Slurm credentials), with its adapters connected."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.sacctmgr import Sacctmgr
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.client import connect_lazily
from reconciler.adapters.slurm.jwt import MintedTokens, ProvidedToken, TokenSource
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.apply.controller import DeploymentRestarter
from reconciler.apply.target import Target
from reconciler.compile.profile import Profile
from reconciler.errors import ReconcilerError


def resolve_target(
    args: argparse.Namespace, namespace: str, nodes: Sequence[str] = (), release: str = ""
) -> tuple[Target, Profile]:
    """Where to plan and apply, and the profile to compile for; `nodes` are the Slurm nodes
    the config declares (the local stack gives new ones a port of their own); with `release`,
    a controller Deployment of that release is what apply restarts when NodeName lines
    change (a slurmctld outside Kubernetes is never restarted)."""
    if args.local or args.runtime_dir:
        from reconciler.apply.local_target import local_profile_of, local_target, open_stack
        from reconciler.local.stack_record import default_runtime_dir

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
        from reconciler.apply.local_target import open_stack
        from reconciler.local.stack_record import default_runtime_dir

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
