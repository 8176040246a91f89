"""Kubernetes resource quantities ("16Gi", "500m", "1.5") as exact Decimals.

The kubernetes package has `parse_quantity`, but importing it loads the whole API client
(~0.3 s, and the compiler must not depend on the client); tests check that both agree.
"""

from __future__ import annotations

import re
from decimal import Context, Decimal, InvalidOperation, Overflow

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
# A number, then an exponent ("1e3") or a suffix, never both ("1e3Gi" is rejected, as by the
# API server); "1E" is one exa, "1E3" is one thousand.
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?))$")


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Decimal:
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(value.strip())
    if not match:
        raise QuantityError(f"{value!r} is not a quantity (examples: 8, 500m, 16Gi, 1.5G)")
    number, exponent, suffix = match.groups()
    number += exponent or ""
    factor = _BINARY.get(suffix or "") or _DECIMAL[suffix or ""]
    try:
        # Exact: at the default 28 digits a long number times 2**60 would be rounded.
        return Context(prec=len(number) + 20).multiply(Decimal(number), factor)
    except (InvalidOperation, Overflow):  # "1.2.3", "1e999999999"
        raise QuantityError(f"{value!r} is not a quantity") from None
