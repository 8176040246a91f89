"""Leader election against the real kube-apiserver: no two leaders, ever.

Electors in this process for what one replica does (a start callback that raises or takes
longer than the lease, a clock an hour off, an API server that stops answering), and two
`reconciler run` processes for a leader paused with SIGSTOP past its lease: its successor
takes over, and once resumed it neither leads nor says it does; it exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.adapters.kube import Kube
from reconciler.daemon.lease import LEASE_API, LeaderElector, LeaseTimings
from reconciler.local.ports import free_port
from tests.integration.endpoints import KubeEndpoints
from tests.integration.helpers import stop_cleanly, unique, wait_for

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = ROOT / "fixtures" / "config-repo"
FAST = LeaseTimings(duration=3.0, renew_deadline=2.0, retry=0.4)


@pytest.fixture(scope="module")
def k(kube: KubeEndpoints) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(kube.kubeconfig)
    yield client
    client.close()


@pytest.fixture
def namespace(k: Kube) -> Iterator[str]:
    name = unique("it-lease")
    k.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    k.delete("v1", "Namespace", name)


@dataclass
class Replica:
    """An elector in this process and what its callbacks saw."""

    elector: LeaderElector
    started: list[float] = field(default_factory=list)
    lost: list[float] = field(default_factory=list)

    def start(self, on_started: Callable[[], None] | None = None) -> None:
        def started() -> None:
            self.started.append(time.monotonic())
            if on_started is not None:
                on_started()

        self.elector.start(started, lambda: self.lost.append(time.monotonic()))


def replica(k: Kube, namespace: str, identity: str, **options: Any) -> Replica:
    options.setdefault("timings", FAST)
    return Replica(LeaderElector(k, namespace, "le", identity, **options))


def holder(k: Kube, namespace: str, name: str = "le") -> str | None:
    lease = k.get(LEASE_API, "Lease", name, namespace)
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or None


@pytest.fixture
def escaped() -> Iterator[list[BaseException]]:
    """Exceptions that ended a thread (threading.excepthook)."""
    seen: list[BaseException] = []
    previous = threading.excepthook
    threading.excepthook = lambda hook: seen.append(hook.exc_value)  # type: ignore[arg-type,misc]
    yield seen
    threading.excepthook = previous


def test_a_start_callback_that_raises_ends_the_leadership_not_the_elector(
    k: Kube, namespace: str, escaped: list[BaseException]
) -> None:
    a = replica(k, namespace, "a")

    def broken() -> None:
        raise RuntimeError("the scheduler could not start")

    a.start(broken)
    wait_for(lambda: a.lost, 5, "a to step down")
    assert not a.elector.leading() and escaped == []
    b = replica(k, namespace, "b")
    b.start()
    wait_for(lambda: b.started, 3 * FAST.duration, "b to take over the lease a left")
    assert b.started[0] >= a.lost[0] and holder(k, namespace) == "b"
    b.elector.stop(release=True)


def test_the_lease_is_renewed_while_the_start_takes_longer_than_the_lease(
    k: Kube, namespace: str
) -> None:
    a = replica(k, namespace, "a")
    done = threading.Event()

    def slow() -> None:  # a slow start: many Pods to list, a slow Slurm
        time.sleep(2 * FAST.duration)
        done.set()

    a.start(slow)
    wait_for(lambda: a.started, 5, "a to lead")
    b = replica(k, namespace, "b")
    b.start()
    renewals = set()
    while not done.is_set():
        lease: Any = k.get(LEASE_API, "Lease", "le", namespace)
        renewals.add(lease["spec"]["renewTime"])
        assert lease["spec"]["holderIdentity"] == "a" and a.elector.leading()
        time.sleep(0.2)
    assert len(renewals) >= 2 * FAST.duration / FAST.retry / 2, renewals
    assert (b.started, a.lost) == ([], [])
    b.elector.stop(release=False)
    a.elector.stop(release=True)


def test_expiry_is_judged_by_what_a_follower_sees_not_by_the_leaders_clock(
    k: Kube, namespace: str
) -> None:
    """The leader's node clock is an hour slow: every renewTime it writes looks an hour old.
    A follower comparing it with its own clock would take over at once."""
    a = replica(k, namespace, "a", wall_clock=lambda: time.time() - 3600)
    a.start()
    wait_for(lambda: a.started, 5, "a to lead")
    b = replica(k, namespace, "b", wall_clock=lambda: time.time() + 7)
    b.start()
    deadline = time.monotonic() + 3 * FAST.duration
    while time.monotonic() < deadline:
        assert holder(k, namespace) == "a" and b.elector.leading() is False
        time.sleep(0.2)
    assert (b.started, a.lost) == ([], [])
    a.elector.stop(release=True)  # released: b takes over without waiting
    wait_for(lambda: b.started, 2 * FAST.retry + 2, "b to take the released lease")
    b.elector.stop(release=True)


class Pausable:
    """A TCP proxy to the API server that can stop passing bytes (a partition, a hung LB)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self.open = threading.Event()
        self.open.set()
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        self.open.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                self.open.wait()  # held: the bytes wait here, the client waits for an answer
                if self._closed.is_set():
                    break
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _through(kube: KubeEndpoints, proxy: Pausable, folder: Path) -> Kube:
    config = json.loads(kube.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    path = folder / "kubeconfig"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return Kube.from_kubeconfig(path)


def test_a_leader_cut_off_from_the_api_server_stops_before_anyone_takes_over(
    kube: KubeEndpoints, k: Kube, namespace: str, tmp_path: Path
) -> None:
    host, port = kube.server.removeprefix("https://").rsplit(":", 1)
    proxy = Pausable((host, int(port)))
    cut_off = _through(kube, proxy, tmp_path)  # its requests hang: the default 30 s timeout
    a = Replica(LeaderElector(cut_off, namespace, "le", "a", timings=FAST))
    try:
        a.start()
        wait_for(lambda: a.started, 5, "a to lead")
        b = replica(k, namespace, "b")
        b.start()
        time.sleep(FAST.duration)
        proxy.open.clear()
        held_at = time.monotonic()
        wait_for(lambda: b.started, 4 * FAST.duration, "b to take over")
        assert a.lost, "a still leads after b took over"
        print(f"cut off -> a stepped down: {a.lost[0] - held_at:.2f} s; "
              f"-> b took over: {b.started[0] - held_at:.2f} s")  # fmt: skip
        assert a.lost[0] - held_at <= FAST.renew_deadline + 0.5
        assert b.started[0] - a.lost[0] >= FAST.duration - FAST.renew_deadline - FAST.retry
        assert not a.elector.leading() and holder(k, namespace) == "b"
        b.elector.stop(release=True)
    finally:
        proxy.close()
        a.elector.stop(release=False)
        cut_off.close()


# ---- two daemons, one paused with SIGSTOP past its lease ----------------------------------------


@dataclass
class Daemon:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path


@dataclass(frozen=True)
class Report:
    """What one replica answered on /metrics: leading or not (None: no answer)."""

    name: str
    sent: float
    received: float
    leading: bool | None


def _start_daemon(kube: KubeEndpoints, repo: Path, folder: Path, name: str) -> Daemon:
    folder.mkdir()
    port = free_port()
    log = folder / "run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "run", "--source-dir", str(repo),
             "--kubeconfig", str(kube.kubeconfig), "--no-scheduler", "--node-sync-interval",
             "0", "--slurm-metrics-interval", "0", "--leader-elect", "--lease-duration", "3",
             "--identity", name,
             "--listen", f"127.0.0.1:{port}", "--workdir", str(folder / "w"), "--interval", "1"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return Daemon(name, process, port, log)


def _leading(port: int) -> bool | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=0.3) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    for family in text_string_to_metric_families(text):
        if family.name == "reconciler_leader":
            return family.samples[0].value == 1.0
    return None


class Watcher:
    """Asks every replica, again and again, whether it leads."""

    def __init__(self, daemons: list[Daemon]) -> None:
        self.reports: list[Report] = []
        self._daemons = daemons
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._ask, args=(d,), daemon=True) for d in daemons
        ]
        for thread in self._threads:
            thread.start()

    def leader(self) -> str | None:
        latest = {r.name: r for r in self.reports}
        leading = [name for name, r in latest.items() if r.leading]
        return leading[0] if len(leading) == 1 else None

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _ask(self, daemon: Daemon) -> None:
        while not self._stop.is_set():
            sent = time.monotonic()
            leading = _leading(daemon.port)
            self.reports.append(Report(daemon.name, sent, time.monotonic(), leading))
            time.sleep(0.05)


def test_a_leader_paused_past_its_lease_never_leads_beside_its_successor(
    kube: KubeEndpoints, k: Kube, namespace: str, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPO, repo)
    (repo / "reconciler.yaml").write_text(f"release: le\nnamespace: {namespace}\n")
    daemons = [_start_daemon(kube, repo, tmp_path / n, n) for n in ("replica-a", "replica-b")]
    watcher = Watcher(daemons)
    try:
        first = wait_for(watcher.leader, 30, "a leader: " + daemons[0].log.read_text())
        assert holder(k, namespace, "le-reconciler") == first
        paused = next(d for d in daemons if d.name == first)
        successor = next(d for d in daemons if d.name != first)
        time.sleep(2)
        paused.process.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        wait_for(lambda: watcher.leader() == successor.name, 20, "the successor to lead")
        took_over = next(r for r in watcher.reports if r.name == successor.name and r.leading)
        print(f"SIGSTOP -> successor leads: {took_over.received - stopped_at:.2f} s "
              "(lease 3 s, renew deadline 2 s, retry 0.4 s)")  # fmt: skip
        assert holder(k, namespace, "le-reconciler") == successor.name
        time.sleep(max(0.0, stopped_at + 6 - time.monotonic()))  # paused twice the lease
        paused.process.send_signal(signal.SIGCONT)
        resumed_at = time.monotonic()
        assert paused.process.wait(timeout=5) == 1, paused.log.read_text()
        print(f"SIGCONT -> the paused leader exited: {time.monotonic() - resumed_at:.2f} s")
        time.sleep(2)
        assert watcher.leader() == successor.name
        assert holder(k, namespace, "le-reconciler") == successor.name
    finally:
        watcher.stop()
        for daemon in daemons:
            with contextlib.suppress(ProcessLookupError):
                os.kill(daemon.process.pid, signal.SIGCONT)
    _assert_never_two_leaders(watcher.reports)
    text = paused.log.read_text()
    assert "stops leading" in text and "Traceback" not in text, text
    stop_cleanly(successor.process, successor.log)


def _assert_never_two_leaders(reports: list[Report]) -> None:
    """A 'leading' answer was true at some moment between its sending and its receipt. Once a
    replica has said it leads, no other may say so in an answer received after that."""
    leading = sorted((r for r in reports if r.leading), key=lambda r: r.sent)
    first: dict[str, Report] = {}
    for report in leading:
        first.setdefault(report.name, report)
    for name, began in first.items():
        before = [r for r in leading if r.name != name and first[r.name].sent < began.sent]
        late = [r for r in before if r.received > began.sent]
        assert not late, f"{late[0].name} said it led after {name} began to: {late[0]}, {began}"
