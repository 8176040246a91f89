"""Leader election on a coordination.k8s.io/v1 Lease, as client-go does it: the holder renews
the lease every `renew` seconds; another replica takes it over once it has not been renewed
for `duration` seconds. Every write carries the resourceVersion it read, so two replicas can
never both win a takeover (the API server refuses the second with 409).

A leader that fails to renew within the lease duration has lost: `on_lost` is called and the
process must stop writing at once (the daemon exits; its Pod restarts as a follower).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from reconciler.adapters.kube import Kube, micro_time
from reconciler.errors import KubeApiError, ReconcilerError

log = logging.getLogger(__name__)

LEASE_API = "coordination.k8s.io/v1"


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        *,
        duration: float = 15.0,
        renew: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self._duration = duration
        self._renew = renew
        self._clock = clock
        self._stopping = threading.Event()
        self.leading = threading.Event()

    def run(self, on_started: Callable[[], None], on_lost: Callable[[], None]) -> None:
        """Block: try to acquire until we lead, then renew until stopped or lost."""
        last_renewed = 0.0
        while not self._stopping.is_set():
            try:
                held = self._try_acquire_or_renew()
            except ReconcilerError as error:
                log.warning("lease %s: %s", self._name, error)
                held = False
            now = self._clock()
            if held:
                last_renewed = now
                if not self.leading.is_set():
                    log.info("lease %s: %s is the leader", self._name, self.identity)
                    self.leading.set()
                    on_started()
            elif self.leading.is_set() and now - last_renewed >= self._duration:
                log.error("lease %s: lost by %s; stopping", self._name, self.identity)
                self.leading.clear()
                on_lost()
                return
            self._stopping.wait(self._renew if self.leading.is_set() else self._renew / 2)

    def stop(self, *, release: bool = True) -> None:
        """Stop renewing; give the lease up so a follower takes over without waiting."""
        self._stopping.set()
        if release and self.leading.is_set():
            try:
                lease = self._get()
                if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                    lease["spec"]["holderIdentity"] = ""
                    self._put(lease)
            except ReconcilerError as error:
                log.warning("lease %s: could not release it: %s", self._name, error)
            self.leading.clear()

    def _try_acquire_or_renew(self) -> bool:
        lease = self._get()
        now = self._clock()
        stamp = micro_time(datetime.fromtimestamp(now, UTC))
        if lease is None:
            return self._create(stamp)
        spec = lease.setdefault("spec", {})
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity and not self._expired(spec, now):
            return False
        if holder != self.identity:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=int(self._duration),
            renewTime=stamp,
        )
        return self._put(lease)

    def _expired(self, spec: dict[str, Any], now: float) -> bool:
        renewed = spec.get("renewTime") or spec.get("acquireTime")
        if not renewed:
            return True
        seconds = float(spec.get("leaseDurationSeconds") or self._duration)
        then = datetime.fromisoformat(str(renewed).replace("Z", "+00:00")).timestamp()
        return now - then >= seconds

    def _get(self) -> dict[str, Any] | None:
        return self._kube.get(LEASE_API, "Lease", self._name, self._namespace)

    def _create(self, stamp: str) -> bool:
        lease = {
            "apiVersion": LEASE_API,
            "kind": "Lease",
            "metadata": {"name": self._name, "namespace": self._namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self._duration),
                "acquireTime": stamp,
                "renewTime": stamp,
                "leaseTransitions": 0,
            },
        }
        path = f"/apis/{LEASE_API}/namespaces/{self._namespace}/leases"
        try:
            self._kube.request_json("POST", path, body=lease, target=f"Lease {self._name}")
        except KubeApiError as error:
            if error.status == 409:  # another replica created it first
                return False
            raise
        return True

    def _put(self, lease: dict[str, Any]) -> bool:
        path = f"/apis/{LEASE_API}/namespaces/{self._namespace}/leases/{self._name}"
        try:
            self._kube.request_json("PUT", path, body=lease, target=f"Lease {self._name}")
        except KubeApiError as error:
            if error.status == 409:  # someone wrote it since we read it: not ours this round
                return False
            raise
        return True
