"""trim_heap gives a fragmented heap's free pages back: what keeps a long-running daemon's
VmRSS from creeping up under churn (bench/README.md, "Soak")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reconciler.daemon.heap import trim_heap

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
