"""`reconciler local up | down | status`: the embedded local stack as a user runs it.

`up` stays in the foreground: it is the parent of every daemon (PID 1 here does not reap, so
daemons must have a living parent) and it runs the node agent. Ctrl-C, SIGTERM, or
`reconciler local down` from another shell brings everything down.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from reconciler.adapters.kube import Kube
from reconciler.apply.secrets import generate
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.manifests import slurm_conf_map_name
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import load_config
from reconciler.errors import LocalStackError
from reconciler.local.kubelet_model import NodeTemplate, node_templates, required_labels
from reconciler.local.nodeagent import NodeAgent
from reconciler.local.slurm import SlurmSite, make_fake_gpus
from reconciler.local.slurm_install import DEFAULT_RELEASE, RELEASE_ENV, RELEASES
from reconciler.local.stack import LocalStack, default_runtime_dir
from reconciler.local.target import RESTART_SIGNAL, site_profile

DEFAULT_REPO = Path("fixtures/config-repo")
READY_TIMEOUT_SECONDS = 120.0


def register(sub: argparse._SubParsersAction) -> None:
    local = sub.add_parser(
        "local", help="the embedded local stack: real Slurm and Kubernetes on loopback"
    )
    commands = local.add_subparsers(dest="local_command", required=True, metavar="COMMAND")

    up = commands.add_parser("up", help="start the stack in the foreground (Ctrl-C stops it)")
    up.add_argument("repo", nargs="?", type=Path, help=f"config repo (default: ./{DEFAULT_REPO})")
    up.add_argument(
        "--nodes", type=int, help="local Kubernetes Nodes (default: one per Slurm node)"
    )
    up.add_argument("--accounting", action="store_true", help="also run MariaDB and slurmdbd")
    up.add_argument(
        "--slurm", choices=RELEASES, default=None,
        help=f"Slurm release: {DEFAULT_RELEASE} (built by setup.sh; the default) or Debian's "
        f"22.05 (default: ${RELEASE_ENV}, else {DEFAULT_RELEASE})",
    )  # fmt: skip
    _runtime_args(up)
    up.set_defaults(func=run_up)

    down = commands.add_parser("down", help="stop every process of the stack")
    _runtime_args(down)
    down.add_argument("--purge", action="store_true", help="also delete the runtime directory")
    down.set_defaults(func=run_down)

    status = commands.add_parser("status", help="each component, its PID, port and health")
    _runtime_args(status)
    status.add_argument("-o", "--output", choices=("text", "json"), default="text")
    status.set_defaults(func=run_status)


def _runtime_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default="default", help="stack name (default: default)")
    parser.add_argument(
        "--runtime-dir", type=Path, help="runtime directory (default: /tmp/sunk-reconciler/NAME)"
    )


def runtime_dir(args: argparse.Namespace) -> Path:
    return args.runtime_dir or default_runtime_dir(args.name)


# ---- up ---------------------------------------------------------------------------------


def run_up(args: argparse.Namespace) -> int:
    repo = args.repo or DEFAULT_REPO
    config = load_config(read_repo(repo), read_library())
    probe = compile_desired_state(config)  # node names and shapes do not depend on the profile
    stack = LocalStack(runtime_dir(args), cluster_name=config.settings.release)
    compiled: dict[str, DesiredState] = {}
    started = time.monotonic()
    _progress(f"local stack in {stack.runtime_dir}")

    def render(site: SlurmSite) -> tuple[str, str]:
        compiled["state"] = compile_desired_state(config, site_profile(site))
        make_fake_gpus(site.paths, _max_gpus(probe))
        return compiled["state"].slurm_conf, compiled["state"].gres_conf

    nodes = [n.name for n in (*probe.slurm_nodes, *probe.spare_nodes)]  # spares need ports too
    timings = stack.up(
        nodes, render, start_nodes=[], accounting=args.accounting, release=args.slurm
    )
    _progress(f"daemons ready in {time.monotonic() - started:.1f} s ({_timing_text(timings)})")
    stack.record_foreground_pid(os.getpid())
    agent = None
    try:
        kube = Kube.from_kubeconfig(stack.kube_paths.kubeconfig)
        apply_compiled(kube, compiled["state"])
        slurm = stack.slurm
        assert slurm is not None
        agent = NodeAgent(
            kube, slurm, _templates(probe, args.nodes), slurm.paths.etc,
            controller_config=(probe.namespace, slurm_conf_map_name(probe.release)),
        )  # fmt: skip
        agent.start()
        wait_ready(stack, kube, probe, timeout=READY_TIMEOUT_SECONDS)
        _progress(f"ready in {time.monotonic() - started:.1f} s")
        _print_ready(stack, probe)
        _wait_for_stop(stack)
    finally:
        if agent is not None:
            agent.stop(grace=5)
        stack.down()
        _progress("local stack stopped")
    return 0


def apply_compiled(kube: Kube, state: DesiredState) -> None:
    """Bootstrap: create the namespace, the generated Secrets and every compiled object."""
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": state.namespace}})
    for secret in state.secrets:
        kube.create(generate(secret))  # None: it exists, and is kept
    for obj in state.kube_objects:
        kube.apply(obj, force=True)


def wait_ready(stack: LocalStack, kube: Kube, probe: DesiredState, *, timeout: float) -> None:
    """Every slurmd Pod Running and every Slurm node registered, or a clear error."""
    slurm = stack.slurm
    assert slurm is not None
    wanted = [n.name for n in probe.slurm_nodes]
    deadline = time.monotonic() + timeout
    missing: list[str] = wanted
    while time.monotonic() < deadline:
        running = _running_pods(kube, probe.namespace)
        missing = [n for n in wanted if n not in running or not slurm.node_registered(n)]
        if not missing:
            return
        time.sleep(0.2)
    raise LocalStackError(
        f"not ready after {timeout:.0f} s: {', '.join(missing)} not Running and registered",
        hint=f"see the logs in {stack.runtime_dir}/logs and {slurm.paths.log}",
    )


def _running_pods(kube: Kube, namespace: str) -> set[str]:
    pods = kube.list("v1", "Pod", namespace).items
    return {
        p["metadata"]["name"] for p in pods if (p.get("status") or {}).get("phase") == "Running"
    }


def _templates(probe: DesiredState, count: int | None) -> list[NodeTemplate]:
    """One Node per Slurm node by default, labelled so its definition's affinity fits it."""
    by_name = {n.name: n.definition for n in probe.nodesets if n.enabled}
    label_sets, gpus = [], []
    for node in probe.slurm_nodes:
        label_sets.append(required_labels(by_name[node.nodeset].get("affinity")))
        gpus.append(node.gpus)
    return node_templates(count or max(len(probe.slurm_nodes), 1), label_sets, gpus)


def _max_gpus(state: DesiredState) -> int:
    return max((n.gpus for n in (*state.slurm_nodes, *state.spare_nodes)), default=0)


def _wait_for_stop(stack: LocalStack) -> None:
    """Until Ctrl-C, SIGTERM, or someone else stops the daemons; reaps them as they exit.

    SIGHUP restarts slurmctld (apply asks for it when NodeName lines change: this process is
    its parent). The caller stops the node agent before the daemons, so its watches never
    see the API server vanish under them.
    """
    stop, restart = threading.Event(), threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    signal.signal(RESTART_SIGNAL, lambda *_: restart.set())
    while not stop.wait(0.5):
        stack.supervisor.reap_exited()
        if restart.is_set():
            restart.clear()
            _restart_slurmctld(stack)
        if not stack.supervisor.children():
            return


def _restart_slurmctld(stack: LocalStack) -> None:
    slurm = stack.slurm
    assert slurm is not None
    try:
        seconds = slurm.restart_slurmctld()
        _progress(f"slurmctld restarted in {seconds:.1f} s")
    except LocalStackError as exc:
        _progress(f"slurmctld restart failed: {exc}")


def _print_ready(stack: LocalStack, probe: DesiredState) -> None:
    slurm = stack.slurm
    assert slurm is not None
    print(f"export KUBECONFIG={stack.kube_paths.kubeconfig}")
    print(f"export SLURM_CONF={slurm.paths.slurm_conf}")
    if slurm.install.bin_dir is not None:  # its sinfo/scontrol, not an older one on PATH
        print(f"export PATH={slurm.install.bin_dir}:$PATH")
    print(f"# Slurm {slurm.version()}, slurmrestd {slurm.rest_url()} ({slurm.rest_api_version()})")
    print(f"# nodes: {', '.join(n.name for n in probe.slurm_nodes)}")
    print("# Ctrl-C here, or `reconciler local down` elsewhere, stops the stack.", flush=True)


def _timing_text(timings: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{part} {t.get('total', 0):.1f} s" for part, t in timings.items())


def _progress(text: str) -> None:
    print(f"local: {text}", file=sys.stderr, flush=True)


# ---- down and status --------------------------------------------------------------------


def run_down(args: argparse.Namespace) -> int:
    stack = LocalStack.open(runtime_dir(args))
    stopped = stack.stop_foreground() + stack.down(purge=args.purge)
    print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
    return 0


def run_status(args: argparse.Namespace) -> int:
    stack = LocalStack.open(runtime_dir(args))
    components = stack.status()
    if args.output == "json":
        print(json.dumps([c.to_json() for c in components], indent=2))
    else:
        print(f"{'COMPONENT':<28} {'PID':>8} {'PORT':>6}  STATE")
        for c in components:
            state = "healthy" if c.healthy else ("running, unhealthy" if c.running else "stopped")
            print(f"{c.name:<28} {c.pid or '-':>8} {c.port or '-':>6}  {state}")
    healthy = components and all(c.healthy for c in components if c.running)
    return 0 if healthy else 1
