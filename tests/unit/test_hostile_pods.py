"""Issue 31: what a Pod's author can write to hurt the daemon or gain the operator's powers.

Each test is the attack as written, and asserts what the author sees: the refusal that names
the annotation and the limit, or the policy's Deny.
"""

from __future__ import annotations

import time
import tracemalloc

import pytest

from reconciler import hostlists
from reconciler import wellknown as wk
from reconciler.scheduler.admission import Rejection, admit
from tests.unit.test_policy_pod_powers import pod

# 119 bytes that python-hostlist alone expands to 1,000,000 names (2.3 s, 148 MB before).
BOMB = ",".join(f"x{digit}[0-99999]" for digit in range(10))


# ---- item 1: hostlist annotations ----------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "key"),
    [
        ("excluded_nodes", wk.ANNOTATION_EXCLUDED_NODES),
        ("required_nodes", wk.ANNOTATION_REQUIRED_NODES),
    ],
)
def test_a_hostlist_bomb_is_refused_fast_naming_the_annotation_and_the_limit(
    field: str, key: str
) -> None:
    tracemalloc.start()
    start = time.perf_counter()
    result = admit(pod(**{field: BOMB}), kill_wait_seconds=30)
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert isinstance(result, Rejection), "a million node names were accepted"
    [line] = result.message().splitlines()
    assert key in line and "1,000,000" in line and "65,536" in line, line
    assert elapsed < 0.1 and peak < 2_000_000, (elapsed, peak)


def test_a_hostlist_at_the_limit_is_still_admitted() -> None:
    text = f"n[1-{hostlists.MAX_NAMES}]"
    result = admit(pod(excluded_nodes=text), kill_wait_seconds=30)
    assert not isinstance(result, Rejection), result
    assert len(result.excluded_nodes) == hostlists.MAX_NAMES


def test_one_name_past_the_limit_is_refused() -> None:
    text = f"n[0-{hostlists.MAX_NAMES}]"
    result = admit(pod(required_nodes=text), kill_wait_seconds=30)
    assert isinstance(result, Rejection)
    assert "65,537" in result.message() and wk.ANNOTATION_REQUIRED_NODES in result.message()
