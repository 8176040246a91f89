"""The kubelet cluster's dnsmasq and the feeder's SIGHUP (real dnsmasq, on loopback).

CI at 221360e lost every cluster name in test_kubelet_cluster.py: the feeder's first SIGHUP
reached dnsmasq before dnsmasq had installed its handlers, and SIGHUP's default action ended
it (by hand: dnsmasq started and sent SIGHUP at once died 3 times of 3). wait_dnsmasq_ready
holds the feeder back until dnsmasq has written its pid file; without that wait this test's
SIGHUP ends dnsmasq.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reconciler.local.kubelets.cluster_dns import DNSMASQ, wait_dnsmasq_ready
from reconciler.local.ports import free_ports

Starter = Callable[[], tuple[subprocess.Popen[bytes], Path]]


@pytest.fixture()
def start(tmp_path: Path) -> Iterator[Starter]:
    if not DNSMASQ.exists() or shutil.which("nsenter") is None:
        pytest.skip("dnsmasq is not installed (tools/setup.sh installs it)")
    started: list[subprocess.Popen[bytes]] = []
    hosts = tmp_path / "hosts"
    hosts.write_text("")

    def run() -> tuple[subprocess.Popen[bytes], Path]:
        pid_file = tmp_path / f"pid{len(started)}"
        [port] = free_ports(1)
        argv = [str(DNSMASQ), "--keep-in-foreground", "--log-facility=-",
                f"--pid-file={pid_file}", "--no-resolv", "--no-hosts", "--no-poll",
                f"--addn-hosts={hosts}", "--listen-address=127.0.0.1", "--bind-interfaces",
                f"--port={port}", "--cache-size=0"]  # fmt: skip
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(process)
        return process, pid_file

    yield run
    for process in started:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=10)


def _hup_then_alive(process: subprocess.Popen[bytes]) -> bool:
    process.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    return process.poll() is None


def test_after_the_wait_dnsmasq_rereads_on_sighup_and_lives(start: Starter) -> None:
    process, pid_file = start()
    wait_dnsmasq_ready(pid_file, lambda: process.pid if process.poll() is None else None,
                       pid_file.with_suffix(".log"))  # fmt: skip
    assert _hup_then_alive(process)
