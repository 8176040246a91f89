"""Small helpers shared by the integration tests."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from reconciler.adapters.kube import Kube
from reconciler.errors import KubeApiError
from reconciler.local.ports import free_port

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class FixedToken:
    """A token source that sends exactly the token it was given (to see the server refuse it)."""

    def __init__(self, user: str, value: str) -> None:
        self.user = user
        self._value = value

    def token(self) -> str:
        return self._value


def stop_cleanly(process: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL if it hangs; it must have exited 0 without a traceback."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    text = log.read_text(errors="replace")
    assert process.returncode == 0, text
    assert "Traceback" not in text, text


def assert_up_and_bounded(
    process: subprocess.Popen[bytes], log: Path, bound: int, what: str
) -> None:
    """`process` still runs, has logged no traceback, and its peak resident memory (VmHWM,
    start-up included) is under `bound` bytes; the peak is printed as `what`."""
    assert process.poll() is None and "Traceback" not in log.read_text(), log.read_text()
    lines = Path(f"/proc/{process.pid}/status").read_text().splitlines()
    peak = int(next(line.split()[1] for line in lines if line.startswith("VmHWM:"))) * 1024
    print(f"{what}: {peak / 2**20:.0f} MiB")
    assert peak < bound, f"{peak / 2**20:.0f} MiB"


def http_get(port: int, path: str) -> str:
    """The body of GET http://127.0.0.1:PORT/PATH; "" while nothing answers there."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, OSError):
        return ""


@contextlib.contextmanager
def reconciler_run(
    repo: Path, runtime: Path, work: Path, *flags: str
) -> Iterator[tuple[int, Path]]:
    """`reconciler run --source-dir REPO` on the local stack in RUNTIME as users run it, with
    FLAGS; (its /metrics port, its log) once /readyz says ok; stopped cleanly after."""
    port, log = free_port(), work / "run.log"
    with log.open("wb") as out:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "run", "--source-dir", str(repo),
             "--runtime-dir", str(runtime), "--listen", f"127.0.0.1:{port}",
             "--hooks-api-bind-address", "127.0.0.1:0", "--workdir", str(work / "w"), *flags],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for(lambda: http_get(port, "/readyz") == "ok\n", 60, "readyz: " + log.read_text())
        yield port, log
    finally:
        stop_cleanly(daemon, log)


def install_pod_group_crd(kube: Kube, namespace: str) -> None:
    """The scheduler-plugins PodGroup CRD (scheduling.x-k8s.io/v1alpha1), schema-less, as a
    cluster with coscheduling has it; returns once it serves in `namespace`."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
        "spec": {
            "group": "scheduling.x-k8s.io", "scope": "Namespaced",
            "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup",
                      "shortNames": ["pg"]},
            "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": {
                "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            }}],
        },
    }  # fmt: skip
    if not kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"]):
        kube.request_json(
            "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd
        )

    def served() -> bool:
        with contextlib.suppress(KubeApiError):
            path = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups"
            return bool(kube.request_json("GET", path))
        return False

    wait_for(served, 20, "the PodGroup CRD to serve")


def create_pod_group(kube: Kube, namespace: str, name: str, min_member: int) -> None:
    kube.request_json(
        "POST", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups",
        body={"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
              "metadata": {"name": name, "namespace": namespace},
              "spec": {"minMember": min_member}},
    )  # fmt: skip
