"""Command-line entry points: the parser, built from each command group's `register`, and
the dispatch. Thin: parse flags, call the pure core or an adapter, print."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from importlib import metadata

from reconciler.cli.settings import layered_defaults
from reconciler.errors import ReconcilerError
from reconciler.logs import configure_logging

# The distribution's name (pyproject.toml's project.name): `reconciler` on PyPI is another
# project's. The command and the import package stay `reconciler`.
DISTRIBUTION = "sunk-reconciler"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reconciler",
        description="Slurm on Kubernetes, driven by git (SUNK-compatible).",
    )
    parser.add_argument(
        "--version", action="version", version=f"reconciler {metadata.version(DISTRIBUTION)}"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Here, not at the top: the group modules import each other through this package, which
    # must have finished loading first (and `import reconciler.cli` stays cheap).
    from reconciler.cli import apply, compile, local, policy, rbac, run, schedule, status

    compile.register(sub)
    rbac.register(sub)
    apply.register(sub)
    schedule.register(sub)
    run.register(sub)
    status.register(sub)
    policy.register(sub)
    local.register(sub)
    return parser


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


# Long-running commands take settings from the environment and a config file too.
LAYERED_COMMANDS = ("run",)
DAEMON_COMMANDS = ("run", "schedule")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    daemon = bool(argv) and argv[0] in DAEMON_COMMANDS
    # RECONCILER_DEBUG: everything, DEBUG included (a repeated outcome, library lines).
    debug = bool(os.environ.get("RECONCILER_DEBUG"))
    level = logging.DEBUG if debug else logging.INFO if daemon else logging.WARNING
    configure_logging("text", level)
    parser = build_parser()
    args: argparse.Namespace | None = None
    try:
        if argv and argv[0] in LAYERED_COMMANDS:
            command = _subcommand(parser, argv[0])
            command.set_defaults(**layered_defaults(command, argv))
        args = parser.parse_args(argv)
        configure_logging(getattr(args, "log_format", "text"), level)
        return int(args.func(args) or 0)
    except ReconcilerError as exc:
        if daemon:  # a collector reading JSON lines sees why the daemon stopped
            logging.getLogger("reconciler").error("error: %s", exc)
        else:
            print(f"error: {exc}", file=sys.stderr)
        # `plan --diff-exitcode` (argocd's convention): 1 means changes, so errors are 2.
        return 2 if getattr(args, "diff_exitcode", False) else 1
    except KeyboardInterrupt:
        return 130
