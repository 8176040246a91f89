"""Command-line entry points. Thin: parse flags, call the pure core or an adapter, print."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from reconciler.errors import ReconcilerError
from reconciler.logs import configure_logging
from reconciler.settings import layered_defaults


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reconciler",
        description="Slurm on Kubernetes, driven by git (SUNK-compatible).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from reconciler import (
        commands_apply,
        commands_compile,
        commands_policy,
        commands_run,
        commands_schedule,
    )

    commands_compile.register(sub)
    commands_apply.register(sub)
    commands_schedule.register(sub)
    commands_run.register(sub)
    commands_policy.register(sub)
    _register_optional(sub, "reconciler.local.commands")
    return parser


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _register_optional(sub: argparse._SubParsersAction, module: str) -> None:
    """Let a package area add its own subcommands through `register(subparsers)`."""
    import importlib

    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return
    mod.register(sub)


# Long-running commands take settings from the environment and a config file too.
LAYERED_COMMANDS = ("run",)
DAEMON_COMMANDS = ("run", "schedule")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    daemon = bool(argv) and argv[0] in DAEMON_COMMANDS
    level = logging.INFO if daemon or os.environ.get("RECONCILER_DEBUG") else logging.WARNING
    configure_logging("text", level)
    parser = build_parser()
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
        return 1
    except KeyboardInterrupt:
        return 130
