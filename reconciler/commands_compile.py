"""`reconciler compile | render | plan --offline`: the pure pipeline behind thin commands."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from typing import Any

from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.explain import explain
from reconciler.compile.nodesets import compose_all
from reconciler.compile.yamlout import dump, dump_stream
from reconciler.config.files import read_library, read_repo
from reconciler.config.layering import plain
from reconciler.config.repo import Config, RepoSettings, load_config
from reconciler.errors import ReconcilerError
from reconciler.plan.diff import plan_changes
from reconciler.plan.jsonout import render_json
from reconciler.plan.text import render_text


def register(sub: argparse._SubParsersAction) -> None:
    compile_cmd = sub.add_parser("compile", help="show composed node definitions")
    _repo_args(compile_cmd)
    compile_cmd.add_argument("--nodeset", metavar="NAME", help="only this compute.nodes entry")
    compile_cmd.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    compile_cmd.add_argument(
        "--explain", action="store_true", help="show which layer and line set every value"
    )
    compile_cmd.set_defaults(func=run_compile)

    render_cmd = sub.add_parser(
        "render", help="print every desired Kubernetes object as one YAML stream"
    )
    _repo_args(render_cmd)
    render_cmd.set_defaults(func=run_render)

    plan_cmd = sub.add_parser("plan", help="show what apply would change")
    _repo_args(plan_cmd)
    plan_cmd.add_argument(
        "--offline", action="store_true", help="compare with an empty cluster (no connections)"
    )
    plan_cmd.add_argument("-o", "--output", choices=("text", "json"), default="text")
    plan_cmd.add_argument("--color", action="store_true", help="color even when not on a TTY")
    plan_cmd.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help="exit 2 when there are changes, 0 when there are none (as terraform does)",
    )
    plan_cmd.set_defaults(func=run_plan)


def _repo_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", metavar="REPO", help="config repo directory (holds values.yaml)")
    parser.add_argument("--release", help="release name (default: reconciler.yaml, else 'slurm')")
    parser.add_argument("--namespace", help="namespace (default: reconciler.yaml, else 'slurm')")


def load(args: argparse.Namespace, *, track_origins: bool = False) -> Config:
    config = load_config(read_repo(args.repo), read_library(), track_origins=track_origins)
    if args.release or args.namespace:
        settings = RepoSettings(
            release=args.release or config.settings.release,
            namespace=args.namespace or config.settings.namespace,
        )
        config = load_config(
            read_repo(args.repo), read_library(), track_origins=track_origins, overrides=settings
        )
    return config


def _print_warnings(warnings: Iterable[object]) -> None:
    for warning in warnings:
        print(warning, file=sys.stderr)


def run_compile(args: argparse.Namespace) -> int:
    config = load(args, track_origins=args.explain)
    _print_warnings(config.warnings)
    nodesets = compose_all(config, only=args.nodeset)
    if args.explain:
        sys.stdout.write(explain(nodesets))
        return 0
    data: dict[str, Any] = {n.name: plain(n.definition) for n in nodesets}
    sys.stdout.write(json.dumps(data, indent=2) + "\n" if args.output == "json" else dump(data))
    return 0


def compile_repo(args: argparse.Namespace) -> DesiredState:
    state = compile_desired_state(load(args))
    _print_warnings(state.warnings)
    return state


def run_render(args: argparse.Namespace) -> int:
    state = compile_repo(args)
    sys.stdout.write(dump_stream(state.kube_objects))
    return 0


def run_plan(args: argparse.Namespace) -> int:
    if not args.offline:
        raise ReconcilerError(
            "a live plan needs a cluster connection, which this build does not have yet",
            hint="run `reconciler plan REPO --offline` to plan against an empty cluster",
        )
    plan = plan_changes(compile_repo(args), {}, offline=True)
    if args.output == "json":
        sys.stdout.write(render_json(plan))
    else:
        color = args.color or (sys.stdout.isatty() and "NO_COLOR" not in os.environ)
        sys.stdout.write(render_text(plan, color=color))
    return 2 if args.detailed_exitcode and plan.has_changes else 0
