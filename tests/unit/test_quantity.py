"""parse_quantity is apimachinery's ParseQuantity: Kubernetes' own tables (quantity_tables.py),
odd inputs whose results were taken from the Go code, and properties of every result."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.kuberules.quantity import (
    EXPONENT_LIMIT,
    INT64_MAX,
    QuantityError,
    manifest_quantity,
    parse_quantity,
)
from tests.unit.quantity_tables import (
    JSON_WHITESPACE,
    QUANTITY_PARSE,
    QUANTITY_PARSE_EMIT,
    QUANTITY_PARSE_INVALID,
    QUANTITY_STRING,
    dec,
)

# Not upstream rows: what ParseQuantity of Kubernetes 1.20.2, built from its source
# (resource/quantity.go with the vendored gopkg.in/inf.v0), returned for odd inputs; None is an
# error. The current upstream code is the same.
ODD_INPUTS: list[tuple[str, Decimal | None]] = [
    # no digits: 0, unless the binary suffix sends it down the inf.Dec path, which wants a digit
    ("-", dec(0, 0)),
    ("+", dec(0, 0)),
    (".", dec(0, 0)),
    ("-.", dec(0, 0)),
    ("Ki", dec(0, 0)),
    ("-Ti", dec(0, 0)),
    ("m", dec(0, 0)),
    ("e3", dec(0, 0)),
    ("Pi", None),
    ("Ei", None),
    (".Pi", None),
    ("e-10", None),  # the inf.Dec path too: below a nano
    # leading and trailing points
    ("+.5", dec(5, -1)),
    ("-.5", dec(-5, -1)),
    ("5.G", dec(5, 9)),
    ("1.Pi", dec(2**50, 0)),
    ("00.000", dec(0, 0)),
    # "E" alone is exa, "e" alone nothing; an exponent and a suffix never go together
    ("1E", dec(1, 18)),
    ("1e", None),
    ("1e+", None),
    ("1e-", None),
    ("1E3Ki", None),
    ("1e3Gi", None),
    ("1Ki3", None),
    ("1e0003", dec(1, 3)),
    ("1e-0", dec(1, 0)),
    # rounded up to a whole nano, away from zero
    ("1.5e-9", dec(2, -9)),
    ("-1.5e-9", dec(-2, -9)),
    ("-0.0000000001", dec(-1, -9)),
    ("0.0000000001e9", dec(1, -1)),
    # long numbers: exact, beyond int64 too, when decimal; binary ones are capped
    ("1234567890123456789", dec(1234567890123456789, 0)),
    ("12345678901234567890123456789.123456789123", dec(12345678901234567890123456789123456790, -9)),
    ("-12345678901234567890123456789.1234567891", dec(-12345678901234567890123456789123456790, -9)),
    ("9223372036854775808", dec(2**63, 0)),
    ("8Ei", dec(INT64_MAX, 0)),
    ("-9Ei", dec(-INT64_MAX, 0)),
    ("7.9999999999999999999Ei", dec(INT64_MAX, 0)),
    ("9007199254740993Ki", dec(INT64_MAX, 0)),
    ("1e1000", dec(1, 1000)),
    # the exponent is read as an int64, then truncated to int32
    ("1e4294967296", dec(1, 0)),
    ("1e4294967297", dec(1, 1)),
    ("1e9223372036854775807", dec(1, -1)),
    ("1e9223372036854775808", None),
    # not quantities
    ("1 Ki", None),
    ("1\t", None),
    ("1,5", None),
    ("1_000", None),
    ("0x10", None),
    ("\uff11", None),  # a fullwidth 1: Go's scanner takes ASCII digits only
    ("1KI", None),
    ("1ki", None),
    ("1.5.5", None),
    ("--1", None),
    ("+-1", None),
    ("1+", None),
    ("1e3.5", None),
    ("Infinity", None),
    ("NaN", None),
]

# Where we differ on purpose (quantity.py's docstring): Kubernetes keeps these, we refuse them as
# out of range. "0.5e-2147483648" is 5e2147483647 to Kubernetes: its int32 exponent wraps.
OUT_OF_RANGE = ["1e1001", "-1E1001", "1e999999999", "1" + "0" * 1001, "0.5e-2147483648"]

# Manifest fields: what Kubernetes 1.20.2 made of the string when Go JSON-encoded it (kubectl, and
# server-side apply's re-encoding) and Quantity.UnmarshalJSON decoded it; None is an error.
MANIFEST_STRINGS: list[tuple[str, Decimal | None]] = [
    (" 16Gi ", dec(16 * 2**30, 0)),
    ("\xa01\u3000", dec(1, 0)),  # Go spaces that JSON leaves as they are
    ("\u200a1\x85", dec(1, 0)),
    ("\t1", None),  # escaped by JSON ("\t"), and an escape is no space to TrimSpace
    ("1\n", None),
    ("\u20281", None),
    ("\u200b1", None),  # zero width: not a space to Go
    ("16 Gi", None),
]


@pytest.mark.parametrize(("text", "value"), QUANTITY_PARSE)
def test_kubernetes_parse_table(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value
    assert parse_quantity(f"-{text}") == -value
    assert parse_quantity(f"+{text}") == value


@pytest.mark.parametrize("text", QUANTITY_PARSE_INVALID)
def test_kubernetes_invalid_inputs(text: str) -> None:
    with pytest.raises(QuantityError, match="is not a quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(("value", "canonical", "other"), QUANTITY_STRING)
def test_kubernetes_string_table_parses_to_the_value(
    value: Decimal, canonical: str, other: str
) -> None:
    assert parse_quantity(canonical) == value
    if other:
        assert parse_quantity(other) == value


@pytest.mark.parametrize(("text", "canonical", "value"), QUANTITY_PARSE_EMIT)
def test_kubernetes_parse_emit_table(text: str, canonical: str, value: Decimal) -> None:
    assert parse_quantity(text) == parse_quantity(canonical) == value
    assert parse_quantity(f"-{text}") == -value


@pytest.mark.parametrize(("document", "value"), JSON_WHITESPACE)
def test_kubernetes_json_whitespace_table(document: str, value: Decimal) -> None:
    assert manifest_quantity(json.loads(document)) == value


def _parses_to(parse: Callable[[str], Decimal], text: str, value: Decimal | None) -> None:
    if value is None:
        with pytest.raises(QuantityError):
            parse(text)
    else:
        assert parse(text) == value


@pytest.mark.parametrize(("text", "value"), ODD_INPUTS)
def test_odd_inputs_as_the_go_code_parses_them(text: str, value: Decimal | None) -> None:
    _parses_to(parse_quantity, text, value)


@pytest.mark.parametrize("text", OUT_OF_RANGE)
def test_huge_values_are_refused_on_purpose(text: str) -> None:
    limit = f"1e{EXPONENT_LIMIT + 1}"
    with pytest.raises(QuantityError, match=f"is out of range \\({limit} or more\\)"):
        parse_quantity(text)


@pytest.mark.parametrize(("text", "value"), MANIFEST_STRINGS)
def test_manifest_fields_as_the_api_server_decodes_them(text: str, value: Decimal | None) -> None:
    _parses_to(manifest_quantity, text, value)
    with pytest.raises(QuantityError):  # ParseQuantity itself takes no space at all
        parse_quantity(text)


def test_errors_name_the_value_and_show_examples() -> None:
    with pytest.raises(QuantityError, match=r"^'16GB' is not a quantity \(examples: 8, 500m"):
        parse_quantity("16GB")
    with pytest.raises(QuantityError, match=r"^' 1' is not a quantity \(no spaces around it\)$"):
        parse_quantity(" 1")


def test_numbers_from_yaml_are_read_from_their_json_text() -> None:
    # As UnmarshalJSON parses a JSON number's text: rounded to nanos like any other.
    assert parse_quantity(8) == 8
    assert parse_quantity(0.5) == Decimal("0.5")
    assert parse_quantity(1e-10) == Decimal("1e-9")
    assert parse_quantity(-1.5e16) == Decimal("-15e15")
    for refused in (True, float("inf"), float("nan"), 10**1001, 10**5000):
        with pytest.raises(QuantityError):
            parse_quantity(refused)


SUFFIXES = {
    **{s: Fraction(10) ** e for s, e in [("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3)]},
    **{s: Fraction(10) ** e for s, e in [("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)]},
    **{f"{s}i": Fraction(2) ** (10 * i) for i, s in enumerate("KMGTPE", start=1)},
}


@given(st.integers(0, 10**40), st.sampled_from(sorted(SUFFIXES)), st.sampled_from(["", "-", "+"]))
def test_an_integer_with_any_suffix(number: int, suffix: str, sign: str) -> None:
    # Either side of the int64 fast path; a binary amount is capped, a decimal one is not.
    value = number * SUFFIXES[suffix]
    if suffix.endswith("i"):
        value = min(value, Fraction(INT64_MAX))
    assert Fraction(parse_quantity(f"{sign}{number}{suffix}")) == (-value if sign == "-" else value)


QUANTITY_TEXT = st.text(alphabet="0123456789.+-eEinumkKMGTP", max_size=30)


@given(st.one_of(QUANTITY_TEXT, st.text(max_size=12)))
def test_any_result_is_whole_nanos_within_range(text: str) -> None:
    try:
        value = parse_quantity(text)
    except QuantityError:
        return
    assert (Fraction(value) * 10**9).denominator == 1
    assert value == 0 or value.adjusted() <= EXPONENT_LIMIT
    if text.endswith("i"):
        assert abs(value) <= INT64_MAX
    if text[:1] not in "+-":
        assert parse_quantity(f"-{text}") == value.copy_negate()
