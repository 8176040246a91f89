"""What the scheduler answers a placeholder job's hook call (hook_server.py serves them): a
start the scheduler has not seen yet (sent only by scripts of jobs an older version submitted:
placeholder.py) is a hint for the start watch to look at Slurm now (starts.py: only Slurm's
word binds a Pod, and a burst of scripts calling back costs no GET each); a signal is noted
(job_trust.py) and answered `gone` only once the Pods the job holds are released."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from reconciler.scheduler.counters import Counters
from reconciler.scheduler.decide.gang_decide import is_gang_key
from reconciler.scheduler.hook_server import HookCall
from reconciler.scheduler.job_trust import JobTrust, hook_agrees
from reconciler.scheduler.state import SchedulerState
from reconciler.scheduler.workqueue import WorkQueue

HOOK_WAIT_SECONDS = 5.0  # below the script's curl timeout (10 s)


class HookAnswers:
    def __init__(
        self,
        state: SchedulerState,
        trust: JobTrust,
        queue: WorkQueue,
        counters: Counters,
        *,
        repack: threading.Event,
        stopping: threading.Event,
        look_now: Callable[[], None],
    ) -> None:
        self._state = state
        self._trust = trust
        self._queue = queue
        self.counters = counters
        self._repack = repack  # a job started or ended: the fullest nodes changed
        self._stopping = stopping
        self._look_now = look_now  # the start watch: a job says it started

    def answer(self, call: HookCall) -> str:
        """`call.pod_uid` is a Pod UID, or a gang's key for a gang's job."""
        self.counters.hooks += 1
        state = self._state
        key, gang = call.pod_uid, is_gang_key(call.pod_uid)
        with state.lock:
            if call.job_id in state.abandoned:  # its Pod has moved on: let the job end
                return "ok" if call.kind == "started" else "gone"
            known = state.jobs.get(key)
            about = gang or key in state.pods or (known is not None and known.job_id == call.job_id)
        if about and call.kind == "started" and not (known and hook_agrees(known, call)):
            # The caller holds the key's token, which its job's user can read, and could name
            # any job and node: the start watch reads the job from Slurm.
            self._look_now()
        elif about:
            self._trust.take_hook(call, known)  # only as Slurm has the job (job_trust.py)
        self._queue.add(key, urgent=True)  # a bind waits behind no new Pod
        self._repack.set()
        if call.kind == "started":
            return "ok"
        if gang:
            return self._wait_until(lambda: state.gang_released_locked(key, call.job_id))
        return self._wait_until(lambda: state.pod_released_locked(key))

    def _wait_until(self, released: Callable[[], bool]) -> str:
        """Answer `signalled` with `gone` once `released()` (checked under the lock) holds, or
        `wait` after a while (the job asks again): one request per job every few seconds, not a
        busy poll."""
        deadline = time.monotonic() + HOOK_WAIT_SECONDS
        with self._state.pod_changed:
            while True:
                if released():
                    return "gone"
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopping.is_set():
                    return "wait"
                self._state.pod_changed.wait(remaining)
