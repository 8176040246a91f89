"""`reconciler compile | render`: the pure pipeline behind thin commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.explain import explain
from reconciler.compile.nodesets import compose_all
from reconciler.compile.yamlout import dump, dump_stream
from reconciler.config.files import read_library, read_repo
from reconciler.config.layering import plain
from reconciler.config.repo import Config, load_config
from reconciler.logs import print_warnings


def register(sub: argparse._SubParsersAction) -> None:
    compile_cmd = sub.add_parser("compile", help="show composed node definitions")
    repo_args(compile_cmd)
    compile_cmd.add_argument("--nodeset", metavar="NAME", help="only this compute.nodes entry")
    compile_cmd.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    compile_cmd.add_argument(
        "--explain", action="store_true", help="show which layer and line set every value"
    )
    compile_cmd.set_defaults(func=run_compile)

    render_cmd = sub.add_parser(
        "render", help="print every desired Kubernetes object as one YAML stream"
    )
    repo_args(render_cmd)
    render_cmd.set_defaults(func=run_render)


def repo_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", metavar="REPO", help="config repo directory (holds values.yaml)")
    parser.add_argument("--release", help="release name (default: reconciler.yaml, else 'slurm')")
    parser.add_argument("--namespace", help="namespace (default: reconciler.yaml, else 'slurm')")


def load(args: argparse.Namespace, *, track_origins: bool = False) -> Config:
    return load_config(
        read_repo(args.repo),
        read_library(),
        track_origins=track_origins,
        release=args.release,
        namespace=args.namespace,
    )


def run_compile(args: argparse.Namespace) -> int:
    config = load(args, track_origins=args.explain)
    print_warnings(config.warnings)
    nodesets = compose_all(config, only=args.nodeset)
    if args.explain:
        sys.stdout.write(explain(nodesets))
        return 0
    data: dict[str, Any] = {n.name: plain(n.definition) for n in nodesets}
    sys.stdout.write(json.dumps(data, indent=2) + "\n" if args.output == "json" else dump(data))
    return 0


def compile_repo(args: argparse.Namespace) -> DesiredState:
    state = compile_desired_state(load(args))
    print_warnings(state.warnings)
    return state


def run_render(args: argparse.Namespace) -> int:
    state = compile_repo(args)
    # Generated Secrets show as metadata: their data exists only in the cluster.
    secrets = [*(s.manifest() for s in state.secrets), *(s.manifest() for s in state.value_secrets)]
    sys.stdout.write(dump_stream([*state.kube_objects, *secrets]))
    return 0
