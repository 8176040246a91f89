"""The where-flags of plan, apply, run, schedule and status (`--local`, or `--kubeconfig` with
`--slurm-url` and Slurm credentials), turned into the typed target the pipeline plans and
applies through: its clients, connected once (nothing below the command layer sees flags)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.sacctmgr import Sacctmgr
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.client import connect_lazily
from reconciler.adapters.slurm.jwt import MintedTokens, ProvidedToken, TokenSource
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.apply.upgrade_effects import FileBackup
from reconciler.errors import ReconcilerError
from reconciler.local.slurm.site import DB_NAME, current_user
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import default_runtime_dir
from reconciler.local.target_parts import FileSink, client_env, local_profile_of, open_stack
from reconciler.pipeline.clients import Clients


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


def is_local(args: argparse.Namespace) -> bool:
    return bool(args.local or args.runtime_dir)


def local_stack(args: argparse.Namespace) -> LocalStack:
    """The running local stack the flags name."""
    return open_stack(args.runtime_dir or default_runtime_dir(args.name))


def connect(args: argparse.Namespace) -> Clients:
    """The clients of the cluster the flags name; each call connects anew (a reader that
    must not queue behind another's requests calls it for clients of its own)."""
    if is_local(args):
        return local_clients(
            local_stack(args), kubeconfig=getattr(args, "kubeconfig", None),
            slurm_url=getattr(args, "slurm_url", None),
        )  # fmt: skip
    if not args.slurm_url:
        raise ReconcilerError(
            "plan needs a cluster: --local for the local stack, or --slurm-url (with "
            "--kubeconfig) for a cluster",
            hint="or `--offline` to plan against an empty cluster",
        )
    tokens = tokens_from_args(args)
    env = {"SLURM_CONF": str(args.slurm_conf)} if args.slurm_conf else {}
    slurm = connect_lazily(args.slurm_url, tokens)
    return Clients(
        kube=Kube.from_kubeconfig(kubeconfig_of(args)),
        slurm=slurm,
        scontrol=Scontrol(tokens, env=env),
        answers=lambda: _answers(slurm),
        # slurmConfig.accounting is read and applied with sacctmgr, given the cluster's
        # slurm.conf (without one, sacctmgr searches for a config for a minute before failing).
        sacctmgr=Sacctmgr(env=env, tokens=tokens) if args.slurm_conf else None,
    )


def local_clients(
    stack: LocalStack, *, kubeconfig: Path | None = None, slurm_url: str | None = None
) -> Clients:
    """The local stack; `kubeconfig` talks to its API server as someone other than admin,
    `slurm_url` to its slurmrestd through something in between (a test's fault proxy).
    slurmctld runs as the controller Pod of the release: apply restarts it as on any
    cluster, by rolling that Deployment."""
    slurm = stack.slurm
    assert slurm is not None
    tokens = MintedTokens(slurm.paths.jwt_key, current_user())
    accounting = slurm.accounting or slurm.supervisor.running("slurmdbd") is not None
    kube = Kube.from_kubeconfig(kubeconfig or stack.kube_paths.kubeconfig)
    env = client_env(stack, kube)
    return Clients(
        kube=kube,
        slurm=connect_lazily(slurm_url or slurm.rest_url(), tokens),
        scontrol=Scontrol(tokens, env=env),
        answers=slurm.controller_up,
        sink=FileSink(slurm.paths.slurm_conf, slurm.paths.gres_conf, slurm.paths.etc),
        sacctmgr=Sacctmgr(env=env, cluster=stack.cluster_name) if accounting else None,
        slurm_release=slurm.install.release,
        backup=FileBackup(
            slurm.paths.state,
            stack.runtime_dir / "upgrade-backups",
            _dump(slurm.paths.mariadb_socket) if accounting else (),
        ),
        # Read again at each plan: `local up` may have written the stack's record since.
        profile_of=lambda declared: local_profile_of(
            LocalStack.open(stack.runtime_dir), declared()
        ),
    )


def _dump(socket: Path) -> tuple[str, ...]:
    """The local stack's accounting database, dumped as its MariaDB's root (local only)."""
    return ("mariadb-dump", "--no-defaults", "-S", str(socket), "-uroot",
            "--single-transaction", "--databases", DB_NAME)  # fmt: skip


def _answers(slurm: SlurmRestApi) -> bool:
    """slurmctld answers a ping through slurmrestd."""
    try:
        slurm.ping()
    except ReconcilerError:
        return False
    return True


def kubeconfig_of(args: argparse.Namespace) -> Path | None:
    """--kubeconfig if given (with --local too: the local stack's Slurm under another
    identity); else the local stack's with --local/--runtime-dir; else $KUBECONFIG, then
    ~/.kube/config; None in a Pod that has neither (its service account)."""
    if getattr(args, "kubeconfig", None):  # a Namespace built in code may not carry it
        return Path(args.kubeconfig)
    if is_local(args):
        return local_stack(args).kube_paths.kubeconfig
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
