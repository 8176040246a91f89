"""`reconciler local up | down | status`: the embedded local stack as a user runs it.

`up` stays in the foreground: it is the parent of every daemon (PID 1 here does not reap, so
daemons must have a living parent) and it runs the node agent. Ctrl-C, SIGTERM, or
`reconciler local down` from another shell brings everything down.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.adapters.kube import Kube
from reconciler.apply.executor import apply_plan
from reconciler.apply.target import ApplyOptions
from reconciler.cli.local_kubelet import run_up_kubelet
from reconciler.cli.local_parts import (
    DEFAULT_REPO,
    interrupt,
    progress,
    templates,
    unready_workloads,
    wait_for_stop,
)
from reconciler.cli.local_scheduler import start_local_scheduler
from reconciler.cli.where import local_clients
from reconciler.compile.desired import DesiredState, compile_shape
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import Config, load_config
from reconciler.errors import LocalStackError
from reconciler.local.agent.logs_server import KubeletServer
from reconciler.local.agent.node_agent import NodeAgent
from reconciler.local.agent.placement import NodeTemplate
from reconciler.local.agent.pod_runtime import LocalPodRuntime, host_layout
from reconciler.local.agent.schedulers import scheduler_needed
from reconciler.local.agent.volumes import Materializer
from reconciler.local.directory import (
    SECRET_KEY,
    SECRET_NAME,
    TLS_SECRET_NAME,
    LocalDirectory,
)
from reconciler.local.slurm.cluster import make_fake_gpus
from reconciler.local.slurm.install import DEFAULT_RELEASE, PREFIX_ENV, RELEASE_ENV, RELEASES
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import default_runtime_dir
from reconciler.local.target_parts import open_stack, site_profile
from reconciler.pipeline.plans import plan_passes
from reconciler.scheduler.loop import PodScheduler

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
    slurm = up.add_mutually_exclusive_group()
    slurm.add_argument(
        "--slurm", choices=RELEASES, default=None,
        help=f"Slurm release: {DEFAULT_RELEASE} (built by setup.sh; the default) or Debian's "
        f"22.05 (default: ${PREFIX_ENV}'s install, else ${RELEASE_ENV}, else {DEFAULT_RELEASE})",
    )  # fmt: skip
    slurm.add_argument(
        "--slurm-prefix", type=Path, default=None, metavar="DIR",
        help="run the Slurm installed at DIR (its configure --prefix; 23.11 to 26.05, the "
        "release its sbin/slurmctld -V says), e.g. one built by hand (docs/local-stack.md)",
    )  # fmt: skip
    up.add_argument(
        "--directory", action="store_true",
        help="also run an LDAP server (slapd) with users alice and bob, for directoryService; "
        "it prints the values and Secret that point the Pods at it",
    )  # fmt: skip
    up.add_argument(
        "--kubelet", action="store_true",
        help="real kubelets on containerd instead of the node agent (docs/local-stack.md); "
        "with REPO: our images loaded, the Secrets and claims it names made, REPO applied "
        "from this machine; without: Kubernetes only (--nodes, default 2)",
    )  # fmt: skip
    up.add_argument(
        "--in-cluster", action="store_true",
        help="with --kubelet: the reconciler runs as deploy/ installs it (deploy/local), "
        f"converging REPO (default: ./{DEFAULT_REPO}) from a git server in the stack",
    )  # fmt: skip
    up.add_argument(
        "--image-archive", action="append", type=Path, default=[], metavar="OCI_TAR",
        help="with --kubelet: an OCI archive (podman save --format oci-archive) to load into "
        "every Node's containerd; repeatable",
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
    """Kubernetes first, then the repo applied to it as to any cluster: the node agent runs
    every Pod of ours (controller, rest, accounting, mysql, login, slurmd) as its daemon."""
    if args.kubelet:
        return run_up_kubelet(args, runtime_dir(args))
    if args.in_cluster:
        raise LocalStackError("--in-cluster is for --kubelet (the reconciler runs in a Pod)")
    if args.image_archive:
        raise LocalStackError("--image-archive is for --kubelet (the node agent runs no images)")
    repo = args.repo or DEFAULT_REPO
    config = load_config(read_repo(repo), read_library())
    probe = compile_shape(config)  # node names and shapes do not depend on profile or release
    stack = LocalStack(runtime_dir(args), cluster_name=config.settings.release)
    started = time.monotonic()
    progress(f"local stack in {stack.runtime_dir}")
    nodes = [n.name for n in (*probe.slurm_nodes, *probe.spare_nodes)]  # spares need ports too
    # SIGTERM (`local down`, a test's teardown) stops the stack as Ctrl-C does, at any moment:
    # Python's default would exit at once and orphan every daemon started so far.
    signal.signal(signal.SIGTERM, interrupt)
    needed = scheduler_needed(probe.kube_objects)
    if needed is not None:  # said before the long wait, not only in a timeout's hint
        progress(f"the repo's slurmd Pods name scheduler {needed} (power saving): it runs here "
                  "once Slurm answers")  # fmt: skip
    agent, scheduler, ready = None, None, False
    try:
        site = stack.prepare_pods(nodes, release=args.slurm, prefix=args.slurm_prefix)
        progress(f"Kubernetes ready in {time.monotonic() - started:.1f} s; applying {repo}")
        make_fake_gpus(site.paths, _max_gpus(probe))
        stack.foreground.remember(os.getpid())
        kube = Kube.from_kubeconfig(stack.kube_paths.kubeconfig)
        if args.directory:
            _start_directory(stack, kube, config.settings.namespace)
        agent = start_node_agent(stack, kube, templates(probe, args.nodes))
        apply_repo(config, stack)
        if needed is not None:
            scheduler = start_local_scheduler(config, stack, needed)
        state = compile_shape(config, site_profile(site))
        wait_ready(stack, kube, state, timeout=READY_TIMEOUT_SECONDS)
        ready = True
        took = time.monotonic() - started
        # "ready in" last: who waits for it (scripts, tests) finds every line above printed
        _print_ready(stack, state, scheduler)
        progress(f"ready in {took:.1f} s")
        wait_for_stop(stack)
    except KeyboardInterrupt:
        if not ready:
            progress("interrupted before it was ready")
    finally:
        if scheduler is not None:  # before the agent and the daemons its watches read
            scheduler.stop()
        if agent is not None:
            agent.stop()
        stack.down()
        progress("local stack stopped")
    return 0 if ready else 130


def _start_directory(stack: LocalStack, kube: Kube, namespace: str) -> None:
    """slapd, and the Secrets its values name (the bind password's SSSD snippet, the LDAPS
    client certificate and CA), as an admin would `kubectl create secret` them."""
    directory = LocalDirectory(stack.runtime_dir / "directory", stack.supervisor)
    record = directory.start()
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for name, kind, data in (
        (SECRET_NAME, "Opaque", {SECRET_KEY: directory.secret_file.read_bytes()}),
        (TLS_SECRET_NAME, "kubernetes.io/tls", directory.tls_secret_data()),
    ):
        encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
        meta = {"name": name, "namespace": namespace}
        kube.create({"apiVersion": "v1", "kind": "Secret", "type": kind, "metadata": meta,
                     "data": encoded})  # fmt: skip
    progress(f"directory: slapd at {record.uri}; users alice and bob, keys in "
              f"{directory.keys}; to use it, copy {directory.values_file} into the repo's "
              "values.d/ and apply")  # fmt: skip


def start_node_agent(stack: LocalStack, kube: Kube, nodes: list[NodeTemplate]) -> NodeAgent:
    slurm = stack.slurm
    assert slurm is not None
    files = Materializer(host_layout(slurm.paths, stack.pods_dir), _reader(kube))
    runtime = LocalPodRuntime(slurm, files, _reader(kube))
    cert, key = stack.kube_paths.serving_cert()
    kubelet = KubeletServer(runtime.log_of, cert, key)
    agent = NodeAgent(kube, runtime, files, nodes, kubelet=kubelet)
    agent.start()
    return agent


def _reader(kube: Kube) -> Callable[[str, str, str], dict[str, Any] | None]:
    return lambda kind, namespace, name: kube.get("v1", kind, name, namespace)


def apply_repo(config: Config, stack: LocalStack) -> None:
    """`reconciler apply` of the repo to the new cluster, as to any: a bootstrap plan brings
    the control plane up (Slurm does not answer yet), then the rest is planned and applied."""
    for planned in plan_passes(config, local_clients(open_stack(stack.runtime_dir))):
        plan = planned.plan
        if not plan.has_changes:
            break
        progress(f"apply: {plan.summary().line()}" + (" (bootstrap)" if plan.bootstrap else ""))
        apply_plan(plan, planned.target, ApplyOptions(), lambda line: progress(f"apply: {line}"))


def wait_ready(stack: LocalStack, kube: Kube, state: DesiredState, *, timeout: float) -> None:
    """Every Deployment and StatefulSet of the repo with all replicas ready, and every Slurm
    node registered; or an error that names what is not."""
    slurm = stack.slurm
    assert slurm is not None
    deadline = time.monotonic() + timeout
    missing: list[str] = []
    while time.monotonic() < deadline:
        missing = unready_workloads(kube, state)
        if not missing:
            missing = [n.name for n in state.slurm_nodes if not slurm.node_registered(n.name)]
        if not missing:
            return
        time.sleep(0.2)
    raise LocalStackError(
        f"not ready after {timeout:.0f} s: {', '.join(missing)}",
        hint=f"kubectl -n {state.namespace} describe pods (KUBECONFIG="
        f"{stack.kube_paths.kubeconfig}); the daemons' logs are in {stack.runtime_dir}/logs "
        f"and {slurm.paths.log}",
    )


def _max_gpus(state: DesiredState) -> int:
    return max((n.gpus for n in (*state.slurm_nodes, *state.spare_nodes)), default=0)


def _print_ready(stack: LocalStack, state: DesiredState, scheduler: PodScheduler | None) -> None:
    slurm = stack.slurm
    assert slurm is not None
    print(f"export KUBECONFIG={stack.kube_paths.kubeconfig}")
    print(f"export SLURM_CONF={slurm.paths.slurm_conf}")
    if slurm.install.bin_dir is not None:  # its sinfo/scontrol, not an older one on PATH
        print(f"export PATH={slurm.install.bin_dir}:$PATH")
    print(f"# Slurm {slurm.version()}, slurmrestd {slurm.rest_url()} ({slurm.rest_api_version()})")
    print(f"# nodes: {', '.join(n.name for n in state.slurm_nodes)}")
    print(f"# pods: kubectl -n {state.namespace} get pods")
    if slurm.sshd_daemons():
        print(f"# login: ssh -p {slurm.ports.ssh} root@127.0.0.1 (keys: the Secret "
              f"login.authorizedKeysSecret names)")  # fmt: skip
    if scheduler is not None:
        hooks = scheduler.hooks.port if scheduler.hooks else "?"
        print(f"# {scheduler.settings.served} runs here (hooks on 127.0.0.1:{hooks}); a "
              "daemon beside it: reconciler run --local --no-scheduler ...")  # fmt: skip
    print("# Ctrl-C here, or `reconciler local down` elsewhere, stops the stack.", flush=True)


# ---- down and status --------------------------------------------------------------------


def run_down(args: argparse.Namespace) -> int:
    stack = LocalStack.open(runtime_dir(args))
    stopped = stack.foreground.stop() + stack.down(purge=args.purge)
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
