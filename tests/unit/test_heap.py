"""The daemon's heap: a fragmented heap's free pages given back, and its threads sharing two
malloc arenas: what keeps a long-running daemon's VmRSS from creeping up (bench/README.md,
"Soak")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.daemon.heap import ARENAS, GLIBC_TUNABLES, trim_heap

# 200,000 blocks of 1 KiB (past pymalloc's 512 bytes: glibc's), one in 50 kept: ~200 MiB
# freed in holes glibc keeps until trimmed.
FRAGMENT_THEN_TRIM = """
from reconciler.daemon.heap import trim_heap
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS"))
blocks = [bytearray(1024) for _ in range(200_000)]
kept = blocks[::50]
del blocks
before = rss()
released = trim_heap()
print(before, rss(), released)
"""


def test_a_fragmented_heap_is_given_back() -> None:
    if trim_heap() is None:
        pytest.skip("not glibc: no malloc_trim")
    out = subprocess.run([sys.executable, "-c", FRAGMENT_THEN_TRIM], capture_output=True,
                         text=True, check=True).stdout.split()  # fmt: skip
    before, after, released = int(out[0]), int(out[1]), out[2]
    assert released == "True"
    assert after < before / 2, f"VmRSS {before} KiB before the trim, {after} KiB after"


# Eight threads alive at once, each allocating from glibc; then glibc's own count of its
# arenas (malloc_stats writes an "Arena N:" block per arena to stderr).
THREADS_THEN_COUNT = """
import ctypes, sys, threading
from reconciler.daemon.heap import limit_arenas
if sys.argv[1] == "limited":
    assert limit_arenas() is True
barrier, kept = threading.Barrier(8), []
def work():
    kept.append(bytearray(100_000))
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ctypes.CDLL(None).malloc_stats()
"""


def _arenas(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run([sys.executable, "-c", THREADS_THEN_COUNT, mode], capture_output=True,
                         text=True, check=True, env=env)  # fmt: skip
    return sum(line.startswith("Arena ") for line in out.stderr.splitlines())


def test_the_daemons_threads_share_two_malloc_arenas() -> None:
    if trim_heap() is None:
        pytest.skip("not glibc: no mallopt")
    assert _arenas("unlimited") > ARENAS  # glibc's default: an arena per thread, 8 per core
    assert _arenas("limited") == ARENAS


def test_our_image_starts_the_daemon_without_glibcs_thread_caches() -> None:
    """A tunable is read only at a process's start: the image's ENV must carry it."""
    containerfile = (Path(__file__).parents[2] / "Containerfile").read_text()
    env = containerfile[containerfile.rindex("\nENV ") :].split("\n\n")[0]
    assert f"GLIBC_TUNABLES={GLIBC_TUNABLES}" in env.split()
