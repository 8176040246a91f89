"""`reconciler status`: what the daemon last did, as its status ConfigMap records it."""

from __future__ import annotations

import argparse

from reconciler.adapters.kube import Kube
from reconciler.cli.where import kubeconfig_of, target_args
from reconciler.daemon.status import read_status, status_name
from reconciler.errors import ReconcilerError


def register(sub: argparse._SubParsersAction) -> None:
    status = sub.add_parser("status", help="what the daemon last did (its status ConfigMap)")
    status.add_argument("--release", default="slurm")
    status.add_argument("--namespace", default="slurm")
    target_args(status)
    status.set_defaults(func=run_status)


def run_status(args: argparse.Namespace) -> int:
    status = read_status(Kube.from_kubeconfig(kubeconfig_of(args)), args.namespace, args.release)
    if status is None:
        raise ReconcilerError(
            f"no status ConfigMap {args.namespace}/{status_name(args.release)}",
            hint="`reconciler run` writes it after its first revision",
        )
    for key, value in status.as_data().items():
        print(f"{key + ':':<18} {value}")
    return 0
