"""Kubernetes resource quantities ("16Gi", "500m", "1.5") as exact Decimals.

`parse_quantity` is apimachinery's `resource.ParseQuantity` (pkg/api/resource/quantity.go:
`parseQuantityString`, `ParseQuantity`, and suffix.go), read in Kubernetes 1.20.2, whose code
the current upstream still has: the Decimal equals the value of the parsed Quantity, odd inputs
included (tests/unit/quantity_tables.py holds Kubernetes' own tables). So:
- a fraction of a nano is rounded away from zero to whole nanos ("0.1n" is 1n, "-0.1n" -1n);
- a binary-suffixed amount is capped at 2^63-1 in magnitude ("9Ei"); a decimal one is not;
- no whitespace around it (" 1" is refused);
- "1." is 1 and ".5" 0.5; "." and "-" are 0, and so is a suffix alone ("Ki", "m", "e3"), but for
  "Pi" and "Ei", whose path parses the digits and finds none; an exponent is truncated to 32 bits
  as Go's int32() does ("1e4294967296" is 1).
An int or a float (a YAML number) is parsed from its JSON text, as `Quantity.UnmarshalJSON` does.

`manifest_quantity` reads a quantity field of a manifest as the API server decodes it
(`Quantity.UnmarshalJSON`), which allows spaces around a string.

Deliberate differences, which no resource amount meets: the result is a Decimal, not an inf.Dec
or int64 pair with a format (the same value; the format only shapes String(), which nothing
here prints); a magnitude of 10^1001 or more is refused as out of range, where Kubernetes keeps a
decimal one ("1e999999999"): exact arithmetic on such numbers is slow, and past 1e999999
Decimal's default context overflows. The kubernetes client's `parse_quantity` is not used:
importing it loads the whole API client, and it is not ParseQuantity (it takes "16 Gi" and
" 1", and neither rounds nor caps).
"""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MIN_EMIN, ROUND_UP, Context, Decimal
from typing import Final

INT64_MAX: Final = 2**63 - 1
# Refused beyond 10**EXPONENT_LIMIT (module docstring).
EXPONENT_LIMIT: Final = 1000
# ParseQuantity's scanner, as one expression: sign, leading zeros, whole digits, fraction, then
# suffix letters, a sign and digits ("1.5Gi", "-.5e-3", "1.", "Ki"). Every part may be empty.
_SCANNED = re.compile(r"([+-]?)(0*)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_EXPONENT = re.compile(r"[eE]([+-]?)0*([0-9]+)")
_DECIMAL_SUFFIX = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIX = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_NANO: Final = Decimal("1e-9")
# What UnmarshalJSON's strings.TrimSpace can take off a string field: Go's spaces that survive
# JSON encoding as themselves. The JSON a manifest reaches the API server as is written by Go
# (kubectl; server-side apply re-encodes it), which escapes \t\n\v\f\r, U+2028 and U+2029, and
# an escape is no space to TrimSpace.
_JSON_SPACE: Final = " \x85\xa0\u1680\u202f\u205f\u3000" + "".join(map(chr, range(0x2000, 0x200B)))
_EXAMPLES = "examples: 8, 500m, 16Gi, 1.5G"


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Decimal:
    """`resource.ParseQuantity`; an int or a float (a YAML number) is read from its JSON text."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity ({_EXAMPLES})")
    try:
        text = value if isinstance(value, str) else repr(value)  # repr(0.1) is "0.1", as Go's
    except ValueError:  # an int of more than 4300 digits
        raise QuantityError("an integer of more than 4300 digits is out of range") from None
    amount = _parsed(text)
    if amount is None:
        spaced = text != text.strip()
        hint = "no spaces around it" if spaced else _EXAMPLES
        raise QuantityError(f"{value!r} is not a quantity ({hint})")
    if amount and amount.adjusted() > EXPONENT_LIMIT:
        raise QuantityError(f"{value!r} is out of range (1e{EXPONENT_LIMIT + 1} or more)")
    return amount


def manifest_quantity(value: str | int | float) -> Decimal:
    """A quantity field of a manifest: `Quantity.UnmarshalJSON` takes spaces off a string."""
    return parse_quantity(value.strip(_JSON_SPACE) if isinstance(value, str) else value)


def _parsed(text: str) -> Decimal | None:
    """ParseQuantity's value, or None where it returns an error."""
    scanned = _SCANNED.fullmatch(text) if text else None
    if scanned is None:  # ErrFormatWrong
        return None
    sign, zeros, whole, fraction, suffix = scanned.groups()
    fraction = fraction or ""
    number = (whole or "0") + fraction  # every digit; what is left of the point is `num`
    interpreted = _suffix(suffix)
    if interpreted is None:  # ErrSuffix
        return None
    base, exponent = interpreted
    # The int64 fast path, where it is taken: no rounding, no cap.
    if base == 10:
        precision, scale, factor = 18 - len(number), exponent, 1
    elif not fraction:
        precision, scale, factor = 14 - len(number) - exponent * 3 // 10, 0, 1 << exponent
    else:
        precision, scale, factor = -1, 0, 1
    scale = _int32(scale - len(fraction))
    if precision >= 0 and scale >= -9:  # so `number` has 18 digits at most
        result = int(number) * factor
        if result <= INT64_MAX:
            return Decimal(f"{sign}{result}E{scale}") if result else Decimal(0)
    # The inf.Dec path: it parses the text before the suffix, which needs a digit.
    if not (zeros or whole or fraction):  # ErrNumeric
        return None
    context = Context(prec=len(number) + 40, Emax=MAX_EMAX, Emin=MIN_EMIN)
    if base == 10:
        amount = Decimal(f"{number}E{-_int32(len(fraction) + _int32(-exponent))}")
    else:
        amount = context.multiply(Decimal(f"{number}E-{len(fraction)}"), 1 << exponent)
    if amount and int(amount.as_tuple().exponent) < -9:
        amount = amount.quantize(_NANO, rounding=ROUND_UP, context=context)
    if base == 2:
        amount = min(amount, Decimal(INT64_MAX))
    return amount.copy_negate() if sign == "-" and amount else amount


def _suffix(suffix: str) -> tuple[int, int] | None:
    """(base, exponent), as quantitySuffixer.interpret."""
    if suffix in _DECIMAL_SUFFIX:
        return 10, _DECIMAL_SUFFIX[suffix]
    if suffix in _BINARY_SUFFIX:
        return 2, _BINARY_SUFFIX[suffix]
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is None:
        return None
    sign, digits = exponent.groups()
    if len(digits) > 19 or int(digits) > INT64_MAX + (sign == "-"):  # strconv.ParseInt's range
        return None
    return 10, _int32(-int(digits) if sign == "-" else int(digits))


def _int32(number: int) -> int:
    """Go's int32 arithmetic: wrapped to 32 bits."""
    return (number + 2**31) % 2**32 - 2**31
