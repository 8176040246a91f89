"""`reconciler render-rbac REPO`: the scheduler's Roles for the repo's `scheduler.scope`, as
YAML for `kubectl apply -f -` (or a file an overlay of deploy/base lists)."""

from __future__ import annotations

import argparse
import sys

from reconciler.cli.compile import load, repo_args
from reconciler.compile.yamlout import dump_stream
from reconciler.errors import ConfigTypeError
from reconciler.logs import print_warnings
from reconciler.scheduler.rbac import scheduler_rbac
from reconciler.scheduler.settings import settings_from_values

SERVICE_ACCOUNT = "reconciler"  # deploy/base's


def register(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser(
        "render-rbac",
        help="print the scheduler's Roles for the namespaces scheduler.scope names",
        description="Print the RBAC the daemon's scheduler needs beyond deploy/base, from the "
        "repo's scheduler.scope: a Role and RoleBinding per other namespace listed (type "
        "namespace), or one ClusterRole (type cluster). Apply it with your own rights: "
        "`reconciler render-rbac REPO | kubectl apply -f -`, again when the scope changes.",
    )
    repo_args(cmd)
    cmd.add_argument(
        "--service-account", metavar="NAMESPACE/NAME",
        help=f"the daemon's ServiceAccount (default: <namespace>/{SERVICE_ACCOUNT})",
    )  # fmt: skip
    cmd.set_defaults(func=run_render_rbac)


def run_render_rbac(args: argparse.Namespace) -> int:
    config = load(args)
    print_warnings(config.warnings)
    release, namespace = config.settings.release, config.settings.namespace
    account = (namespace, SERVICE_ACCOUNT)
    if args.service_account:
        found, _, name = args.service_account.partition("/")
        if not found or not name:
            raise ConfigTypeError(
                f"--service-account {args.service_account!r}: give it as NAMESPACE/NAME, "
                f"e.g. {namespace}/{SERVICE_ACCOUNT}"
            )
        account = (found, name)
    header = (f"# `reconciler render-rbac` for release {release} in namespace {namespace}: "
              "apply with kubectl, again when scheduler.scope changes.\n")  # fmt: skip
    if not config.view.scheduler_enabled:
        sys.stdout.write(header + "# scheduler.enabled is false: no RBAC needed.\n")
        return 0
    settings = settings_from_values(config.values, release=release, namespace=namespace)
    sys.stdout.write(header + dump_stream(scheduler_rbac(settings, account)))
    return 0
