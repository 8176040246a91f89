"""Hostlists from Pods and repos are counted before they are expanded."""

from __future__ import annotations

import time
import tracemalloc

import hostlist
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler import hostlists

# A Pod annotation of 119 bytes that python-hostlist alone expands to 1,000,000 names.
BOMB = ",".join(f"x{digit}[0-99999]" for digit in range(10))


def test_the_bomb_is_refused_before_any_name_is_made() -> None:
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(hostlists.HostlistTooLarge) as err:
        hostlists.expand(BOMB)
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert err.value.count == 1_000_000
    assert "1,000,000" in str(err.value) and "65,536" in str(err.value)
    assert elapsed < 0.05 and peak < 1_000_000


def test_a_cluster_sized_list_expands() -> None:
    names = hostlists.expand("gpu-[0-9999],cpu-[000-999]")
    assert len(names) == 11_000 and names[0] == "gpu-0" and names[-1] == "cpu-999"


def test_two_bracket_groups_multiply() -> None:
    assert hostlists.count("rack[1-300]-node[0-999]") == 300_000
    with pytest.raises(hostlists.HostlistTooLarge):
        hostlists.expand("rack[1-300]-node[0-999]")


def test_malformed_text_is_still_the_library_s_to_refuse() -> None:
    with pytest.raises(hostlist.BadHostlist):
        hostlists.expand("x[5-1]")


_range = st.tuples(st.integers(0, 30), st.integers(0, 5)).map(lambda t: f"{t[0]}-{t[0] + t[1]}")
_group = st.lists(st.one_of(_range, st.integers(0, 40).map(str)), min_size=1, max_size=3)
_part = st.tuples(
    st.sampled_from(["n", "gpu-", "a"]),
    st.lists(st.tuples(_group, st.sampled_from(["", "-x", "b"])), max_size=2),
).map(lambda t: t[0] + "".join(f"[{','.join(g)}]{s}" for g, s in t[1]))


@given(st.lists(_part, min_size=1, max_size=4).map(",".join))
def test_the_count_is_what_the_library_makes(text: str) -> None:
    assert hostlists.count(text) == len(hostlist.expand_hostlist(text, allow_duplicates=True))
