"""Convergence on the real local stack, from a real git remote: push -> applied; a broken push
-> failed with its error and the cluster left as it was; a fix -> applied; a hand edit ->
reverted by a resync, counted as drift. The status ConfigMap says each of these."""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.kube import Kube
from reconciler.daemon.converge import Converger
from reconciler.daemon.status import read_status
from reconciler.local.ports import free_port
from reconciler.sources.git import GitSource
from tests.integration.flux_fixture import (
    install_crd,
    publish,
    remove_crd,
    serving_artifacts,
    tarball,
)
from tests.integration.helpers import stop_cleanly, wait_for
from tests.integration.local_up import local_up, reconciler_cli

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = ROOT / "fixtures" / "config-repo"
NAMESPACE, RELEASE = "slurm", "slurm"
STATEFULSET = "slurm-gpu-small"


@dataclass
class Env:
    kube: Kube
    author: Path  # the clone users push from
    source: GitSource
    converger: Converger


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-converge-"))
    try:
        bare, author = work / "config.git", work / "author"
        git(work, "init", "-q", "--bare", "-b", "main", str(bare))
        shutil.copytree(FIXTURE_REPO, author)
        git(author, "init", "-q", "-b", "main")
        git(author, "config", "user.email", "ops@example.com")
        git(author, "config", "user.name", "Ops")
        git(author, "add", ".")
        git(author, "commit", "-q", "-m", "the fixture repo")
        git(author, "remote", "add", "origin", str(bare))
        git(author, "push", "-q", "origin", "main")
        with local_up(
            author, work / "up.log", prefix="sunk-reconciler-converge-", timings=stack_timings,
            label="converge tests",
        ) as running:  # fmt: skip
            kube = Kube.from_kubeconfig(running.stack.kube_paths.kubeconfig)
            args = argparse.Namespace(local=True, runtime_dir=running.runtime, name="unused")
            yield Env(kube, author, GitSource(str(bare), "main", work / "checkout"),
                      Converger(args, kube))  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


def push(env: Env, old: str, new: str, message: str, file: str = "values.yaml") -> str:
    path = env.author / file
    text = path.read_text()
    assert old in text, f"{old!r} not in {file}"
    path.write_text(text.replace(old, new, 1))
    git(env.author, "commit", "-q", "-am", message)
    git(env.author, "push", "-q", "origin", "main")
    return git(env.author, "rev-parse", "HEAD")


def nccl_debug(env: Env) -> str:
    sts: Any = env.kube.get("apps/v1", "StatefulSet", STATEFULSET, NAMESPACE)
    [slurmd] = [c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "slurmd"]
    return next(e["value"] for e in slurmd["env"] if e["name"] == "NCCL_DEBUG")


def test_converge_follows_git_and_keeps_the_last_good_revision(env: Env) -> None:
    first = env.converger.converge(env.source.fetch())
    assert first.state == "unchanged", first  # `local up` applied the same repo

    head = push(env, "value: WARN", "value: INFO", "more NCCL logs")
    applied = env.converger.converge(env.source.fetch())
    assert (applied.state, applied.revision.id) == ("applied", head), applied
    assert "1 changed" in applied.summary and nccl_debug(env) == "INFO"

    broken = push(env, "compute:\n", "compute: [\n", "oops")
    failed = env.converger.converge(env.source.fetch())
    assert failed.state == "failed" and "values.yaml:" in failed.error, failed
    assert nccl_debug(env) == "INFO", "a broken revision changed the cluster"
    status = read_status(env.kube, NAMESPACE, RELEASE)
    assert status is not None
    assert (status.revision, status.state, status.applied_revision) == (broken, "failed", head)
    assert "values.yaml:" in status.error

    fixed = push(env, "compute: [\n", "compute:\n", "fix")
    outcome = env.converger.converge(env.source.fetch())
    assert outcome.state == "unchanged", outcome  # the fix brings back what is applied
    status = read_status(env.kube, NAMESPACE, RELEASE)
    assert status is not None and (status.state, status.applied_revision) == ("unchanged", fixed)


def test_a_resync_reverts_a_hand_edit_and_counts_it(env: Env) -> None:
    revision = env.source.fetch()
    env.converger.converge(revision)
    before = int(env.converger.status.drift_corrected)
    wanted = nccl_debug(env)
    slurmd = {"name": "slurmd", "env": [{"name": "NCCL_DEBUG", "value": "TRACE"}]}
    env.kube.request_json(  # what `kubectl edit` does
        "PATCH", f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/{STATEFULSET}",
        body={"spec": {"template": {"spec": {"containers": [slurmd]}}}},
        content_type="application/strategic-merge-patch+json",
    )  # fmt: skip
    assert nccl_debug(env) == "TRACE"
    outcome = env.converger.converge(revision, resync=True)
    assert outcome.state == "applied" and outcome.drift, outcome
    assert nccl_debug(env) == wanted
    status = read_status(env.kube, NAMESPACE, RELEASE)
    assert status is not None and int(status.drift_corrected) == before + 1


def test_reconciler_run_applies_a_push_and_reverts_a_hand_edit(env: Env, tmp_path: Path) -> None:
    """The daemon as users run it: a push is applied within the fetch interval, a hand edit
    is reverted at the next resync, /readyz /metrics and `reconciler status` tell the story,
    SIGTERM stops it cleanly."""
    daemon, port, log = _start_daemon(env, tmp_path, "--interval", "1", "--resync", "4")
    runtime = env.converger._args.runtime_dir
    try:
        wait_for(lambda: _get(port, "/readyz")[0] == 200, 30, "readyz: " + log.read_text())
        before = nccl_debug(env)
        after = "WARN" if before != "WARN" else "INFO"
        pushed_at = time.monotonic()
        head = push(env, f"value: {before}", f"value: {after}", "from the daemon test")
        wait_for(lambda: nccl_debug(env) == after, 15, "the push to be applied")
        latency = time.monotonic() - pushed_at
        assert latency < 5, f"push to applied took {latency:.1f} s with a 1 s interval"
        # The status is written just after the apply the test saw: wait for it.
        wait_for(lambda: _shown_status(runtime).get("appliedRevision") == head, 10,
                 "`reconciler status` to show the pushed revision")  # fmt: skip
        slurmd = {"name": "slurmd", "env": [{"name": "NCCL_DEBUG", "value": "TRACE"}]}
        env.kube.request_json(
            "PATCH", f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/{STATEFULSET}",
            body={"spec": {"template": {"spec": {"containers": [slurmd]}}}},
            content_type="application/strategic-merge-patch+json",
        )  # fmt: skip
        wait_for(lambda: nccl_debug(env) == after, 15, "the resync to revert the hand edit")
        # The revert is visible a moment before the daemon records it: wait for the metric.
        wait_for(lambda: "reconciler_drift_corrections_total 1.0" in _get(port, "/metrics")[1],
                 10, "the drift correction to be counted")  # fmt: skip
        metrics = _get(port, "/metrics")[1]
        assert 'reconciler_reconciles_total{state="applied"}' in metrics
        assert "reconciler_scheduler_polls_total" in metrics
    finally:
        stop_cleanly(daemon, log)


def test_a_webhook_push_is_applied_at_once(env: Env, tmp_path: Path) -> None:
    """A 60 s fetch interval: only the webhook can make this quick."""
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    daemon, port, log = _start_daemon(
        env, tmp_path, "--interval", "60", "--webhook-secret-file", str(secret)
    )
    try:
        wait_for(lambda: _get(port, "/readyz")[0] == 200, 30, "readyz: " + log.read_text())
        before = nccl_debug(env)
        after = "WARN" if before != "WARN" else "INFO"
        push(env, f"value: {before}", f"value: {after}", "pushed, with a webhook")
        body = json.dumps({"ref": "refs/heads/main"}).encode()
        signature = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
        sent = time.monotonic()
        assert _post(port, "/webhook", body, {"X-Hub-Signature-256": "bad"}) == 401
        assert _post(port, "/webhook", body, {"X-Hub-Signature-256": f"sha256={signature}"}) == 202
        wait_for(lambda: nccl_debug(env) == after, 15, "the webhook push to be applied")
        latency = time.monotonic() - sent
        assert latency < 3, f"webhook to applied took {latency:.1f} s"
        print(f"webhook -> applied: {latency:.2f} s")
    finally:
        stop_cleanly(daemon, log)


def test_a_sidecar_directory_drives_a_change(env: Env, tmp_path: Path) -> None:
    """--source-dir, as git-sync or an Argo CD CMP keeps it: an edit is applied at once."""
    checkout = tmp_path / "synced"
    shutil.copytree(env.source.fetch().path, checkout, ignore=shutil.ignore_patterns(".git"))
    daemon, port, log = _start_daemon(env, tmp_path, "--interval", "60", source=checkout)
    try:
        wait_for(lambda: _get(port, "/readyz")[0] == 200, 30, "readyz: " + log.read_text())
        values = checkout / "values.yaml"
        before = nccl_debug(env)
        after = "WARN" if before != "WARN" else "INFO"
        edited_at = time.monotonic()
        values.write_text(values.read_text().replace(f"value: {before}", f"value: {after}", 1))
        wait_for(lambda: nccl_debug(env) == after, 15, "the edit to be applied")
        print(f"directory edit -> applied: {time.monotonic() - edited_at:.2f} s")
    finally:
        stop_cleanly(daemon, log)


def test_a_flux_artifact_drives_a_change(env: Env, tmp_path: Path) -> None:
    """--flux-git-repository: each new artifact source-controller publishes is applied."""
    install_crd(env.kube)
    served = serving_artifacts()
    artifacts = next(served)
    try:
        repo = env.source.fetch().path
        files = {
            str(p.relative_to(repo)): p.read_text()
            for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts
        }  # fmt: skip
        current = nccl_debug(env)
        after = "WARN" if current != "WARN" else "INFO"
        publish(env.kube, artifacts, "config", "main@sha1:" + "1" * 40, tarball(files),
                namespace=NAMESPACE)  # fmt: skip
        daemon, port, log = _start_daemon(
            env, tmp_path, "--interval", "1", flux=f"{NAMESPACE}/config"
        )
        try:
            wait_for(lambda: _get(port, "/readyz")[0] == 200, 30, "readyz: " + log.read_text())
            edited = dict(files)
            edited["values.yaml"] = files["values.yaml"].replace(
                f"value: {current}", f"value: {after}", 1
            )
            publish(env.kube, artifacts, "config", "main@sha1:" + "2" * 40, tarball(edited),
                    namespace=NAMESPACE)  # fmt: skip
            wait_for(lambda: nccl_debug(env) == after, 15, "the new artifact to be applied")
        finally:
            stop_cleanly(daemon, log)
    finally:
        served.close()
        remove_crd(env.kube)


def test_two_replicas_one_leader_and_a_takeover_after_kill_9(env: Env, tmp_path: Path) -> None:
    duration = 3.0
    replicas = {}
    for name in ("replica-a", "replica-b"):
        folder = tmp_path / name
        folder.mkdir()
        replicas[name] = _start_daemon(
            env, folder, "--leader-elect", "--lease-duration", str(duration), "--identity", name
        )
    try:
        leader = wait_for(_lease_holder(env), 30, "a leader")
        follower = next(n for n in replicas if n != leader)
        for _ in range(3):  # it keeps the lease while alive
            time.sleep(duration / 2)
            assert _lease_holder(env)() == leader
        killed_at = time.monotonic()
        replicas[leader][0].kill()
        replicas[leader][0].wait()
        wait_for(lambda: _lease_holder(env)() == follower, 4 * duration, "the takeover")
        takeover = time.monotonic() - killed_at
        print(f"takeover after kill -9: {takeover:.2f} s (lease {duration} s)")
        assert takeover < duration + duration / 3 + 1.5, takeover
        port = replicas[follower][1]
        wait_for(lambda: _get(port, "/readyz")[0] == 200, 30, "the new leader to converge")
    finally:
        for process, _, log in replicas.values():
            if process.poll() is None:  # the survivor: SIGTERM, released lease, exit 0
                stop_cleanly(process, log)


def _lease_holder(env: Env) -> Callable[[], str | None]:
    def holder() -> str | None:
        lease = env.kube.get("coordination.k8s.io/v1", "Lease", "slurm-reconciler", NAMESPACE)
        return ((lease or {}).get("spec") or {}).get("holderIdentity") or None

    return holder


def _start_daemon(
    env: Env, tmp_path: Path, *extra: str, source: Path | None = None, flux: str = ""
) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = free_port()
    log = tmp_path / "run.log"
    chosen = ["--source-dir", str(source)] if source else ["--git-url", env.source.url]
    if flux:
        chosen = ["--flux-git-repository", flux]
    with log.open("wb") as out:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "run", *chosen,
             "--runtime-dir", str(env.converger._args.runtime_dir), "--listen",
             f"127.0.0.1:{port}", "--hooks-api-bind-address", "127.0.0.1:0", "--workdir",
             str(tmp_path / "w"), *extra],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return daemon, port, log


def _post(port: int, path: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=body, headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def _shown_status(runtime: Path) -> dict[str, str]:
    shown = reconciler_cli("status", "--runtime-dir", str(runtime)).stdout
    return {k: v.strip() for k, v in (line.split(":", 1) for line in shown.splitlines())}


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""
    except OSError:
        return 0, ""
