"""Cluster DNS of `local up --kubelet`: Debian's dnsmasq, fed from the API's Services and
Endpoints (Debian 12 has no CoreDNS).

A watcher in the `up` process renders the Kubernetes DNS records into a hosts file and sends
dnsmasq SIGHUP, which rereads it:

    <svc>.<ns>.svc.cluster.local           the Service's cluster IP, or for a headless
                                           Service the addresses of its endpoints
    <host>.<svc>.<ns>.svc.cluster.local    an endpoint with a hostname (a Pod whose hostname
                                           and subdomain name the headless Service, as a
                                           StatefulSet's Pods have)

Names under cluster.local that are not there answer NXDOMAIN; nothing is forwarded out.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from reconciler.errors import LocalStackError
from reconciler.local.kubelets.nodes import CLUSTER_DOMAIN, CONTROL_PLANE_ADDRESS
from reconciler.local.poller import Poller

DNSMASQ = Path("/usr/sbin/dnsmasq")
POLL_SECONDS = 0.5
READY_SECONDS = 30.0


def dnsmasq_argv(hosts: Path, pid_file: Path) -> list[str]:
    return [
        str(DNSMASQ), "--keep-in-foreground", "--log-facility=-", f"--pid-file={pid_file}",
        "--no-resolv", "--no-hosts", "--no-poll", f"--addn-hosts={hosts}",
        f"--listen-address={CONTROL_PLANE_ADDRESS}", "--bind-interfaces", "--port=53",
        f"--local=/{CLUSTER_DOMAIN}/", "--domain-needed", "--cache-size=0",
        "--user=nobody", "--group=nogroup",
    ]  # fmt: skip


def wait_dnsmasq_ready(pid_file: Path, pid: Callable[[], int | None], log: Path) -> None:
    """Return once dnsmasq has written its pid file, which it does after installing its
    signal handlers: a SIGHUP (the feeder's "reread") before that ends dnsmasq, and with it
    every name in the cluster."""
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        # None also while the wrapper (nsenter) has not exec'd dnsmasq yet: keep waiting.
        running = pid()
        with contextlib.suppress(FileNotFoundError, ValueError):
            if running is not None and int(pid_file.read_text().strip() or 0) == running:
                return
        time.sleep(0.02)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
    raise LocalStackError(f"dnsmasq did not start (cluster DNS); its log {log}:\n{tail}")


def hosts_text(services: Iterable[Mapping[str, Any]],
               endpoints: Iterable[Mapping[str, Any]]) -> str:  # fmt: skip
    """The hosts file for these Services and Endpoints (plain data in, text out)."""
    by_key = {(e["metadata"]["namespace"], e["metadata"]["name"]): e for e in endpoints}
    lines: set[str] = set()
    for service in services:
        meta, spec = service["metadata"], service.get("spec") or {}
        name = f"{meta['name']}.{meta['namespace']}.svc.{CLUSTER_DOMAIN}"
        cluster_ip = spec.get("clusterIP")
        if cluster_ip and cluster_ip != "None":
            lines.add(f"{cluster_ip} {name}")
            continue
        publish_all = bool(spec.get("publishNotReadyAddresses"))
        for address in _addresses(by_key.get((meta["namespace"], meta["name"])), publish_all):
            lines.add(f"{address['ip']} {name}")
            if address.get("hostname"):
                lines.add(f"{address['ip']} {address['hostname']}.{name}")
    return "".join(f"{line}\n" for line in sorted(lines))


def _addresses(endpoints: Mapping[str, Any] | None, publish_all: bool) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for subset in (endpoints or {}).get("subsets") or []:
        found += subset.get("addresses") or []
        if publish_all:
            found += subset.get("notReadyAddresses") or []
    return found


class DnsFeeder:
    """Keeps `hosts` equal to what hosts_text makes of the API's objects; SIGHUPs dnsmasq
    (`pid` gives its PID) after each change."""

    def __init__(self, lister: Callable[[str], list[dict[str, Any]]], hosts: Path,
                 pid: Callable[[], int | None]) -> None:  # fmt: skip
        self.lister = lister  # kind -> every object of that kind (v1, all namespaces)
        self.hosts = hosts
        self.pid = pid
        self._poller = Poller(self.sync, POLL_SECONDS, "cluster-dns")

    def start(self) -> None:
        self.sync()
        self._poller.start()

    def stop(self) -> None:
        self._poller.stop()

    def sync(self) -> bool:
        """Rewrite the hosts file if the records changed; True when it did."""
        text = hosts_text(self.lister("Service"), self.lister("Endpoints"))
        with contextlib.suppress(FileNotFoundError):
            if self.hosts.read_text() == text:
                return False
        tmp = self.hosts.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.chmod(0o644)
        tmp.replace(self.hosts)
        pid = self.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGHUP)
        return True
