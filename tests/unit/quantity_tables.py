"""Kubernetes' own tables for resource.ParseQuantity, as data (test_quantity.py checks them).

Ported from kubernetes/kubernetes v1.20.2,
staging/src/k8s.io/apimachinery/pkg/api/resource/quantity_test.go; the current upstream file has
the same tables, and its ParseQuantity the same grammar. The comments in the tables are
upstream's. `decQuantity(i, e, format)` is written `dec(i, e)`, the value i * 10**e: we keep a
Quantity's value, not its format. No row differs from Kubernetes.
"""

from __future__ import annotations

from decimal import Decimal

INT64_MAX = 2**63 - 1  # upstream's maxAllowed


def dec(unscaled: int, exponent: int) -> Decimal:
    return Decimal(f"{unscaled}E{exponent}")


# TestQuantityParse: input -> value. Upstream also parses each input with "-" and with "+" in
# front (the negated value, the same value), and so do we.
QUANTITY_PARSE = [
    ("0", dec(0, 0)),
    ("0n", dec(0, 0)),
    ("0u", dec(0, 0)),
    ("0m", dec(0, 0)),
    ("0Ki", dec(0, 0)),
    ("0k", dec(0, 0)),
    ("0Mi", dec(0, 0)),
    ("0M", dec(0, 0)),
    ("0Gi", dec(0, 0)),
    ("0G", dec(0, 0)),
    ("0Ti", dec(0, 0)),
    ("0T", dec(0, 0)),
    # Quantity less numbers are allowed
    ("1", dec(1, 0)),
    # Binary suffixes
    ("1Ki", dec(1024, 0)),
    ("8Ki", dec(8 * 1024, 0)),
    ("7Mi", dec(7 * 1024 * 1024, 0)),
    ("6Gi", dec(6 * 1024 * 1024 * 1024, 0)),
    ("5Ti", dec(5 * 1024 * 1024 * 1024 * 1024, 0)),
    ("4Pi", dec(4 * 1024 * 1024 * 1024 * 1024 * 1024, 0)),
    ("3Ei", dec(3 * 1024 * 1024 * 1024 * 1024 * 1024 * 1024, 0)),
    ("10Ti", dec(10 * 1024 * 1024 * 1024 * 1024, 0)),
    ("100Ti", dec(100 * 1024 * 1024 * 1024 * 1024, 0)),
    # Decimal suffixes
    ("5n", dec(5, -9)),
    ("4u", dec(4, -6)),
    ("3m", dec(3, -3)),
    ("9", dec(9, 0)),
    ("8k", dec(8, 3)),
    ("50k", dec(5, 4)),
    ("7M", dec(7, 6)),
    ("6G", dec(6, 9)),
    ("5T", dec(5, 12)),
    ("40T", dec(4, 13)),
    ("300T", dec(3, 14)),
    ("2P", dec(2, 15)),
    ("1E", dec(1, 18)),
    # Decimal exponents
    ("1E-3", dec(1, -3)),
    ("1e3", dec(1, 3)),
    ("1E6", dec(1, 6)),
    ("1e9", dec(1, 9)),
    ("1E12", dec(1, 12)),
    ("1e15", dec(1, 15)),
    ("1E18", dec(1, 18)),
    # Nonstandard but still parsable
    ("1e14", dec(1, 14)),
    ("1e13", dec(1, 13)),
    ("1e3", dec(1, 3)),
    ("100.035k", dec(100035, 0)),
    # Things that look like floating point
    ("0.001", dec(1, -3)),
    ("0.0005k", dec(5, -1)),
    ("0.005", dec(5, -3)),
    ("0.05", dec(5, -2)),
    ("0.5", dec(5, -1)),
    ("0.00050k", dec(5, -1)),
    ("0.00500", dec(5, -3)),
    ("0.05000", dec(5, -2)),
    ("0.50000", dec(5, -1)),
    ("0.5e0", dec(5, -1)),
    ("0.5e-1", dec(5, -2)),
    ("0.5e-2", dec(5, -3)),
    ("0.5e0", dec(5, -1)),
    ("10.035M", dec(10035, 3)),
    ("1.2e3", dec(12, 2)),
    ("1.3E+6", dec(13, 5)),
    ("1.40e9", dec(14, 8)),
    ("1.53E12", dec(153, 10)),
    ("1.6e15", dec(16, 14)),
    ("1.7E18", dec(17, 17)),
    ("9.01", dec(901, -2)),
    ("8.1k", dec(81, 2)),
    ("7.123456M", dec(7123456, 0)),
    ("6.987654321G", dec(6987654321, 0)),
    ("5.444T", dec(5444, 9)),
    ("40.1T", dec(401, 11)),
    ("300.2T", dec(3002, 11)),
    ("2.5P", dec(25, 14)),
    ("1.01E", dec(101, 16)),
    # Things that saturate/round
    ("3.001n", dec(4, -9)),
    ("1.1E-9", dec(2, -9)),
    ("0.0000000001", dec(1, -9)),
    ("0.0000000005", dec(1, -9)),
    ("0.00000000050", dec(1, -9)),
    ("0.5e-9", dec(1, -9)),
    ("0.9n", dec(1, -9)),
    ("0.00000012345", dec(124, -9)),
    ("0.00000012354", dec(124, -9)),
    ("9Ei", INT64_MAX),
    ("9223372036854775807Ki", INT64_MAX),
    ("12E", dec(12, 18)),
    # We'll accept fractional binary stuff, too.
    ("100.035Ki", dec(10243584, -2)),
    ("0.5Mi", dec(1024 * 1024 // 2, 0)),
    ("0.05Gi", dec(536870912, -1)),
    ("0.025Ti", dec(274877906944, -1)),
    # Things written by trolls
    ("0.000000000001Ki", dec(2, -9)),  # rounds up, changes format
    (".001", dec(1, -3)),
    (".0001k", dec(100, -3)),
    ("1.", dec(1, 0)),
    ("1.G", dec(1, 9)),
]

# TestQuantityParse's invalid inputs, its empty string and TestQuantityParseNonNumericPanic's.
QUANTITY_PARSE_INVALID = [
    "1.1.M",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    # trailing whitespace is forbidden
    " 1",
    "1 ",
    "",
    "Non-Numeric",
]

# TestQuantityString: (value, canonical string, another spelling or ""). Upstream checks that
# both strings parse, and that the other one prints as the canonical one: so both parse to the
# value. (The canonical string itself is String(), which we have no use for.)
QUANTITY_STRING = [
    (dec(1024 * 1024 * 1024, 0), "1Gi", "1024Mi"),
    (dec(300 * 1024 * 1024, 0), "300Mi", "307200Ki"),
    (dec(6 * 1024, 0), "6Ki", ""),
    (dec(1001 * 1024 * 1024 * 1024, 0), "1001Gi", "1025024Mi"),
    (dec(1024 * 1024 * 1024 * 1024, 0), "1Ti", "1024Gi"),
    (dec(5, 0), "5", "5000m"),
    (dec(500, -3), "500m", "0.5"),
    (dec(1, 9), "1G", "1000M"),
    (dec(1000, 6), "1G", "0.001T"),
    (dec(1000000, 3), "1G", ""),
    (dec(1000000000, 0), "1G", ""),
    (dec(1, -3), "1m", "1000u"),
    (dec(80, -3), "80m", ""),
    (dec(1080, -3), "1080m", "1.08"),
    (dec(108, -2), "1080m", "1080000000n"),
    (dec(10800, -4), "1080m", ""),
    (dec(300, 6), "300M", ""),
    (dec(1, 12), "1T", ""),
    (dec(1234567, 6), "1234567M", ""),
    (dec(1234567, -3), "1234567m", ""),
    (dec(3, 3), "3k", ""),
    (dec(1025, 0), "1025", ""),
    (dec(0, 0), "0", ""),
    (dec(0, 0), "0", ""),
    (dec(1, 9), "1e9", ".001e12"),
    (dec(1, -3), "1e-3", "0.001e0"),
    (dec(1, -9), "1e-9", "1000e-12"),
    (dec(80, -3), "80e-3", ""),
    (dec(300, 6), "300e6", ""),
    (dec(1, 12), "1e12", ""),
    (dec(1, 3), "1e3", ""),
    (dec(3, 3), "3e3", ""),
    (dec(3, 3), "3k", ""),
    (dec(0, 0), "0", "00"),
    (dec(1, -9), "1n", ""),
    (dec(80, -9), "80n", ""),
    (dec(1080, -9), "1080n", ""),
    (dec(108, -8), "1080n", ""),
    (dec(10800, -10), "1080n", ""),
    (dec(1, -6), "1u", ""),
    (dec(80, -6), "80u", ""),
    (dec(1080, -6), "1080u", ""),
]

# TestQuantityParseEmit: input -> its canonical string, written here with the value it stands
# for. Upstream also checks each input with "-" in front, and so do we.
QUANTITY_PARSE_EMIT = [
    ("1Ki", "1Ki", dec(1024, 0)),
    ("1Mi", "1Mi", dec(1024 * 1024, 0)),
    ("1Gi", "1Gi", dec(1024 * 1024 * 1024, 0)),
    ("1024Mi", "1Gi", dec(1024 * 1024 * 1024, 0)),
    ("1000M", "1G", dec(1, 9)),
    (".001Ki", "1024m", dec(1024, -3)),
    (".000001Ki", "1024u", dec(1024, -6)),
    (".000000001Ki", "1024n", dec(1024, -9)),
    (".000000000001Ki", "2n", dec(2, -9)),
]

# TestJSONWhitespace: a JSON document decoded into a Quantity (UnmarshalJSON) -> the value of its
# expected String(). A manifest's quantity field is decoded so.
JSON_WHITESPACE = [
    ('" 1"', dec(1, 0)),
    ('"1 "', dec(1, 0)),
    ("1", dec(1, 0)),
    (" 1", dec(1, 0)),
    ("1 ", dec(1, 0)),
    ("10", dec(10, 0)),
    ("-1", dec(-1, 0)),
    (" -1", dec(-1, 0)),
]
