"""A list answer decoded as it arrives (adapters/slurm/stream.py): whatever the chunks it
comes in, the same as `json.loads` of the whole, each object of the list reduced; what
`json.loads` refuses, refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.adapters.slurm import stream
from reconciler.adapters.slurm.stream import stream_listing


def chunked(data: bytes, size: int) -> Iterator[bytes]:
    return (data[i : i + size] for i in range(0, len(data), size))


def reduced(item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return ("reduced", item)


def expected(body: Any, key: str = "jobs") -> Any:
    """json.loads' answer with each object of `key`'s list as `reduced` makes it."""
    if isinstance(body.get(key), list):
        body[key] = [reduced(i) if isinstance(i, dict) else i for i in body[key]]
    return body


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
ANSWER = st.fixed_dictionaries(
    {"jobs": st.lists(JSON | st.dictionaries(st.text(max_size=6), JSON, max_size=4), max_size=5)},
    optional={"meta": JSON, "errors": st.lists(JSON, max_size=2), "last_update": JSON},
)


@given(
    body=ANSWER,
    size=st.integers(1, 40),
    indent=st.sampled_from([None, 0, 2]),
    ascii_only=st.booleans(),
)
def test_any_chunking_decodes_as_json_loads_of_the_whole(
    body: dict[str, Any], size: int, indent: int | None, ascii_only: bool
) -> None:
    # ensure_ascii=False: characters of several bytes, cut between chunks.
    data = json.dumps(body, indent=indent, ensure_ascii=ascii_only).encode()
    assert stream_listing(chunked(data, size), "jobs", reduced) == expected(json.loads(data))


@pytest.mark.parametrize("size", [1, 2, 3, 5, 1000])
def test_numbers_and_words_cut_between_chunks_are_read_whole(size: int) -> None:
    data = (
        b'{"jobs": [12345, {"id": 678}, -1.5e3, true, null], "n": 67890, "s": "\xc3\xa9t\xc3\xa9",'
        b' "no_val64": 18446744073709551614}'
    )
    found = stream_listing(chunked(data, size), "jobs", reduced)
    assert found == {
        "jobs": [12345, ("reduced", {"id": 678}), -1500.0, True, None],
        "n": 67890,
        "s": "été",
        "no_val64": 2**64 - 2,  # Slurm's NO_VAL64: past int64, as slurmrestd writes it
    }


def test_the_list_is_found_wherever_it_stands_and_a_repeated_key_keeps_the_last() -> None:
    data = b'{"meta": {"jobs": [{"a": 1}]}, "jobs": [{"b": 2}], "x": [], "jobs": [{"c": 3}]}'
    found = stream_listing(chunked(data, 4), "jobs", reduced)
    assert found == {"meta": {"jobs": [{"a": 1}]}, "jobs": [("reduced", {"c": 3})], "x": []}


@pytest.mark.parametrize(
    "data",
    [b'{"jobs": {"a": 1}}', b'{"jobs": null}', b'{"errors": []}', b"{}", b' {"jobs": []} '],
)
def test_what_is_not_a_list_under_the_key_is_left_as_decoded(data: bytes) -> None:
    assert stream_listing(chunked(data, 3), "jobs", reduced) == json.loads(data)


@pytest.mark.parametrize(
    "data",
    [
        b"", b"  ", b"{", b'{"jobs": [', b'{"jobs": [{"a": 1}',
        b'{"jobs": [1,]}', b'{"jobs": [1 2]}', b'{"jobs": []', b'{"jobs": [],}', b'{"a" 1}',
        b'{1: 2}', b'{"a": 1 "b": 2}', b'{"jobs": []} x', b'{"jobs": []}{}', b'{"a": tru}',
        b'{"a": "\xff"}', b'{"a": "\xc3"}', b'{"a": "open}',
    ],
)  # fmt: skip
@pytest.mark.parametrize("size", [1, 4, 1000])
def test_what_json_loads_refuses_is_refused(data: bytes, size: int) -> None:
    with pytest.raises(ValueError):
        json.loads(data)
    with pytest.raises(ValueError):
        stream_listing(chunked(data, size), "jobs", reduced)


@pytest.mark.parametrize("data", [b"[]", b'[{"jobs": []}]', b'"jobs"', b"null", b"7"])
def test_an_answer_that_is_not_an_object_is_refused(data: bytes) -> None:
    json.loads(data)  # JSON all the same
    with pytest.raises(ValueError):
        stream_listing(chunked(data, 2), "jobs", reduced)


def test_a_value_of_many_chunks_is_not_decoded_once_per_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The unfinished text at least doubles between tries: a value of N chunks costs a few
    decodes, not N (a long job, or `meta`, must not make the read quadratic)."""
    data = json.dumps({"jobs": [{"text": "x" * 100_000}]}).encode()
    tries = 0

    class Counting(json.JSONDecoder):
        def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
            nonlocal tries
            tries += 1
            return super().raw_decode(s, idx)

    monkeypatch.setattr(stream, "_DECODER", Counting())
    found = stream_listing(chunked(data, 100), "jobs", lambda item: len(item["text"]))
    assert found == {"jobs": [100_000]}
    assert tries < 30  # of 1,000 chunks
