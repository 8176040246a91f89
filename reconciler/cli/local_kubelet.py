"""`reconciler local up --kubelet [REPO]`: real kubelets on containerd, and the repo on them
as a user brings it up, with nothing by hand: our images built (or reused) and loaded into
every Node's containerd; this machine's values layer (kubelet_repo.py); the Secrets and claims
the repo's Pods name that `apply` does not make; `reconciler apply` from this machine inside
the stack's network namespace; ready when every workload is and every Slurm node is idle.
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from reconciler.adapters.kube import Kube
from reconciler.cli.local_parts import (
    DEFAULT_REPO,
    interrupt,
    progress,
    templates,
    unready_workloads,
    wait_for_stop,
)
from reconciler.cli.rbac import SERVICE_ACCOUNT
from reconciler.compile.desired import DesiredState, compile_shape
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import Config, load_config
from reconciler.errors import LocalStackError
from reconciler.local.kubelets import repo as shape
from reconciler.local.kubelets.cluster import KubeletCluster
from reconciler.local.kubelets.git_server import BRANCH, GitServer
from reconciler.local.kubelets.image_build import ROOT as SOURCE_ROOT
from reconciler.local.kubelets.image_build import ImageError, image_tag, oci_archive, our_tags
from reconciler.local.stack import LocalStack
from reconciler.scheduler.rbac import scheduler_rbac
from reconciler.scheduler.settings import settings_from_values

APPLY_TIMEOUT_SECONDS = 900.0
READY_TIMEOUT_SECONDS = 600.0
JWT_KEY = "jwt_hs256.key"
DEPLOY_NAMESPACE = "slurm"  # deploy/base's


def run_up_kubelet(args: argparse.Namespace, runtime: Path) -> int:
    """Kubernetes with real kubelets, the repo (if any) on it; in the foreground until stopped."""
    if args.directory or args.slurm is not None or args.slurm_prefix is not None:
        raise LocalStackError(
            "--kubelet runs no Slurm of this machine's: --directory, --slurm and "
            "--slurm-prefix do not apply",
            hint="drop them; Slurm comes from the images the repo's Pods name",
        )
    repo = args.repo or (DEFAULT_REPO if args.in_cluster else None)
    stack = LocalStack(runtime)
    signal.signal(signal.SIGTERM, interrupt)
    started = time.monotonic()
    ready = False
    try:
        stack.foreground.remember(os.getpid())
        if repo is None:
            _up_nodes(stack, args.nodes or 2, args.image_archive)
        else:
            _up_repo(stack, repo, args)
        ready = True
        progress(f"ready in {time.monotonic() - started:.1f} s")
        wait_for_stop(stack)
    except KeyboardInterrupt:
        if not ready:
            progress("interrupted before it was ready")
    finally:
        stack.down()
        progress("local stack stopped")
    return 0 if ready else 130


def _up_nodes(stack: LocalStack, count: int, archives: list[Path]) -> None:
    progress(f"kubelet cluster in {stack.runtime_dir}")
    kubelets = _start_kubelets(stack, count, archives, [])
    print(f"export KUBECONFIG={stack.kube_paths.kubeconfig}")
    print(f"# nodes: {', '.join(n.name for n in kubelets.nodes)}; inside the namespace: "
          f"ip netns exec {kubelets.network.name} ...")  # fmt: skip
    print("# Ctrl-C here, or `reconciler local down` elsewhere, stops the stack.", flush=True)


def _start_kubelets(stack: LocalStack, count: int, archives: list[Path],
                    shapes: list[Any]) -> KubeletCluster:  # fmt: skip
    timings = stack.up_kubelets(count, archives, shapes)
    steps = ", ".join(f"{k} {v:.1f} s" for k, v in timings.items() if k != "total")
    progress(f"Nodes Ready in {timings['total']:.1f} s ({steps})")
    kubelets = stack.kubelets
    assert kubelets is not None
    return kubelets


def _up_repo(stack: LocalStack, repo: Path, args: argparse.Namespace) -> None:
    files = read_repo(repo)
    config = load_config(files, read_library())
    machine = shape.Machine(os.cpu_count() or 1, Path("/dev/nvidia0").exists())
    layer = shape.machine_layer(compile_shape(config), config.values, machine)
    if layer:
        files[shape.MACHINE_LAYER] = yaml.safe_dump(layer, sort_keys=False)
        config = load_config(files, read_library())
    state = compile_shape(config)
    progress(f"kubelet cluster in {stack.runtime_dir}, for {repo}" + (
        f" plus {shape.MACHINE_LAYER} (this machine: {machine.cpus} CPUs, "
        f"{'GPUs' if machine.gpus else 'no GPU'})" if layer else ""))  # fmt: skip
    if args.in_cluster and state.namespace != DEPLOY_NAMESPACE:
        raise LocalStackError(
            f"--in-cluster installs deploy/local, whose objects and RBAC are in namespace "
            f"{DEPLOY_NAMESPACE}; the repo's release is in {state.namespace}",
            hint="run without --in-cluster, or set the repo's namespace to slurm",
        )
    wanted = shape.images(state) | ({image_tag()} if args.in_cluster else set())
    archives = [*_our_archives(wanted), *args.image_archive]
    kubelets = _start_kubelets(stack, len(templates(state, args.nodes)), archives,
                               templates(state, args.nodes))  # fmt: skip
    applied = _copy_repo(repo, stack.runtime_dir / "repo", files.get(shape.MACHINE_LAYER))
    kube = Kube.from_kubeconfig(stack.kube_paths.kubeconfig)
    made = _user_objects(kube, config, state, stack.runtime_dir)
    jwt_key = stack.runtime_dir / "secrets" / JWT_KEY
    apply_argv = [
        "ip", "netns", "exec", kubelets.network.name, sys.executable, "-m", "reconciler",
        "apply", str(applied), "--kubeconfig", str(stack.kube_paths.kubeconfig),
        "--slurm-url", shape.rest_url(state), "--slurm-jwt-key", str(jwt_key), "--yes",
    ]  # fmt: skip
    git = None
    if args.in_cluster:
        git = _install_in_cluster(stack, kubelets, applied)
        _scheduler_rbac(kube, config, state)
    else:
        progress(f"applying {applied} from this machine, in the stack's network namespace")
        _apply(apply_argv, stack.runtime_dir / "logs" / "apply.log")
    wait_release_ready(kube, state, stack, timeout=READY_TIMEOUT_SECONDS)
    if git is not None:
        wait_reconciler_leads(kube, timeout=READY_TIMEOUT_SECONDS)
    memory = kubelets.memory()
    progress(f"memory: {sum(memory.values()) / 2**20:.0f} MiB resident (" + ", ".join(
        f"{k} {v / 2**20:.0f}" for k, v in sorted(memory.items())) + ")")  # fmt: skip
    netns = kubelets.network.name
    print(f"export KUBECONFIG={stack.kube_paths.kubeconfig}")
    print(f"# Slurm: kubectl -n {state.namespace} exec deploy/{state.release}-controller "
          "-c slurmctld -- sinfo")  # fmt: skip
    print(f"# nodes: {', '.join(n.name for n in kubelets.nodes)}; inside the namespace: "
          f"ip netns exec {netns} ...")  # fmt: skip
    print(f"# repo applied: {applied} ({repo}" + (
        f" plus {shape.MACHINE_LAYER}, this machine's layer)" if layer else ")"))  # fmt: skip
    if git is not None:
        print(f"export RECONCILER_GIT_URL={git.host_url}")
        print(f"# the reconciler (deploy/local, 2 replicas) converges branch {BRANCH} of "
              f"{git.pod_url}: git clone $RECONCILER_GIT_URL, commit, push")  # fmt: skip
    else:
        print(f"# apply again: {' '.join(apply_argv)}")
    if made.get("ssh"):
        print(f"# login: ip netns exec {netns} ssh -i {made['ssh']} "
              f"root@{state.release}-login.{state.namespace}.svc.cluster.local")  # fmt: skip
    print("# Ctrl-C here, or `reconciler local down` elsewhere, stops the stack.", flush=True)


def _install_in_cluster(stack: LocalStack, kubelets: KubeletCluster, applied: Path) -> GitServer:
    """The repo as the first commit of a git server in the stack's network namespace, then
    deploy/ as a user applies it (`kubectl apply -k deploy/local`): the reconciler's Pods
    converge the rest from git."""
    git = GitServer(stack.runtime_dir / "git", stack.supervisor, kubelets.network)
    commit = git.publish(applied)
    git.start()
    progress(f"git: {applied} is commit {commit[:12]} of branch {BRANCH} at {git.pod_url} "
             "(git daemon in the stack's network namespace)")  # fmt: skip
    overlay = SOURCE_ROOT / "deploy" / "local"
    if not (overlay / "kustomization.yaml").is_file():
        raise LocalStackError(f"no {overlay}/kustomization.yaml",
                              hint="--in-cluster runs from a source checkout")  # fmt: skip
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(stack.kube_paths.kubeconfig), "apply", "-k", str(overlay)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if done.returncode != 0:
        raise LocalStackError(f"kubectl apply -k {overlay} failed: {done.stderr.strip()[-800:]}")
    progress(f"kubectl apply -k {overlay}: {len(done.stdout.splitlines())} objects")
    return git


def _scheduler_rbac(kube: Kube, config: Config, state: DesiredState) -> None:
    """What a user applies beside deploy/ (docs/deploy.md): `reconciler render-rbac REPO`,
    the scheduler's Roles in the other namespaces its scope names (made if missing, as a
    tenant's namespace exists before its Pods)."""
    settings = settings_from_values(config.values, release=state.release,
                                    namespace=state.namespace)  # fmt: skip
    objects = scheduler_rbac(settings, (DEPLOY_NAMESPACE, SERVICE_ACCOUNT))
    for namespace in sorted({o["metadata"].get("namespace") for o in objects} - {None}):
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for obj in objects:
        kube.apply(obj, field_manager="reconciler-local-up")
    progress(f"render-rbac: {len(objects)} objects for scheduler.scope")


def wait_reconciler_leads(kube: Kube, *, timeout: float) -> None:
    """One reconciler replica ready (the leader, once it converged: deploy/base's readiness),
    and every replica running."""
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        live = kube.get("apps/v1", "Deployment", "reconciler", DEPLOY_NAMESPACE) or {}
        status = live.get("status") or {}
        wanted = int((live.get("spec") or {}).get("replicas") or 1)
        if (
            int(status.get("readyReplicas") or 0) >= 1
            and int(status.get("replicas") or 0) >= wanted
        ):
            return
        time.sleep(1)
    raise LocalStackError(
        f"the reconciler Deployment is not leading after {timeout:.0f} s: {status}",
        hint=f"kubectl -n {DEPLOY_NAMESPACE} logs deploy/reconciler",
    )


def _our_archives(tags: set[str]) -> list[Path]:
    """Our images the repo names, as OCI archives (built first where missing); the others
    cannot be loaded: nothing is pulled here."""
    ours = sorted(tags & our_tags())
    for other in sorted(tags - set(ours)):
        progress(f"image {other} is not built here and nothing is pulled: its Pods will not "
                 "start (--image-archive loads an OCI archive of it)")  # fmt: skip
    try:
        return [oci_archive(tag, progress) for tag in ours]
    except (ImageError, OSError, subprocess.SubprocessError) as exc:
        raise LocalStackError(
            f"cannot build our images: {exc}", hint="python -m tests.integration.image build"
        ) from exc


def _copy_repo(repo: Path, dest: Path, layer: str | None) -> Path:
    """The repo as applied: its files, plus this machine's layer."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(repo, dest, ignore=shutil.ignore_patterns(".git"), symlinks=True)
    if layer is not None:
        (dest / shape.MACHINE_LAYER).parent.mkdir(parents=True, exist_ok=True)
        (dest / shape.MACHINE_LAYER).write_text(layer)
    return dest


def _user_objects(
    kube: Kube, config: Config, state: DesiredState, runtime: Path
) -> dict[str, Path]:
    """What a user creates before the first apply: the namespace; the JWT key apply signs
    with, as the Secret apply keeps (slurmctld reads the same key); root's authorized_keys for
    the login Pod, from a key made here; the claims the repo's mounts name."""
    namespace = state.namespace
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    private = runtime / "secrets"
    private.mkdir(mode=0o700, parents=True, exist_ok=True)
    made: dict[str, Path] = {}
    jwt = next((s for s in state.secrets if s.key == JWT_KEY), None)
    if jwt is not None:
        made["jwt"] = _write_private(private / JWT_KEY, secrets.token_bytes(64))
        _secret(kube, jwt.name, namespace, {JWT_KEY: made["jwt"].read_bytes()})
    keys_secret = (config.values.get("login") or {}).get("authorizedKeysSecret")
    for name in shape.secrets_named(state):
        if name == keys_secret:
            made["ssh"] = _ssh_key(private / "id_ed25519")
            _secret(
                kube,
                name,
                namespace,
                {"authorized_keys": made["ssh"].with_suffix(".pub").read_bytes()},
            )
            progress(f"Secret {name}: root's authorized_keys, key {made['ssh']}")
        else:
            progress(f"the repo's Pods name Secret {namespace}/{name}, which local up cannot "
                     "know: create it (kubectl create secret) or they stay Pending")  # fmt: skip
    for name in shape.pull_secrets_named(state):
        # Every image is in the Nodes' containerd and none is pulled: an empty login will do.
        _secret(
            kube,
            name,
            namespace,
            {".dockerconfigjson": b'{"auths": {}}'},
            kind="kubernetes.io/dockerconfigjson",
        )
        progress(f"Secret {name}: an empty registry login (imagePullSecrets; nothing is pulled)")
    for name in shape.claims_to_make(state):
        kube.create(shape.claim(name, namespace))
        progress(
            f"claim {namespace}/{name} ({shape.CLAIM_SIZE}, bound to a directory of the stack)"
        )
    return made


def _write_private(path: Path, data: bytes) -> Path:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path


def _ssh_key(path: Path) -> Path:
    path.unlink(missing_ok=True)
    path.with_suffix(".pub").unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "local-up", "-f",
                    str(path)], check=True, capture_output=True, timeout=30)  # fmt: skip
    return path


def _secret(
    kube: Kube, name: str, namespace: str, data: dict[str, bytes], kind: str = "Opaque"
) -> None:
    encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
    kube.create({"apiVersion": "v1", "kind": "Secret", "type": kind,
                 "metadata": {"name": name, "namespace": namespace}, "data": encoded})  # fmt: skip


def _apply(argv: list[str], log: Path) -> None:
    """`reconciler apply`, its lines shown as `local: apply: ...` and kept in `log`."""
    with log.open("w") as kept:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)  # fmt: skip
        assert process.stdout is not None
        deadline = time.monotonic() + APPLY_TIMEOUT_SECONDS
        for line in process.stdout:
            kept.write(line)
            progress("apply: " + line.rstrip().removeprefix("apply: "))
            if time.monotonic() > deadline:
                process.kill()
        if process.wait() != 0:
            raise LocalStackError(f"`reconciler apply` exited {process.returncode}",
                                  hint=f"its output: {log}")  # fmt: skip


def slurm_node_states(kubeconfig: Path, state: DesiredState) -> dict[str, str]:
    """`sinfo` in the controller Pod: Slurm node -> state ({} while it does not answer)."""
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "-n", state.namespace, "exec",
         f"deploy/{state.release}-controller", "-c", "slurmctld", "--", "sinfo", "-h", "-N",
         "-o", "%N %T"], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    words = done.stdout.split() if done.returncode == 0 else []
    return dict(zip(words[::2], words[1::2], strict=False))


def wait_release_ready(
    kube: Kube, state: DesiredState, stack: LocalStack, *, timeout: float
) -> None:
    """Every Deployment and StatefulSet of the repo with all replicas ready, and every Slurm
    node idle; or an error that names what is not."""
    deadline = time.monotonic() + timeout
    missing: list[str] = []
    while time.monotonic() < deadline:
        missing = unready_workloads(kube, state)
        if not missing:
            states = slurm_node_states(stack.kube_paths.kubeconfig, state)
            missing = [f"{n.name} ({states.get(n.name, 'not in sinfo')})" for n in state.slurm_nodes
                       if states.get(n.name) != "idle"]  # fmt: skip
        if not missing:
            return
        time.sleep(1)
    raise LocalStackError(
        f"not ready after {timeout:.0f} s: {', '.join(missing)}",
        hint=f"kubectl -n {state.namespace} describe pods (KUBECONFIG="
        f"{stack.kube_paths.kubeconfig}); the daemons' logs are in {stack.runtime_dir}/logs",
    )
