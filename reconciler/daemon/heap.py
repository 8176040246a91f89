"""The daemon's C heap, kept to what it uses over months: one malloc arena to share instead of
one per thread, no per-thread cache of freed chunks, and free pages given back to the kernel
(glibc's mallopt, GLIBC_TUNABLES and malloc_trim).

Measured with `python -m bench.soak` and an idle daemon (bench/README.md, "Soak"): Python's
objects, traced memory and allocated blocks stay flat while VmRSS creeps up. Two causes, both
in glibc's malloc, under the Python objects:

- Arenas. glibc gives each thread that allocates its own arena, up to 8 per core; the daemon
  runs 35 to 46 threads (watches, workers, HTTP servers, the job scheduler), and memory freed
  in one arena serves only the threads that share it. An idle daemon grew by 1 MiB every 40 s
  that way (the arenas' free bytes from 3.4 to 11.8 MB over five minutes, in use flat at 14.3
  MB), and malloc_trim did not bring it back. Under the GIL only one thread runs Python at a
  time, so arenas per thread buy no parallelism here: the daemon asks for two (M_ARENA_MAX)
  before it starts a thread, and the same idle daemon stays flat.
- Thread caches. Each thread keeps up to 7 freed chunks of each of glibc's 64 small sizes (up
  to 1 KiB) for itself (tcache); malloc counts them in use, and neither another thread nor
  malloc_trim reaches them. Under Pod churn, with the arenas shared, glibc's bytes in use still
  rose by about 90 KB a wave of 200 Pods and VmRSS by about 0.2 MiB, while Python's blocks
  stayed level: some 46 long-lived threads filling their caches. With the caches off
  (glibc.malloc.tcache_count=0) the same waves stay level. A tunable is read only when a
  process starts, so it is set where the daemon starts: our image's ENV (the Containerfile,
  checked against GLIBC_TUNABLES below by the tests) and the benchmarks' daemons.
- Holes. Memory freed between blocks still in use is kept by the process; malloc_trim(0)
  returns those free pages (madvise) in every arena. It is cheap (a walk of the free lists:
  about a millisecond), so the daemon calls it after each fetch.

Elsewhere than glibc (musl, macOS) there is nothing to call, and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from typing import Any

log = logging.getLogger("reconciler.daemon.heap")

ARENAS = 2  # the main thread's arena, and one the other threads share
GLIBC_TUNABLES = "glibc.malloc.tcache_count=0"  # the daemon's environment, at its start
_M_ARENA_MAX = -8  # glibc's malloc.h


def _libc_function(name: str, argtypes: list[Any]) -> Any | None:
    """NAME from the C library, or None where it has none (not glibc)."""
    library = ctypes.util.find_library("c")
    try:
        function = getattr(ctypes.CDLL(library), name) if library else None
    except (OSError, AttributeError):
        return None
    if function is not None:
        function.argtypes, function.restype = argtypes, ctypes.c_int
    return function


_TRIM = _libc_function("malloc_trim", [ctypes.c_size_t])
_MALLOPT = _libc_function("mallopt", [ctypes.c_int, ctypes.c_int])


def limit_arenas(count: int = ARENAS) -> bool | None:
    """At most COUNT malloc arenas from now on: call before the daemon starts its threads
    (a thread keeps the arena it was given). True if the C library took it, None where it
    cannot, False when MALLOC_ARENA_MAX in the environment rules instead."""
    if _MALLOPT is None:
        return None
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    taken = bool(_MALLOPT(_M_ARENA_MAX, count))
    log.debug("malloc arenas limited", extra={"arenas": count, "taken": taken})
    return taken


def trim_heap() -> bool | None:
    """Give free heap pages back; True if any were, None where the C library cannot."""
    if _TRIM is None:
        return None
    released = bool(_TRIM(0))
    log.debug("heap trimmed", extra={"released": released})
    return released
