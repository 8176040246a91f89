"""Leader election on a coordination.k8s.io/v1 Lease, as client-go does it, so that two
replicas never act at once.

- The leader renews every `retry` seconds on a thread of its own (never the thread that
  starts its work: a slow start must not stop the renewals).
- A follower judges a lease expired by its own observation: it takes over only after seeing
  the lease record unchanged for the lease's duration on its own monotonic clock. The
  renewTime written in the lease is never compared with a local clock, so clocks that
  disagree between nodes cannot make two leaders.
- The leader counts from the moment before it sent its last successful renewal, and stops
  leading `renew_deadline` seconds after it (shorter than the lease): it has stopped before
  any follower, which counts from a later moment, may take over.
- Any doubt ends the leadership: the deadline passed (the API server was slow, or this
  process was paused), another holder in the lease, the start callback failed. `on_lost` is
  called once and must stop every write at once (the daemon exits; its Pod restarts as a
  follower). `leading()` answers from the local clock alone, so even a thread that runs
  before the watchdog after a pause is told the truth.

Every write carries the resourceVersion it read, so two replicas can never both win a
takeover (the API server refuses the second with 409).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.adapters.kube import Kube
from reconciler.adapters.kube_wire import micro_time
from reconciler.errors import KubeApiError, ReconcilerError

log = logging.getLogger(__name__)

LEASE_API = "coordination.k8s.io/v1"
WATCHDOG_SECONDS = 0.1  # how soon after the deadline (or a pause) the leader steps down


@dataclass(frozen=True)
class LeaseTimings:
    duration: float = 15.0  # a lease seen unchanged this long may be taken over
    renew_deadline: float = 10.0  # a leader not renewed this long stops leading
    retry: float = 2.0  # how often the leader renews and a follower looks

    def __post_init__(self) -> None:
        if not 0 < self.retry < self.renew_deadline < self.duration:
            raise ReconcilerError(
                f"lease timings retry {self.retry:g} s, renew deadline "
                f"{self.renew_deadline:g} s, duration {self.duration:g} s: expected "
                "0 < retry < renew deadline < duration",
                hint="the leader must stop before a follower may take over",
            )

    @classmethod
    def for_duration(cls, duration: float) -> LeaseTimings:
        """client-go's proportions: 15 s lease, 10 s renew deadline, 2 s retry."""
        if duration < 1:
            raise ReconcilerError(
                f"--lease-duration {duration:g}: expected at least 1 second",
                hint="15 is client-go's default",
            )
        return cls(duration, duration * 2 / 3, duration * 2 / 15)


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        *,
        timings: LeaseTimings | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self.timings = timings or LeaseTimings()
        self._clock = clock  # judges everything: renew deadline, expiry
        self._wall_clock = wall_clock  # only for the stamps people read in the lease
        self._stopping = threading.Event()
        self._lost = threading.Event()
        self._lose_lock = threading.Lock()
        self._renewed_at: float | None = None  # the moment before our last successful write
        self._observed: str | None = None  # the lease record last seen (its resourceVersion)
        self._observed_at = 0.0
        self._on_lost: Callable[[], None] = lambda: None
        self._threads: list[threading.Thread] = []

    # ---- what the daemon asks ---------------------------------------------------------------

    def leading(self) -> bool:
        """True while this replica leads, by the local clock alone."""
        renewed = self._renewed_at
        return (
            renewed is not None
            and not self._lost.is_set()
            and self._clock() - renewed < self.timings.renew_deadline
        )

    def start(self, on_started: Callable[[], None], on_lost: Callable[[], None]) -> None:
        """`run` on a thread of its own."""
        self._spawn("leader-election", lambda: self.run(on_started, on_lost))

    def run(self, on_started: Callable[[], None], on_lost: Callable[[], None]) -> None:
        """Block until stopped or lost: acquire; once leading, call `on_started` on a thread of
        its own and renew here. Never raises."""
        self._on_lost = on_lost
        while not (self._stopping.is_set() or self._lost.is_set()):
            was_leading = self._renewed_at is not None
            if self._attempt() and not was_leading:
                log.info("lease %s: %s is the leader", self._name, self.identity)
                self._spawn("leader-watchdog", self._watch)
                self._spawn("leader-start", lambda: self._started(on_started))
            self._stopping.wait(self.timings.retry)

    def stop(self, *, release: bool = True) -> None:
        """Stop renewing; give the lease up (only once our writers have stopped: the caller
        stops them first) so a follower takes over without waiting."""
        leading = self.leading()
        self._stopping.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=self._kube.timeout + self.timings.retry)
        if release and leading and not self._lost.is_set():
            self._release()
        self._renewed_at = None

    # ---- the loop's steps ---------------------------------------------------------------------

    def _attempt(self) -> bool:
        """One try to acquire or renew; any failure is 'not this round'."""
        before = self._clock()
        try:
            held = self._acquire_or_renew()
        except ReconcilerError as error:
            log.warning("lease %s: %s", self._name, error)
            return False
        except Exception:  # a malformed lease, a bug: the watchdog still guards the deadline
            log.exception("lease %s: acquiring or renewing failed", self._name)
            return False
        if held and not self._lost.is_set():
            self._renewed_at = before
        return held

    def _acquire_or_renew(self) -> bool:
        lease = self._get()
        now = self._clock()
        if lease is None:
            return self._create()
        self._observe(lease, now)
        spec = lease.setdefault("spec", {})
        holder = str(spec.get("holderIdentity") or "")
        if holder != self.identity:
            if self._renewed_at is not None:  # we led, and the lease says otherwise
                self._lose(f"the lease names {holder or 'no holder'} now")
                return False
            if holder and not self._expired(spec, now):
                return False
            spec["acquireTime"] = self._stamp()
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=math.ceil(self.timings.duration),
            renewTime=self._stamp(),
        )
        return self._put(lease)

    def _observe(self, lease: dict[str, Any], now: float) -> None:
        record = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        if record != self._observed:
            self._observed, self._observed_at = record, now

    def _expired(self, spec: dict[str, Any], now: float) -> bool:
        """Unchanged for the holder's lease duration, as this replica saw it."""
        duration = float(spec.get("leaseDurationSeconds") or self.timings.duration)
        return now - self._observed_at >= duration

    def _watch(self) -> None:
        while not (self._stopping.is_set() or self._lost.is_set()):
            if not self.leading():
                self._lose(
                    f"not renewed for {self.timings.renew_deadline:g} s (the renew deadline)"
                )
                return
            self._stopping.wait(WATCHDOG_SECONDS)

    def _started(self, on_started: Callable[[], None]) -> None:
        try:
            on_started()
        except BaseException:  # half started is not leading: step down
            log.exception("lease %s: starting the leader's work failed", self._name)
            self._lose("its work failed to start")

    def _lose(self, why: str) -> None:
        with self._lose_lock:
            if self._lost.is_set() or self._stopping.is_set():
                return
            self._lost.set()
        log.error("lease %s: %s stops leading: %s", self._name, self.identity, why)
        self._on_lost()

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    # ---- the Lease object ---------------------------------------------------------------------

    def _stamp(self) -> str:
        return micro_time(datetime.fromtimestamp(self._wall_clock(), UTC))

    def _get(self) -> dict[str, Any] | None:
        return self._kube.get(LEASE_API, "Lease", self._name, self._namespace)

    def _create(self) -> bool:
        stamp = self._stamp()
        lease = {
            "apiVersion": LEASE_API,
            "kind": "Lease",
            "metadata": {"name": self._name, "namespace": self._namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": math.ceil(self.timings.duration),
                "acquireTime": stamp,
                "renewTime": stamp,
                "leaseTransitions": 0,
            },
        }
        path = f"/apis/{LEASE_API}/namespaces/{self._namespace}/leases"
        return self._write("POST", path, lease)

    def _put(self, lease: dict[str, Any]) -> bool:
        path = f"/apis/{LEASE_API}/namespaces/{self._namespace}/leases/{self._name}"
        return self._write("PUT", path, lease)

    def _write(self, method: str, path: str, lease: dict[str, Any]) -> bool:
        try:
            target = f"Lease {self._name}"
            written = self._kube.request_json(method, path, body=lease, target=target)
        except KubeApiError as error:
            if error.status == 409:  # another replica wrote it since we read it
                return False
            raise
        self._observe(written, self._clock())
        return True

    def _release(self) -> None:
        try:
            lease = self._get()
            spec = (lease or {}).get("spec") or {}
            if lease and spec.get("holderIdentity") == self.identity:
                spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=self._stamp())
                self._put(lease)
        except ReconcilerError as error:
            log.warning("lease %s: could not release it: %s", self._name, error)
