"""`reconciler run` whose source has nothing usable when it starts, against the real
kube-apiserver: no revision was ever applied and the directory it reads holds a broken file.
The daemon must not exit (its Pod would crash-loop): it serves /healthz, says on /readyz why
it is not ready, records the failure in the status ConfigMap, and starts once the file is
fixed. (Starting from the applied revision when the head is bad: test_converge.py.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.adapters.kube import Kube
from reconciler.daemon.status import read_status
from reconciler.local.ports import free_port
from tests.integration.endpoints import KubeEndpoints
from tests.integration.helpers import stop_cleanly, unique, wait_for

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = ROOT / "fixtures" / "config-repo"


@pytest.fixture
def namespace(kube: KubeEndpoints) -> Iterator[tuple[Kube, str]]:
    k = Kube.from_kubeconfig(kube.kubeconfig)
    name = unique("it-startup")
    k.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield k, name
    k.delete("v1", "Namespace", name)
    k.close()


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def _broken_repo(tmp_path: Path, namespace: str) -> tuple[Path, str]:
    """The fixture repo for `namespace` with a values.yaml that does not parse; returns the
    file and its good text."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPO, repo)
    (repo / "reconciler.yaml").write_text(f"release: st\nnamespace: {namespace}\n")
    values = repo / "values.yaml"
    good = values.read_text()
    values.write_text(good.replace("compute:\n", "compute: [\n", 1))
    return values, good


def _start_run(
    kube: KubeEndpoints, tmp_path: Path, *extra: str
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """`reconciler run` on tmp_path/repo, its output in tmp_path/run.log."""
    port = free_port()
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "run", "--source-dir", str(tmp_path / "repo"),
             "--kubeconfig", str(kube.kubeconfig), "--no-scheduler", "--node-sync-interval",
             "0", "--slurm-metrics-interval", "0", *extra, "--listen", f"127.0.0.1:{port}",
             "--workdir", str(tmp_path / "w"),
             "--interval", "1"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return daemon, port, log


def test_a_broken_first_revision_is_waited_out_not_crashed_on(
    kube: KubeEndpoints, namespace: tuple[Kube, str], tmp_path: Path
) -> None:
    k, ns = namespace
    values, good = _broken_repo(tmp_path, ns)
    daemon, port, log = _start_run(kube, tmp_path)
    try:
        # /readyz answers before the first revision is tried: wait for the verdict on it.
        status, text = wait_for(
            lambda: (s := _get(port, "/readyz"))[0] and "not been converged" not in s[1] and s,
            30, "the daemon to try its first revision: " + log.read_text())  # fmt: skip
        assert status == 503 and "no usable revision yet" in text and "values.yaml:" in text
        shown = wait_for(lambda: read_status(k, ns, "st"), 10, "the status ConfigMap")
        assert shown.state == "failed" and "values.yaml:" in shown.error, shown
        assert shown.applied_revision == ""
        assert _get(port, "/healthz")[0] == 200 and daemon.poll() is None, log.read_text()
        assert log.read_text().count("no revision to start from yet") == 1  # not every retry

        values.write_text(good)
        # It starts: the converge itself fails here (no Slurm to plan against), and is recorded.
        wait_for(lambda: _get(port, "/readyz")[0] == 200, 30, "readiness: " + log.read_text())
        assert daemon.poll() is None
    finally:
        stop_cleanly(daemon, log)


def test_a_replica_waiting_for_its_first_revision_never_says_it_leads(
    kube: KubeEndpoints, namespace: tuple[Kube, str], tmp_path: Path
) -> None:
    """With --leader-elect, /metrics serves before the elector exists (while the first usable
    revision is looked for): reconciler_leader must say 0 then, not the 1 of a lone replica,
    or a monitor sees two leaders."""
    _broken_repo(tmp_path, namespace[1])
    daemon, port, log = _start_run(kube, tmp_path, "--leader-elect", "--identity", "waiting")
    try:
        status, metrics = wait_for(lambda: (s := _get(port, "/metrics"))[0] and s, 30,
                                   "the daemon to serve /metrics")  # fmt: skip
        assert status == 200
        assert "reconciler_leader 0.0" in metrics, metrics
        assert _get(port, "/readyz")[0] == 503
    finally:
        stop_cleanly(daemon, log)
